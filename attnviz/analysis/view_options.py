"""What a person chooses to look at: special tokens hidden, word pieces merged into words.

Both return a new, validated AttentionResult, so every row still sums to 1:
- hiding drops rows and columns and renormalises each row over the keys that are left;
- merging sums over a word's key pieces (the attention that word receives) and averages
  over its query pieces (how the word, as one reader, spreads its attention).
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
        raise ValueError("Nothing is left to show once the special tokens are hidden.")
    w = result.weights[:, :, r][:, :, :, c]  # (L, H, Tq', Tk')
    totals = w.sum(-1, keepdim=True)  # (L, H, Tq', 1)
    if (totals <= 0).any():
        raise ValueError("A token attends only to special tokens, so hiding them leaves it nothing to show.")
    return replace(
        result, weights=w / totals, target=result.target.subset(rows_keep), source=result.source.subset(cols_keep)
    )


def without_specials(result: AttentionResult) -> AttentionResult:
    """Hide the special tokens of both axes ([CLS], [SEP], <s>, ...)."""
    return hide(result, [not s for s in result.target.special], [not s for s in result.source.special])


def merge(result: AttentionResult) -> AttentionResult:
    """Word pieces -> words: sum over a word's key pieces, mean over its query pieces."""
    rows, cols = result.target.groups(), result.source.groups()
    w = result.weights
    w = torch.stack([w[:, :, :, g].sum(-1) for g in cols], dim=-1)  # (L, H, Tq, W_k)
    w = torch.stack([w[:, :, g].mean(-2) for g in rows], dim=-2)  # (L, H, W_q, W_k)
    return replace(result, weights=w, target=result.target.merged(), source=result.source.merged())


def prepare(result: AttentionResult, *, hide_special: bool = False, merge_words: bool = False) -> AttentionResult:
    """Apply the person's view options to a result (merging first, then hiding)."""
    if merge_words:
        result = merge(result)
    if hide_special:
        result = without_specials(result)
    return result
