"""The one attention value that crosses every boundary: `Attention`, and `Results`, what one run returns.

`Attention` is what every view asks of a text's attention: a tile, rows, a window, one head's map, pooled maps,
the attention each token receives, per-head statistics. Two values implement it:
- `AttentionResult` (here) holds every weight, (L, H, Tq, Tk);
- `LazyAttention` (attnviz.lazy) holds each layer's queries and keys, and computes weights on demand.
Both compute statistics, pooled maps and attention received with attnviz.blocks (the eager result is the case
of one block of rows per layer). No caller outside these modules asks which one it holds.

Dimension letters, used in shape comments and docstrings across the package:

    B   batch (always 1 once a result leaves an engine)
    L   layers
    H   heads per layer
    T   tokens of one sequence (self and causal attention: queries == keys)
    Tq  query tokens: the rows of a map (the decoder side for cross-attention)
    Tk  key tokens: the columns of a map (the encoder side for cross-attention)
    D   model width (d_model)
    Dh  width of one head (d_k = D / H)

`weights[l, h, i, j]` is how much query token i attends to key token j in layer l,
head h. Every row sums to 1. Indices are 0-based in code; people read "layer l+1, head h+1".

Each axis of the weights is a `TokenAxis` (attnviz.tokens): the tokens, which are special, which
word each belongs to and its characters in the text. Views read it; none re-parses token strings.
"""

from __future__ import annotations

import operator
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, cast, get_args

import numpy as np
import torch
from torch import Tensor

from attnviz.blocks import BlockPass, block_mean, log_weights, pool_factor
from attnviz.tokens import TokenAxis

AttentionKind = Literal["self", "causal", "cross"]
ATTENTION_KINDS: tuple[str, ...] = get_args(AttentionKind)
Progress = Callable[[int, int], None]  # (done, total): work reported layer by layer
GRID_SIDE, THUMB_SIDE = 96, 32  # the pooled sizes a first pass makes: a layer's grid, the whole-model overview


def counted(n: int, noun: str) -> str:
    """ "1 layer", "6 layers": a count with its noun (a one-head toy model's overview said "All 1 layers × 1 heads")."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def percent(share: float) -> str:
    """A share as a whole percentage ("65%"), with a decimal where rounding would claim all or none of it: 0.996 is
    "99.6%", not "100%" (the Positions page called BERT's previous-token head "100% of its attention")."""
    text = f"{share:.0%}"
    if (text == "100%" and share < 1) or (text == "0%" and share > 0):
        text = f"{share:.1%}"
        if text in ("100.0%", "0.0%"):
            return "over 99.9%" if share >= 0.5 else "under 0.1%"
    return text


def whole(name: str, value) -> int:
    """A layer's, a head's or a position's index as an int (a numpy integer too), or a TypeError that says what is
    wrong: a "2" from a notebook's widget or a 2.0 from arithmetic would otherwise fail deep inside (comparing an int
    with a str) or be cut to a whole number unseen."""
    if isinstance(value, bool):
        raise TypeError(f"{name} is a whole number (got {value!r})")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} is a whole number (got {value!r}, a {type(value).__name__})") from None


