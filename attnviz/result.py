"""The one value that crosses every boundary: `AttentionResult`.

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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import torch
from torch import Tensor

from attnviz.tokens import TokenAxis

AttentionKind = Literal["self", "causal", "cross"]
KINDS: tuple[str, ...] = get_args(AttentionKind)

ROW_SUM_TOLERANCE = 1e-4


@dataclass(frozen=True)
class AttentionResult:
    """Per-head attention weights of one text, with the tokens that label them.

    weights: (L, H, Tq, Tk) float32, detached, on the CPU; rows sum to 1.
    target: the rows (queries); source: the columns (keys). A plain sequence of token strings is
    accepted for either and read as `TokenAxis.plain` (no special tokens, each token its own word).
    device: where the forward pass ran ("cpu", "cuda:0").
    truncated: how many tokens of the input were dropped to fit the model.
    value_norms: (L, H, Tk) or None: ||f_h(x_j)||, each key's value carried through its head's part of W_O
      (Kobayashi et al. 2020); engines that own their attention (the scratch backend) fill it in.
    """

    weights: Tensor
    target: TokenAxis
    source: TokenAxis
    kind: AttentionKind
    model: str
    device: str = "cpu"
    truncated: int = 0
    value_norms: Tensor | None = None

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
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
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
        worst = (row_sums - 1).abs().max().item() if w.numel() else 0.0
        if worst > ROW_SUM_TOLERANCE:
            raise ValueError(f"attention rows must sum to 1; one is off by {worst:.2e}")
        if self.kind == "causal" and torch.triu(w, diagonal=1).any():
            raise ValueError("causal attention must be 0 above the diagonal")
        n = self.value_norms
        if n is not None and (n.shape != (w.shape[0], w.shape[1], tk) or n.dtype != torch.float32):
            raise ValueError(f"value_norms must be float32 of shape {(w.shape[0], w.shape[1], tk)}")

    @property
    def target_tokens(self) -> tuple[str, ...]:
        """The query tokens (rows) as the model names them."""
        return self.target.tokens

    @property
    def source_tokens(self) -> tuple[str, ...]:
        """The key tokens (columns) as the model names them."""
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

    def head(self, layer: int, head: int) -> Tensor:
        """(Tq, Tk): one head's map, 0-based layer and head."""
        return self.weights[layer, head]


def as_axis(tokens: TokenAxis | Sequence[str]) -> TokenAxis:
    """A TokenAxis as it is, or plain token strings read as `TokenAxis.plain`."""
    return tokens if isinstance(tokens, TokenAxis) else TokenAxis.plain(tuple(tokens))
