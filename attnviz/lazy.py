"""Attention too large to hold, computed on demand: `LazyAttention`.

Every tool that draws attention holds layers x heads x N x N weights and so stops early: SmolLM2 at
4,096 tokens would be 18 GB. What the forward pass leaves that is linear in N is each layer's
queries and keys after the position encoding, (L, H, N, Dh). From them any weight is exact:

    w_ij = exp(q_i . k_j / sqrt(Dh) - lse_i),   lse_i = log sum_j' exp(q_i . k_j' / sqrt(Dh))

(j, j' over the keys query i may see). The row constants lse (L, H, N) are computed once, in row
blocks whose size bounds memory; after that a tile, a row or a window costs only its own cells,
and pooled maps and per-head statistics stream through the rows block by block, never holding
more than `block_bytes` of weights. A causal block only touches the keys its rows can see.

A LazyAttention is an `Attention` (attnviz.result) like an AttentionResult, and computes instead of storing:
`tile`, `rows`, `head`, `window`, `pooled`, `stats`, `received`. Statistics, pooled maps and attention received
come from attnviz.blocks, the same code an AttentionResult uses.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import torch
from torch import Tensor

from attnviz import fused
from attnviz.blocks import BlockPass, block_counts, pool_factor, pool_rows
from attnviz.result import GRID_SIDE, THUMB_SIDE, AttentionKind, AttentionResult, Progress, Results, as_axis, described
from attnviz.tokens import TokenAxis

BLOCK_BYTES = 16 * 2**20  # on the CPU, the most weights one block holds at once: it stays in the cache (block_size)
OOM_NOTICE = "The GPU ran out of memory, so this text's weights were computed on the CPU (slower, same numbers)."
MASKED = float("-inf")  # a masked score: its weight is exactly 0 (exp of the float minimum, or of anything below
# -104, takes torch's slow path: 3x to 7x the time of exp(-inf); the analysis zeroes these before it multiplies)
MAX_ROWS = 256  # at most this many rows a block: a causal block computes (and discards) its own triangle, r / N of all
GPU_BLOCK_BYTES = (64 * 2**20, 2 * 2**30)  # on a GPU: an eighth of its free memory, within these
GPU_MAX_ROWS = 4096


def block_size(device: torch.device) -> tuple[int, int]:
    """(block_bytes, max_rows) for blocks computed on `device`.

    CPU: 16 MB and 256 rows, measured on this 2-core machine (bench/RESULTS.md): the several passes over a block
    (max, exp, sums, products) then find it in the cache; 64 MB blocks took 1.7x as long at N = 8,192. GPU: an
    eighth of the memory free when the pass starts (a block's scores, weights and one temporary copy live at once),
    64 MB to 2 GB, and up to 4,096 rows: few, large blocks, since every block is a handful of kernel launches.
    """
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        low, high = GPU_BLOCK_BYTES
        return int(min(high, max(low, free // 8))), GPU_MAX_ROWS
    return BLOCK_BYTES, MAX_ROWS


@dataclass(eq=False)
class LazyAttention:
    """Per-layer queries and keys, and exact attention weights computed from them on demand, in blocks."""

    q: Tensor  # (L, H, N, Dh) float32, after the position encoding
    k: Tensor  # (L, H_kv, N, Dh) float32; H_kv divides H (grouped-query attention)
    target: TokenAxis
    source: TokenAxis
    kind: AttentionKind
    model: str
    device: str = "cpu"
    truncated: int = 0
    scale: float = 0.0  # the score scale; 0: 1 / sqrt(Dh)
    block_bytes: int = 0  # 0: block_size(the device of q)
    max_rows: int = 0  # 0: block_size(the device of q)
    value_norms: Tensor | None = None  # (L, H, N) like AttentionResult's
    notice: str | None = None  # set when the GPU ran out of memory and the queries and keys moved to the CPU
    precision: str = "exact"  # the fused pass's products (attnviz.fused.PRECISIONS); the plain pass is exact
    windows: tuple[int, ...] = ()  # each layer's sliding window (causal: keys j with i - window < j), 0 or () none
    scales: tuple[float, ...] = ()  # each layer's score scale where they differ (GPT-2's 1 / (sqrt(Dh) (l + 1))); ()
    # `scale` for every layer
    softcap: float = 0.0  # soft-capped scores (Gemma 2): softcap * tanh(s / softcap); 0 none
    sink_logits: Tensor | None = None  # (L, H) learned sink logits (gpt-oss): each row's weights over the tokens sum to
    # less than 1, the sink taking the rest
    normalisers: tuple[Tensor | None, ...] = ()  # each layer's row normalisers (H, N) from its forward pass's kernel,
    # or None (`given_normalisers`); Triton's analysis then skips its first pass (fused.layer_stats checks them)
    _cache: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.target, self.source = as_axis(self.target), as_axis(self.source)
        n_l, n_h, n, dh = self.q.shape
        if self.k.shape[0] != n_l or self.k.shape[2] != n or self.k.shape[3] != dh or n_h % self.k.shape[1]:
            raise ValueError(f"queries {tuple(self.q.shape)} and keys {tuple(self.k.shape)} do not match")
        if len(self.target) != n or len(self.source) != n:
            raise ValueError(f"{n} queries and keys, but {len(self.target)} and {len(self.source)} tokens")
        if self.kind not in ("self", "causal"):
            raise ValueError("lazy attention is self or causal attention")
        if self.windows and (len(self.windows) != n_l or self.kind != "causal"):
            raise ValueError(f"{len(self.windows)} sliding windows for {n_l} layers of {self.kind} attention")
        self.scale = self.scale or 1.0 / math.sqrt(dh)
        if self.scales and len(self.scales) != n_l:
            raise ValueError(f"{len(self.scales)} score scales for {n_l} layers")
        if self.sink_logits is not None and tuple(self.sink_logits.shape) != (n_l, n_h):
            raise ValueError(f"sink logits {tuple(self.sink_logits.shape)} for {n_l} layers of {n_h} heads")
        if self.normalisers and len(self.normalisers) != n_l:
            raise ValueError(f"row normalisers for {len(self.normalisers)} layers of {n_l}")
        if self.k.device != self.q.device:
            raise ValueError(f"queries on {self.q.device} and keys on {self.k.device}: they must be on one device")
        block_bytes, max_rows = block_size(self.q.device)
        self.block_bytes = self.block_bytes or block_bytes
        self.max_rows = self.max_rows or max_rows

    def __repr__(self) -> str:
        return described(self, "held as queries and keys")

    # --- what views read, as from an AttentionResult ---

    @property
    def sinks(self) -> bool:
        """Whether each head has a learned sink logit (`sink_logits`): rows over the tokens sum to at most 1."""
        return self.sink_logits is not None

    @property
    def target_tokens(self) -> tuple[str, ...]:
        """The query tokens."""
        return self.target.tokens

    @property
    def source_tokens(self) -> tuple[str, ...]:
        """The key tokens."""
        return self.source.tokens

    @property
    def n_layers(self) -> int:
        """L."""
        return self.q.shape[0]

    @property
    def n_heads(self) -> int:
        """H."""
        return self.q.shape[1]

    @property
    def n_tokens(self) -> int:
        """N."""
        return self.q.shape[2]

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(L, H, N, N): the shape the weights would have."""
        n_l, n_h, n, _ = self.q.shape
        return n_l, n_h, n, n

    @property
    def eager_bytes(self) -> int:
        """What holding every weight would take."""
        n_l, n_h, n, _ = self.shape
        return 4 * n_l * n_h * n * n

    # --- the kernel: scores of a block of rows, one layer ---

    def _heads(self, head: int | slice | None) -> slice:
        return slice(0, self.n_heads) if head is None else slice(head, head + 1) if isinstance(head, int) else head

    def _kv(self, heads: slice) -> tuple[slice, int]:
        """The key heads a block of query heads reads, and how many query heads share each of them there."""
        g = self.n_heads // self.k.shape[1]  # query heads per key head (grouped-query attention)
        if heads.start % g == 0 and (heads.stop - heads.start) % g == 0:  # whole groups
            return slice(heads.start // g, heads.stop // g), g
        if heads.start // g == (heads.stop - 1) // g:  # inside one group
            return slice(heads.start // g, heads.start // g + 1), heads.stop - heads.start
        raise ValueError(f"query heads {heads.start}..{heads.stop - 1} split a group of {g} that shares a key head")

    def _scores(self, layer: int, rows: slice, cols: slice | None = None, head: int | slice | None = None) -> Tensor:
        """(H, r, c): scaled scores of the rows over the columns (all keys by default), MASKED where masked.

        Given `head` (one head, or a slice of whole groups of heads), only those heads', (h, r, c).
        """
        n = self.n_tokens
        rows, cols = slice(*rows.indices(n)), slice(*(cols or slice(None)).indices(n))
        heads = self._heads(head)
        kv, g = self._kv(heads)
        q = self.q[layer, heads, rows]  # (h, r, Dh)
        k = self.k[layer, kv, cols].to(q.device)  # (h / g, c, Dh); .to: a no-op unless a GPU fallback moved them
        # (h/g, g, r, Dh) @ (h/g, 1, Dh, c) -> (h/g, g, r, c): each key head once for the query heads that share it
        s = ((q * self._scale(layer)).unflatten(0, (k.shape[0], g)) @ k.unsqueeze(1).transpose(-1, -2)).flatten(0, 1)
        if self.softcap:
            s.div_(self.softcap).tanh_().mul_(self.softcap)
        tail = self._masked_tail(rows, cols)
        if tail is not None:
            s[..., tail[0] :].masked_fill_(tail[1], MASKED)
        early = self._before_window(layer, rows, cols)
        if early is not None:
            s[..., : early.shape[-1]].masked_fill_(early, MASKED)
        return s

    def _scale(self, layer: int) -> float:
        """This layer's score scale."""
        return self.scales[layer] if self.scales else self.scale

    def _sink(self, layer: int, heads: slice) -> Tensor | None:
        """(h, 1): these heads' sink logits in this layer, or None for a model without sinks."""
        return None if self.sink_logits is None else self.sink_logits[layer, heads, None].to(self.q.device)

    def _lse_of(self, layer: int, s: Tensor, heads: slice) -> Tensor:
        """(h, r): the rows' normalisers from all their scores s (h, r, c), a sink's logit taken in."""
        lse = torch.logsumexp(s, -1)
        sink = self._sink(layer, heads)
        return lse if sink is None else torch.logaddexp(lse, sink)

    def _window(self, layer: int) -> int:
        """This layer's sliding window (0: none)."""
        return self.windows[layer] if self.windows else 0

    def layer_window(self, layer: int) -> int:
        """This layer's sliding window in tokens (0: every earlier key): keys j with i - window < j are seen."""
        return self._window(layer)

    def _before_window(self, layer: int, rows: slice, cols: slice) -> Tensor | None:
        """Where a sliding window hides keys from a block's rows: the (r, c') mask over the block's first c' columns
        (those before the last row's window starts), or None where no key of the block is that far back."""
        window = self._window(layer)
        last = rows.stop - 1 - window  # keys j <= i - window are hidden from row i; the last row hides the most
        if not window or last < cols.start:
            return None
        device = self.q.device
        r = torch.arange(rows.start, rows.stop, device=device)[:, None]
        c = torch.arange(cols.start, min(cols.stop, last + 1), device=device)[None, :]
        return c <= r - window

    def _masked_tail(self, rows: slice, cols: slice) -> tuple[int, Tensor] | None:
        """Where a causal block's mask falls: (the first column, relative to cols, that any row cannot see; the
        (r, c') mask from there on), or None where every row sees every column. Only the block's own triangle."""
        if self.kind != "causal" or cols.stop <= rows.start + 1:
            return None
        device = self.q.device
        r = torch.arange(rows.start, rows.stop, device=device)[:, None]  # (r, 1)
        c = torch.arange(max(cols.start, rows.start), cols.stop, device=device)[None, :]  # (1, c')
        return max(cols.start, rows.start) - cols.start, c > r

    def _blocks(self, head: int | None = None):
        """(heads, rows): blocks of whole groups of heads (or of the one head given) and of rows whose weights fit
        block_bytes.

        Rows come first: up to max_rows a block, since a matrix product over few rows runs far below the machine's
        speed; then as many heads as fit beside them. Measured on this 2-core CPU at N = 8,192 (SmolLM2): blocks of
        all 9 heads at 64 MB took 1.7x the time of blocks of 3 heads x 256 rows (25 MB); at 4 MB, 2x.
        """
        n, n_h = self.n_tokens, self.n_heads
        per_row = 4 * n  # one head's row of weights, every key
        if head is None:
            g = n_h // self.k.shape[1]
            fits = [h for h in range(n_h, 0, -1) if n_h % h == 0 and (h % g == 0 or g % h == 0)]  # groups, or in one
            h = next((h for h in fits if h * per_row * self.max_rows <= self.block_bytes), 1)
            starts = range(0, n_h, h)
        else:
            h, starts = 1, range(head, head + 1)
        size = max(1, min(self.max_rows, self.block_bytes // (h * per_row)))
        for r0 in range(0, n, size):
            for h0 in starts:
                yield slice(h0, h0 + h), slice(r0, min(n, r0 + size))

    def _seen(self, rows: slice) -> slice:
        """The keys a block of rows can see: all of them, or those up to its last row (causal)."""
        return slice(0, rows.stop) if self.kind == "causal" else slice(0, self.n_tokens)

    def lse(self) -> Tensor:
        """(L, H, N): log sum exp of each row's scores (the normaliser of every weight), from the first pass."""
        if "lse" not in self._cache:
            self.analyse()
        return self._cache["lse"]

    def _row_lse(self, layer: int, rows: slice, head: int | None = None) -> Tensor:
        """(H, r) (or (1, r) for one head): the normalisers of some rows: from the first pass when it has run, else
        from these rows alone."""
        if "lse" in self._cache:
            lse = self._cache["lse"][layer, :, rows].to(self.q.device)
            return lse if head is None else lse[head : head + 1]
        return self._lse_of(layer, self._scores(layer, rows, self._seen(rows), head), self._heads(head))

    def _weights(self, layer: int, rows: slice, cols: slice, head: int | None = None) -> Tensor:
        """(H, r, c) (or (1, r, c) for one head): exact weights of a tile of one layer."""
        rows = slice(*rows.indices(self.n_tokens))
        return torch.exp(self._scores(layer, rows, cols, head) - self._row_lse(layer, rows, head)[..., None])

    # --- what views ask for ---

    def tile(self, layers: Sequence[int], heads: Sequence[int], rows: slice, cols: slice) -> Tensor:
        """(l, h, r, c): exact weights of the given layers, heads, rows and columns."""
        n = self.n_tokens
        rows, cols = slice(*rows.indices(n)), slice(*cols.indices(n))
        heads = list(heads)
        if len(heads) == 1:  # one head: only its scores are computed
            return torch.stack([self._weights(layer, rows, cols, heads[0]) for layer in layers]).cpu()
        return torch.stack([self._weights(layer, rows, cols)[heads] for layer in layers]).cpu()

    def rows(self, indices: Sequence[int]) -> Tensor:
        """(L, H, len(indices), N): the exact rows of these queries, every layer and head."""
        out = [
            torch.cat([self._weights(layer, slice(i, i + 1), slice(None)) for i in indices], 1)
            for layer in range(self.n_layers)
        ]
        return torch.stack(out).cpu()

    def window(self, start: int, stop: int) -> tuple[Tensor, Tensor]:
        """The exact weights of queries and keys start..stop-1, (L, H, w, w), and each row's share outside it (L, H, w).

        Rows do not sum to 1 inside a window: the rest of the attention falls outside it (often on the first token).
        """
        w = self.tile(range(self.n_layers), range(self.n_heads), slice(start, stop), slice(start, stop))
        return w, (1 - w.sum(-1)).clamp_min(0)

    def head(self, layer: int, head: int) -> Tensor:
        """(N, N): one head's exact map (N x N floats: a view of one head only)."""
        return self.tile([layer], [head], slice(None), slice(None))[0, 0]

    @property
    def weights(self) -> Tensor:
        """Every weight is what a long text never holds: a view asks for tiles, rows, windows or pooled maps."""
        raise ValueError(
            f"this text is {self.n_tokens:,} tokens: every weight would take {self.eager_bytes / 2**30:.1f} GB. "
            "Ask for rows, a window or pooled maps instead."
        )

    def window_result(self, start: int, stop: int) -> AttentionResult:
        """The window as an AttentionResult, each row renormalised over the window (say so where it is shown)."""
        w, _ = self.window(start, stop)
        w = w / w.sum(-1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny)
        return AttentionResult(
            w.contiguous(),
            self.target.window(start, stop),
            self.source.window(start, stop),
            self.kind,
            self.model,
            self.device,
        )

    def pooled(self, max_side: int = GRID_SIDE, progress: Progress | None = None) -> tuple[np.ndarray, int, int]:
        """(L, H, P, P): every head's map pooled to at most max_side cells a side (means of f x f blocks, exact
        weights), and the block sizes. GRID_SIDE and THUMB_SIDE come from the first pass; others cost a pass."""
        if ("pooled", max_side) not in self._cache:
            self.analyse((max_side,), progress=progress)
        return self._cache[("pooled", max_side)]

    def pooled_head(self, layer: int, head: int, max_side: int) -> tuple[np.ndarray, int]:
        """(P, P): one head's map pooled to at most max_side cells a side, and the block size (a pass over one head)."""
        key = ("pooled_head", layer, head, max_side)
        if key not in self._cache:
            n = self.n_tokens
            f = pool_factor(n, max_side)
            out = torch.zeros(math.ceil(n / f), math.ceil(n / f), dtype=torch.float64, device=self.q.device)
            for _, rows in self._blocks(head):
                s = self._scores(layer, rows, self._seen(rows), head)  # (1, r, c): this head's scores only
                w = torch.exp(s - self._lse_of(layer, s, self._heads(head))[..., None])[0]
                pool_rows(out, w, rows, f)
            counts = block_counts(n, f).double()
            self._cache[key] = ((out.cpu() / (counts[:, None] * counts[None, :])).float().numpy(), f)
        return self._cache[key]

    def stats(self, progress: Progress | None = None, *, confidence_excludes: str = "end") -> dict[str, Tensor]:
        """The statistics of attnviz.analysis.head_stats (every key the same), exact, streamed through the rows."""
        if ("stats", confidence_excludes) not in self._cache:
            self.analyse(confidence_excludes=confidence_excludes, progress=progress)
        return self._cache[("stats", confidence_excludes)]

    def has_stats(self, confidence_excludes: str = "end") -> bool:
        """Whether the statistics for this choice are computed already (else stats() costs a pass)."""
        return ("stats", confidence_excludes) in self._cache

    def received(self, progress: Progress | None = None) -> Tensor:
        """(L, H, N): the attention each token receives, averaged over the queries."""
        if "received" not in self._cache:
            self.analyse(progress=progress)
        return self._cache["received"]

    def analyse(
        self,
        max_sides: tuple[int, ...] = (GRID_SIDE, THUMB_SIDE),
        *,
        confidence_excludes: str = "end",
        progress: Progress | None = None,
    ) -> None:
        """One pass through every layer, block by block: the row normalisers, the pooled map, the head statistics
        and the attention each token receives. Holds at most one block of weights at a time. On a GPU that runs out
        of memory, the queries and keys move to the CPU and the pass runs there (`notice` says so)."""
        with self._lock:  # one pass at a time; a second caller finds the results cached
            if ("stats", confidence_excludes) in self._cache and all(("pooled", m) in self._cache for m in max_sides):
                return
            try:
                self._analyse(max_sides, confidence_excludes, progress)
            except torch.OutOfMemoryError:
                if self.q.device.type != "cuda":
                    raise
                self._to_cpu()
                self._analyse(max_sides, confidence_excludes, progress)

    def _to_cpu(self) -> None:
        """The GPU ran out of memory: queries, keys and normalisers to the CPU, blocks sized for it, and a notice."""
        self.q, self.k = self.q.cpu(), self.k.cpu()
        self.normalisers = ()  # the CPU's kernel computes its own
        if "lse" in self._cache:
            self._cache["lse"] = self._cache["lse"].cpu()
        self.block_bytes, self.max_rows = block_size(torch.device("cpu"))
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        self.notice = OOM_NOTICE

    def _analyse(self, max_sides: tuple[int, ...], confidence_excludes: str, progress: Progress | None) -> None:
        n, n_l, n_h = self.n_tokens, self.n_layers, self.n_heads

        def fresh() -> BlockPass:
            return BlockPass(
                n_l,
                n_h,
                self.source,
                self.kind,
                factors=tuple(pool_factor(n, m) for m in max_sides),
                confidence_excludes=confidence_excludes,
                device=self.q.device,
            )

        blocks = fresh()
        lse = torch.empty(n_l, n_h, n, dtype=torch.float32, device=self.q.device)
        if fused.available(self.q.device) and not self.softcap:  # the kernel has no soft-capping
            try:
                self._fused(blocks, lse, progress)
            except torch.OutOfMemoryError:
                raise
            except Exception as e:  # a kernel that imported but does not run here (Triton finding no C compiler)
                fused.failed(e)  # the plain path from now on, in this process; the log says why
                blocks = fresh()
                self._plain(blocks, lse, progress)
        else:
            self._plain(blocks, lse, progress)
        self._keep(blocks, lse, max_sides, confidence_excludes)

    def _keep(self, blocks: BlockPass, lse: Tensor, max_sides: tuple[int, ...], confidence_excludes: str) -> None:
        """A whole pass's results into the cache: the pooled maps, the row normalisers, the statistics, received."""
        for i, m in enumerate(max_sides):
            f = blocks.factors[i]
            self._cache[("pooled", m)] = (blocks.pooled(i), f, f)
        self._cache["lse"] = lse
        self._cache[("stats", confidence_excludes)] = blocks.stats()
        self._cache["received"] = blocks.received()

    def take(self, analysis: ForwardStats) -> None:
        """The analysis its forward pass computed (ForwardStats), where it covered every layer: `analyse` with its
        choices then finds everything cached; otherwise nothing changes (the pass runs when asked, as ever)."""
        if analysis.complete(self.n_layers):
            with self._lock:
                self._keep(analysis.blocks, analysis.lse, analysis.max_sides, analysis.confidence_excludes)

    def _fused(self, blocks: BlockPass, lse: Tensor, progress: Progress | None) -> None:
        """Each layer in one kernel (attnviz.fused): the same sums as _plain, no weight written to memory."""
        n, n_h = self.n_tokens, self.n_heads
        device = self.q.device
        codes = fused.key_codes(self.source, blocks.excluded, self.kind)
        for layer in range(self.n_layers):
            received, pools = layer_sums(blocks, n_h, n, device)
            rows = fused.layer_stats(
                self.q[layer],
                self.k[layer],
                codes,
                scale=self._scale(layer),
                causal=self.kind == "causal",
                pools=pools,
                received=received,
                precision=self.precision,
                window=self._window(layer),
                sinks=None if self.sink_logits is None else self.sink_logits[layer].to(device).float().contiguous(),
                lse=self.normalisers[layer] if self.normalisers else None,
            )
            lse[layer] = rows["lse"]
            blocks.add_rows(layer, rows, received, [sums for sums, _ in pools])
            if progress:
                progress(layer + 1, self.n_layers)
        self.normalisers = ()  # used: the pass's own are cached ("lse")

    def _plain(self, blocks: BlockPass, lse: Tensor, progress: Progress | None) -> None:
        """Each layer block by block in PyTorch operations (blocks.BlockPass): where no fused kernel runs."""
        n_l = self.n_layers
        for layer in range(n_l):
            window = self._window(layer)
            for heads, rows in self._blocks():
                seen = self._seen(rows)
                # a sliding window: the scores of the keys it reaches only (N x window a layer, not N²), and BlockPass
                # takes them from there (col0): the keys before it have weight 0 and are never formed
                lo = max(0, rows.start - window + 1) if window else 0
                part = slice(lo, seen.stop)
                s = self._scores(layer, rows, part, heads)  # (h, r, c - lo): scores, masked
                top = s.amax(-1)  # (h, r)
                sink = self._sink(layer, heads)
                if sink is not None:  # the sink's logit is one more term of each row's normaliser
                    top = torch.maximum(top, sink)
                s.sub_(top[..., None])  # shifted scores: each row's largest is 0 (in place)
                w = s.exp()
                tail = self._masked_tail(rows, part)
                if tail is not None:  # masked scores are -inf: 0 from here on, so that w * s is 0 there
                    s[..., tail[0] :].masked_fill_(tail[1], 0.0)
                early = self._before_window(layer, rows, part)
                if early is not None:  # and so are the keys before a sliding window
                    s[..., : early.shape[-1]].masked_fill_(early, 0.0)
                z = w.sum(-1)  # (h, r)
                if sink is not None:
                    z += torch.exp(sink - top)
                w.div_(z[..., None])  # (h, r, c - lo): exact weights (summing to less than 1 beside a sink)
                log_z = z.log()
                lse[layer, heads, rows] = top + log_z
                mass = None if sink is None else w.sum(-1)  # (h, r): less than 1 beside a sink
                blocks.add(layer, rows, w, s, log_z, heads, col0=lo, mass=mass)
            if progress:
                progress(layer + 1, n_l)


def layer_sums(
    blocks: BlockPass, n_heads: int, n: int, device: torch.device
) -> tuple[Tensor, tuple[tuple[Tensor, int], ...]]:
    """Zeroed sums for one layer of a fused pass: the column sums (H, N) and each pooled map's (sums (H, P, P), f)."""
    received = torch.zeros(n_heads, n, dtype=torch.float32, device=device)
    pools = tuple(
        (torch.zeros(n_heads, *sums.shape[-2:], dtype=torch.float32, device=device), f)
        for sums, f in zip(blocks.pooled_sums, blocks.factors, strict=True)
    )
    return received, pools


class ForwardStats:
    """A long text's analysis computed in its forward pass (issue 53), where attnviz's CPU kernel runs.

    Given to the forward pass as `Hooks.stats`: each layer's attention (engines.scratch.attend) calls it with the
    layer's q, k and v instead of torch's SDPA, and it computes the layer's output and every statistic, pooled cell
    and column sum from one product of each block's scores (fused.attend_stats): the analysis's second QK^T, the
    largest part of its time, is not needed. `LazyAttention.take` then holds the results as `analyse` would have
    made them with the default choices (the pooled sides `max_sides`, confidence excluding the end token). It returns
    None, and torch's kernel runs, wherever the kernel does not (a GPU, no C compiler, ATTNVIZ_FUSED=0, Triton's
    interpreter, a batch of more than one), or once it has raised (`fused.failed`); a pass it did not cover whole
    leaves the LazyAttention to its own analysis."""

    def __init__(
        self,
        axis: TokenAxis,
        kind: AttentionKind,
        n_layers: int,
        n_heads: int,
        max_sides: tuple[int, ...] = (GRID_SIDE, THUMB_SIDE),
        confidence_excludes: str = "end",
    ) -> None:
        n = len(axis)
        self.max_sides, self.confidence_excludes, self.causal = max_sides, confidence_excludes, kind == "causal"
        self.blocks = BlockPass(
            n_layers,
            n_heads,
            axis,
            kind,
            factors=tuple(pool_factor(n, m) for m in max_sides),
            confidence_excludes=confidence_excludes,
            device=torch.device("cpu"),
        )
        self.codes = fused.key_codes(axis, self.blocks.excluded, kind)
        self.lse = torch.empty(n_layers, n_heads, n, dtype=torch.float32)
        self.layers: set[int] = set()

    def complete(self, n_layers: int) -> bool:
        """Whether every layer of the pass went through here."""
        return self.layers == set(range(n_layers))

    def __call__(
        self, layer: int, q: Tensor, k: Tensor, v: Tensor, scale: float, window: int, sinks: Tensor | None
    ) -> Tensor | None:
        """q (1, H, N, Dh), k and v (1, H_kv, N, D) -> the layer's output (1, H, N, Dv), its statistics kept; None
        where the kernel does not run (see the class)."""
        n_h, n = self.lse.shape[1:]
        if q.shape[0] != 1 or tuple(q.shape[1:3]) != (n_h, n) or not fused.in_forward(q.device):
            return None
        received, pools = layer_sums(self.blocks, n_h, n, q.device)
        try:
            rows, z = fused.attend_stats(
                q[0],
                k[0],
                v[0],
                self.codes,
                scale=scale,
                causal=self.causal,
                pools=pools,
                received=received,
                window=window,
                sinks=None if sinks is None else sinks.float(),
            )
        except Exception as e:  # a kernel that does not run here after all: torch's kernel, the analysis later
            fused.failed(e)
            return None
        self.lse[layer] = rows["lse"]
        self.blocks.add_rows(layer, rows, received, [sums for sums, _ in pools])
        self.layers.add(layer)
        return z[None].to(q.dtype)


def forward_reads(device: torch.device | str) -> tuple[str, ...]:
    """The hook points a long text's forward pass reads on `device`: each layer's q and k, and the rows' normalisers
    ("lse") where Triton's kernel will analyse them after the pass (a GPU: `fused.takes_normalisers`)."""
    return ("q", "k", "lse") if fused.takes_normalisers(torch.device(device)) else ("q", "k")


def given_normalisers(taken: Mapping[tuple[str, int], Tensor], n_layers: int) -> tuple[Tensor | None, ...]:
    """Each layer's row normalisers (H, N) that a forward pass's hooks read at the point "lse" (Hooks.taken), None for
    a layer that gave none (a sliding window's); () where none did."""
    found = [taken.get(("lse", layer)) for layer in range(n_layers)]
    return tuple(None if t is None else t[0] for t in found) if any(t is not None for t in found) else ()


def forward_stats(
    axis: TokenAxis, kind: AttentionKind, n_layers: int, n_heads: int, device: torch.device | str
) -> ForwardStats | None:
    """A ForwardStats for a forward pass on `device`, where the CPU kernel runs there (fused.in_forward); else None
    (a GPU: SDPA, then the analysis after the pass), so that no sums are made for nothing."""
    return ForwardStats(axis, kind, n_layers, n_heads) if fused.in_forward(torch.device(device)) else None


def of(results: Results, kind: str | None = None) -> LazyAttention:
    """One kind (default: the main one) of a long text's results, as queries and keys (Results.eager reads the
    others'); a ValueError where the run held every weight."""
    if not results.lazy:
        raise ValueError("this text is not long: its run held every weight (Results.eager)")
    return cast(LazyAttention, results[kind] if kind is not None else results.main)