class Attention(Protocol):
    """What every view asks of one kind of attention over one text (AttentionResult and LazyAttention).

    Layers, heads, rows and columns are 0-based; maps are float32 tensors on the CPU unless said.
    """

    # Read-only here (properties), so that a frozen AttentionResult and a LazyAttention both are one.
    @property
    def target(self) -> TokenAxis:
        """The rows (queries)."""
        ...

    @property
    def source(self) -> TokenAxis:
        """The columns (keys)."""
        ...

    @property
    def kind(self) -> AttentionKind:
        """ "self", "causal" or "cross"."""
        ...

    @property
    def model(self) -> str:
        """The model's name, as the user gave it."""
        ...

    @property
    def device(self) -> str:
        """Where it was computed, for people: "cpu", "cuda:0 — NVIDIA H100"."""
        ...

    @property
    def truncated(self) -> int:
        """Tokens of the text past the model's limit, left out."""
        ...

    @property
    def value_norms(self) -> Tensor | None:
        """(L, H, Tk): ||f_h(x_j)|| (Kobayashi et al. 2020), where the engine gives them."""
        ...

    @property
    def sinks(self) -> bool:
        """Whether the model has learned sink logits (gpt-oss): rows over the tokens then sum to at most 1."""
        ...

    @property
    def target_tokens(self) -> tuple[str, ...]:
        """The query tokens (rows) as text to read (their raw pieces: target.pieces)."""
        ...

    @property
    def source_tokens(self) -> tuple[str, ...]:
        """The key tokens (columns) as text to read (their raw pieces: source.pieces)."""
        ...

    @property
    def n_layers(self) -> int:
        """L, the number of layers."""
        ...

    @property
    def n_heads(self) -> int:
        """H, the number of heads per layer."""
        ...

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(L, H, Tq, Tk): the shape every weight has (or would have)."""
        ...

    @property
    def weights(self) -> Tensor:
        """(L, H, Tq, Tk): every weight; a long text's raises a ValueError that says what to ask for."""
        ...

    @property
    def eager_bytes(self) -> int:
        """What holding every weight takes (or would take)."""
        ...

    def head(self, layer: int, head: int) -> Tensor:
        """(Tq, Tk): one head's exact map."""
        ...

    def layer_window(self, layer: int) -> int:
        """This layer's sliding window in tokens, as a map marks it masked (0: none): the model's (Gemma 3: 512 on 5
        of every 6 layers), keys j with i - window < j seen by query i."""
        ...

    def tile(self, layers: Sequence[int], heads: Sequence[int], rows: slice, cols: slice) -> Tensor:
        """(l, h, r, c): exact weights of the given layers, heads, rows and columns."""
        ...

    def rows(self, indices: Sequence[int]) -> Tensor:
        """(L, H, len(indices), Tk): the exact rows of these queries."""
        ...

    def window(self, start: int, stop: int) -> tuple[Tensor, Tensor]:
        """Queries and keys start..stop-1, (L, H, w, w), and each row's share outside the window (L, H, w)."""
        ...

    def pooled(self, max_side: int = GRID_SIDE, progress: Progress | None = None) -> tuple[np.ndarray, int, int]:
        """(L, H, P, P'): every head's map pooled to at most max_side cells a side, and the block sizes."""
        ...

    def pooled_head(self, layer: int, head: int, max_side: int) -> tuple[np.ndarray, int]:
        """(P, P): one head's map pooled to at most max_side cells a side, and the block size."""
        ...

    def received(self, progress: Progress | None = None) -> Tensor:
        """(L, H, Tk): the attention each token receives, averaged over the queries."""
        ...

    def stats(self, progress: Progress | None = None, *, confidence_excludes: str = "end") -> dict[str, Tensor]:
        """{statistic: (L, H)}: attnviz.blocks' per-head statistics (self and causal attention)."""
        ...

    def has_stats(self, confidence_excludes: str = "end") -> bool:
        """Whether stats() is computed already (else it costs a pass)."""
        ...

    def analyse(
        self,
        max_sides: tuple[int, ...] = (GRID_SIDE, THUMB_SIDE),
        *,
        confidence_excludes: str = "end",
        progress: Progress | None = None,
    ) -> None:
        """One pass over every block of rows: statistics, pooled maps and attention received, kept."""
        ...


ROW_SUM_TOLERANCE = 1e-4


