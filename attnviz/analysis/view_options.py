"""What a person chooses to look at: special tokens hidden, the first token set aside, word pieces merged,
attention weighted by the size of what it moves.

Each returns a new, validated AttentionResult, so every row still sums to 1:
- hiding drops rows and columns and renormalises each row over the keys that are left; setting
  the first token aside does that to the first token (an attention sink: many heads park most of
  their attention there, and the rest of the map turns dark);
- merging sums over a word's key pieces (the attention that word receives) and averages
  over its query pieces (how the word, as one reader, spreads its attention);
- value-weighting replaces each weight alpha_ij by alpha_ij ||f(x_j)||, the size of what key j
  sends to query i through the head (Kobayashi et al. 2020), renormalised per row so that it
  reads on the same scale; `value_weighted_norms` gives the raw ||alpha f(x)||.
Which tokens are special and which word each belongs to come from the result's own token
axes (attnviz.tokens.TokenAxis), never from the token strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch

from attnviz.result import AttentionResult


def hide(result: AttentionResult, rows_keep: Sequence[bool], cols_keep: Sequence[bool]) -> AttentionResult:
    """Drop the rows and columns not kept, and renormalise every row over the keys left."""
    r = torch.tensor(rows_keep, dtype=torch.bool)
    c = torch.tensor(cols_keep, dtype=torch.bool)
    if not r.any() or not c.any():
        raise ValueError("Nothing is left to show once those tokens are set aside.")
    w = result.weights[:, :, r][:, :, :, c]  # (L, H, Tq', Tk')
    totals = w.sum(-1, keepdim=True)  # (L, H, Tq', 1)
    if (totals <= 0).any():
        raise ValueError("A token attends only to the tokens set aside, so hiding them leaves it nothing to show.")
    norms = None if result.value_norms is None else result.value_norms[:, :, c]  # (L, H, Tk')
    return replace(
        result,
        weights=w / totals,
        target=result.target.subset(rows_keep),
        source=result.source.subset(cols_keep),
        value_norms=norms,
        windows=result.windows if _a_prefix_dropped(r) and _a_prefix_dropped(c) else (),
    )


def _a_prefix_dropped(keep: torch.Tensor) -> bool:
    """Whether only tokens before every kept one are dropped: distances between the rest, and so a sliding window's
    reach counted in tokens, stay as they were (else the windows are not marked on the maps)."""
    first = int(keep.nonzero()[0])
    return bool(keep[first:].all())


def without_specials(result: AttentionResult) -> AttentionResult:
    """Hide the special tokens of both axes ([CLS], [SEP], <s>, ...)."""
    return hide(result, [not s for s in result.target.special], [not s for s in result.source.special])


def without_first(result: AttentionResult) -> AttentionResult:
    """Set the first token aside (its row and its column) and renormalise every row over the keys left."""
    return hide(result, [i > 0 for i in range(len(result.target))], [j > 0 for j in range(len(result.source))])


def value_weighted_norms(result: AttentionResult) -> torch.Tensor:
    """(L, H, Tq, Tk): ||alpha_ij f(x_j)|| = alpha_ij ||f(x_j)|| (Kobayashi et al. 2020)."""
    if result.value_norms is None:
        raise ValueError(
            "The value-weighted view needs each head's value vectors: it is available for BERT and for decoders on "
            "attnviz's attention (SmolLM2, Gemma 3, Llama, Qwen, Mistral, ...), on texts short enough to hold every "
            "weight."
        )
    return result.weights * result.value_norms[:, :, None, :]  # (L, H, Tq, Tk) * (L, H, 1, Tk)


def value_weighted(result: AttentionResult) -> AttentionResult:
    """The result with each row of alpha_ij ||f(x_j)|| renormalised to sum to 1."""
    w = value_weighted_norms(result)
    totals = w.sum(-1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny)
    return replace(result, weights=w / totals, value_norms=None)


def merge(result: AttentionResult) -> AttentionResult:
    """Word pieces -> words: sum over a word's key pieces, mean over its query pieces."""
    rows, cols = result.target.groups(), result.source.groups()
    w = result.weights
    w = torch.stack([w[:, :, :, g].sum(-1) for g in cols], dim=-1)  # (L, H, Tq, W_k)
    w = torch.stack([w[:, :, g].mean(-2) for g in rows], dim=-2)  # (L, H, W_q, W_k)
    target, source = result.target.merged(), result.source.merged()
    merged = replace(result, weights=w, target=target, source=source, value_norms=None, windows=())  # tokens, not words
    return merged


def apply(
    result: AttentionResult,
    *,
    hide_special: bool = False,
    merge_words: bool = False,
    first_aside: bool = False,
    value_weight: bool = False,
) -> AttentionResult:
    """Apply the person's view options to a result: value-weighting, merging, then setting tokens aside."""
    if value_weight:
        result = value_weighted(result)
    if merge_words:
        result = merge(result)
    if first_aside:
        result = without_first(result)
    if hide_special and (any(result.target.special) or any(result.source.special)):
        result = without_specials(result)
    return result