@dataclass(frozen=True)
class AttentionResult:
    """Per-head attention weights of one text, with the tokens that label them.

    weights: (L, H, Tq, Tk) float32, detached, on the CPU; rows sum to 1 (at most 1 with `sinks`).
    target: the rows (queries); source: the columns (keys). A plain sequence of token strings is
    accepted for either and read as `TokenAxis.plain` (special tokens by their names, each token its own word).
    device: where the forward pass ran ("cpu", "cuda:0").
    truncated: how many tokens of the input were dropped to fit the model.
    value_norms: (L, H, Tk) or None: ||f_h(x_j)||, each key's value carried through its head's part of W_O
      (Kobayashi et al. 2020); engines that own their attention (the scratch backend) fill it in.
    sinks: the model has learned sink logits (gpt-oss): each row's weights over the tokens sum to at most 1, the
      sink taking the rest (`sink_share`).
    """

    weights: Tensor
    target: TokenAxis
    source: TokenAxis
    kind: AttentionKind
    model: str
    device: str = "cpu"
    truncated: int = 0
    value_norms: Tensor | None = None
    sinks: bool = False
    windows: tuple[int, ...] = ()  # each layer's sliding window (causal: keys j with i - window < j), 0 or () none
    # what was computed from the weights (statistics): a new result (dataclasses.replace) starts with its own
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def __repr__(self) -> str:
        return described(self, "every weight held")

    def __post_init__(self) -> None:
        object.__setattr__(self, "target", as_axis(self.target))
        object.__setattr__(self, "source", as_axis(self.source))
        w = self.weights
        if not isinstance(w, Tensor):
            raise TypeError(f"weights must be a torch.Tensor, got {type(w).__name__}")
        if w.dim() != 4:
            raise ValueError(f"weights must be (L, H, Tq, Tk), got shape {tuple(w.shape)}")
        if w.dtype != torch.float32 or w.device.type != "cpu" or w.requires_grad:
            raise ValueError("weights must be float32, on the CPU and detached")
        if self.kind not in ATTENTION_KINDS:
            raise ValueError(f"kind must be one of {ATTENTION_KINDS}, got {self.kind!r}")
        tq, tk = w.shape[2], w.shape[3]
        if tq != len(self.target_tokens) or tk != len(self.source_tokens):
            raise ValueError(
                f"weights have {tq} query rows and {tk} key columns, but there are "
                f"{len(self.target_tokens)} target and {len(self.source_tokens)} source tokens"
            )
        if self.kind in ("self", "causal") and self.target != self.source:
            raise ValueError(f"{self.kind} attention needs the same tokens on both axes")
        if not torch.isfinite(w).all():
            raise ValueError("weights contain NaN or infinity")
        row_sums = w.sum(-1)  # (L, H, Tq)
        off = (row_sums - 1).clamp_min(0) if self.sinks else (row_sums - 1).abs()  # a sink's rows: at most 1
        worst = off.max().item() if w.numel() else 0.0
        if worst > ROW_SUM_TOLERANCE:
            rule = "sum to at most 1" if self.sinks else "sum to 1"
            raise ValueError(f"attention rows must {rule}; one is off by {worst:.2e}")
        if self.kind == "causal" and torch.triu(w, diagonal=1).any():
            raise ValueError("causal attention must be 0 above the diagonal")
        if self.windows and (len(self.windows) != w.shape[0] or self.kind != "causal"):
            raise ValueError(f"{len(self.windows)} sliding windows for {w.shape[0]} layers of {self.kind} attention")
        for layer, window in enumerate(self.windows):
            if window and torch.tril(w[layer], diagonal=-window).any():
                raise ValueError(f"layer {layer + 1}'s weights must be 0 beyond its sliding window of {window} tokens")
        n = self.value_norms
        if n is not None and (n.shape != (w.shape[0], w.shape[1], tk) or n.dtype != torch.float32):
            raise ValueError(f"value_norms must be float32 of shape {(w.shape[0], w.shape[1], tk)}")

    @property
    def target_tokens(self) -> tuple[str, ...]:
        """The query tokens (rows) as text to read."""
        return self.target.tokens

    @property
    def source_tokens(self) -> tuple[str, ...]:
        """The key tokens (columns) as text to read."""
        return self.source.tokens

    @property
    def n_layers(self) -> int:
        """L, the number of layers."""
        return self.weights.shape[0]

    @property
    def n_heads(self) -> int:
        """H, the number of heads per layer."""
        return self.weights.shape[1]

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(L, H, Tq, Tk)."""
        return tuple(self.weights.shape)  # type: ignore[return-value]

    @property
    def eager_bytes(self) -> int:
        """What holding every weight takes."""
        return self.weights.element_size() * self.weights.nelement()

    def layer_window(self, layer: int) -> int:
        """This layer's sliding window in tokens (0: every earlier key)."""
        return self.windows[layer] if self.windows else 0

    def head(self, layer: int, head: int) -> Tensor:
        """(Tq, Tk): one head's map, 0-based layer and head."""
        return self.weights[layer, head]

    def tile(self, layers: Sequence[int], heads: Sequence[int], rows: slice, cols: slice) -> Tensor:
        """(l, h, r, c): the weights of the given layers, heads, rows and columns."""
        return self.weights[list(layers)][:, list(heads)][:, :, rows, cols]

    def rows(self, indices: Sequence[int]) -> Tensor:
        """(L, H, len(indices), Tk): the rows of these queries, every layer and head."""
        return self.weights[:, :, list(indices)]

    def window(self, start: int, stop: int) -> tuple[Tensor, Tensor]:
        """The weights of queries and keys start..stop-1, (L, H, w, w), and each row's share outside it (L, H, w)."""
        w = self.weights[:, :, start:stop, start:stop]
        return w, (1 - w.sum(-1)).clamp_min(0)

    def pooled(self, max_side: int = GRID_SIDE, progress: Progress | None = None) -> tuple[np.ndarray, int, int]:
        """(L, H, P, P'): every head's map pooled to at most max_side cells a side, and the block sizes."""
        fq, fk = pool_factor(self.weights.shape[-2], max_side), pool_factor(self.weights.shape[-1], max_side)
        return block_mean(self.weights, fq, fk).numpy(), fq, fk  # (L, H, P, P')

    def pooled_head(self, layer: int, head: int, max_side: int) -> tuple[np.ndarray, int]:
        """(P, P): one head's map pooled to at most max_side cells a side (the larger block size of the two)."""
        maps, fq, fk = AttentionResult.pooled(self._one(layer, head), max_side)
        return maps[0, 0], max(fq, fk)

    def _one(self, layer: int, head: int) -> AttentionResult:
        w = self.weights[layer : layer + 1, head : head + 1]
        vn = None if self.value_norms is None else self.value_norms[layer : layer + 1, head : head + 1]
        return AttentionResult(
            w, self.target, self.source, self.kind, self.model, self.device, self.truncated, vn, self.sinks
        )

    def received(self, progress: Progress | None = None) -> Tensor:
        """(L, H, Tk): the attention each token receives, averaged over the queries."""
        return self.weights.mean(-2)

    def stats(self, progress: Progress | None = None, *, confidence_excludes: str = "end") -> dict[str, Tensor]:
        """{statistic: (L, H)}: attnviz.blocks' per-head statistics, each layer one block of rows."""
        if ("stats", confidence_excludes) not in self._cache:
            self.analyse((), confidence_excludes=confidence_excludes, progress=progress)
        return self._cache[("stats", confidence_excludes)]

    def has_stats(self, confidence_excludes: str = "end") -> bool:
        """Whether stats() is computed already (for an eager result it is always cheap)."""
        return ("stats", confidence_excludes) in self._cache

    def analyse(
        self,
        max_sides: tuple[int, ...] = (),
        *,
        confidence_excludes: str = "end",
        progress: Progress | None = None,
    ) -> None:
        """The statistics through attnviz.blocks, one block per layer (pooled maps are cheap here: pooled())."""
        if self.kind == "cross":
            raise ValueError("head statistics are defined for self and causal attention, not cross-attention")
        with self._lock:
            if ("stats", confidence_excludes) in self._cache:
                return
            n_l, n_h, n, _ = self.shape
            blocks = BlockPass(n_l, n_h, self.source, self.kind, confidence_excludes=confidence_excludes)
            rows = slice(0, n)
            for layer in range(n_l):
                w = self.weights[layer]  # (H, T, T)
                mass = w.sum(-1) if self.sinks else None  # (H, T): less than 1 beside a learned sink
                blocks.add(layer, rows, w, log_weights(w), torch.zeros(n_h, n), mass=mass)
                if progress:
                    progress(layer + 1, n_l)
            self._cache[("stats", confidence_excludes)] = blocks.stats()


@dataclass(frozen=True)
class Results(Mapping):
    """What one run returns: each kind of attention the model has (kind -> Attention), and what the run knows.

    A mapping, so `results["self"]` and `for kind, attention in results.items()` read as before; `main` is the
    model's own first kind (self for an encoder or an encoder-decoder, causal for a decoder).
    lazy: whether the text went past the eager budget (engines.base.is_long) and is held as queries and keys.
    """

    kinds: dict[str, Attention]
    lazy: bool = False
    notice: str | None = None  # what people should know of how it ran (a GPU fallback), or None

    def __getitem__(self, kind: str) -> Attention:
        return self.kinds[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self.kinds)

    def __len__(self) -> int:
        return len(self.kinds)

    @property
    def main(self) -> Attention:
        """The first kind: what a page shows when it shows one."""
        return next(iter(self.kinds.values()))

    @property
    def model(self) -> str:
        """The model's name."""
        return self.main.model

    @property
    def device(self) -> str:
        """Where the forward pass ran."""
        return self.main.device

    @property
    def truncated(self) -> int:
        """How many tokens of the input were dropped to fit the model."""
        return self.main.truncated

    def __repr__(self) -> str:
        how = "held as queries and keys, weights computed on demand" if self.lazy else "every weight held"
        lines = [f"Results of {self.model} on {self.device}, {how}:"]
        lines += [f"  [{kind!r}] {described(a, '')}" for kind, a in self.kinds.items()]
        return "\n".join(lines + ([f"  notice: {self.notice}"] if self.notice else []))

    def eager(self, kind: str | None = None) -> AttentionResult:
        """One kind (default: the main one) as every weight held, what a view that draws every weight reads; a
        ValueError on a long text's results (lazy.of reads those)."""
        if self.lazy:
            raise ValueError("this text is long: its attention is held as queries and keys, not every weight")
        return cast(AttentionResult, self.kinds[kind] if kind is not None else self.main)

    def with_notice(self, notice: str | None) -> Results:
        """The same results, with a notice."""
        return Results(self.kinds, self.lazy, notice)


def as_axis(tokens: TokenAxis | Sequence[str]) -> TokenAxis:
    """A TokenAxis as it is, or plain token strings read as `TokenAxis.plain`."""
    return tokens if isinstance(tokens, TokenAxis) else TokenAxis.plain(tuple(tokens))


def head_name(layer: int, head: int) -> str:
    """A head as people name it everywhere (pages, polls, printed output, CSV): 0-based (3, 4) -> "L4H5"."""
    return f"L{layer + 1}H{head + 1}"


def head_index(name: str) -> tuple[int, int]:
    """head_name's inverse: "L4H5" (1-based) -> (3, 4), 0-based; a ValueError that shows the form otherwise."""
    m = re.fullmatch(r"L(\d+)H(\d+)", name.strip())
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise ValueError(f"a head is written L<layer>H<head>, 1-based, like L3H5 (got {name!r})")
    return int(m.group(1)) - 1, int(m.group(2)) - 1


def described(a: Attention, how: str) -> str:
    """One line for a result's repr (a notebook prints it as text): its kind, model, shape, a few tokens; never its
    tensors (a View, a Results and an AttentionResult each printed about 24 KB)."""
    shown = " ".join(a.target_tokens[:6]) + (" …" if len(a.target_tokens) > 6 else "")
    cut = f", {a.truncated:,} tokens cut" if a.truncated else ""
    return (
        f"{type(a).__name__}({a.kind}, {a.model}: {counted(a.n_layers, 'layer')} × {counted(a.n_heads, 'head')} × "
        f"{len(a.target_tokens):,} × {len(a.source_tokens):,} tokens{', ' + how if how else ''}, "
        f"on {a.device}{cut}; {shown!r})"
    )
