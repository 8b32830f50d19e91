"""What a person chooses to look at: special tokens hidden, word pieces merged into words.

Both return a new, validated AttentionResult, so every row still sums to 1:
- hiding drops rows and columns and renormalises each row over the keys that are left;
- merging sums over a word's key pieces (the attention that word receives) and averages
  over its query pieces (how the word, as one reader, spreads its attention).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

import torch

from attnviz.result import AttentionResult

SPECIAL_PATTERN = re.compile(r"^(\[[A-Z]+\]|<\|?/?[a-z_]+\|?>)$")  # [CLS], [SEP], <s>, </s>, <pad>, <|endoftext|>


@dataclass(frozen=True)
class TokenAxis:
    """The tokens on one axis of a map, with the word each belongs to."""

    tokens: tuple[str, ...]
    words: tuple[int, ...]  # word index per token; a special token is a word of its own
    special: tuple[bool, ...]


def piece_text(token: str) -> str:
    """A token without its word-piece marker: '##ing' -> 'ing', 'Ġthe' -> 'the', '▁the' -> 'the'."""
    return token.removeprefix("##").lstrip("Ġ▁")


def token_axis(tokens: Sequence[str], special_tokens: Collection[str] = ()) -> TokenAxis:
    """Group tokens into words from their markers (WordPiece '##', byte-level 'Ġ', SentencePiece '▁')."""
    tokens = tuple(tokens)
    special = tuple(t in special_tokens or bool(SPECIAL_PATTERN.match(t)) for t in tokens)
    starts_marked = any(t[:1] in ("Ġ", "▁") for t in tokens)
    words, w = [], -1
    for i, tok in enumerate(tokens):
        if special[i] or i == 0 or special[i - 1]:
            new_word = True
        elif starts_marked:
            new_word = tok[:1] in ("Ġ", "▁")
        else:
            new_word = not tok.startswith("##")
        w += new_word
        words.append(w)
    return TokenAxis(tokens, tuple(words), special)


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
    w = w / totals
    keep = lambda toks, m: tuple(t for t, k in zip(toks, m, strict=True) if k)  # noqa: E731
    return replace(
        result, weights=w, target_tokens=keep(result.target_tokens, r), source_tokens=keep(result.source_tokens, c)
    )


def _groups(words: Sequence[int]) -> list[list[int]]:
    out: dict[int, list[int]] = {}
    for i, w in enumerate(words):
        out.setdefault(w, []).append(i)
    return list(out.values())


def merge(result: AttentionResult, row_words: Sequence[int], col_words: Sequence[int]) -> AttentionResult:
    """Word pieces -> words: sum over a word's key pieces, mean over its query pieces."""
    rows, cols = _groups(row_words), _groups(col_words)
    w = result.weights
    w = torch.stack([w[:, :, :, g].sum(-1) for g in cols], dim=-1)  # (L, H, Tq, W_k)
    w = torch.stack([w[:, :, g].mean(-2) for g in rows], dim=-2)  # (L, H, W_q, W_k)
    name = lambda toks, groups: tuple("".join(piece_text(toks[i]) for i in g) or toks[g[0]] for g in groups)  # noqa: E731
    return replace(
        result,
        weights=w,
        target_tokens=name(result.target_tokens, rows),
        source_tokens=name(result.source_tokens, cols),
    )


def prepare(
    result: AttentionResult,
    target: TokenAxis,
    source: TokenAxis,
    *,
    hide_special: bool = False,
    merge_words: bool = False,
) -> AttentionResult:
    """Apply the person's view options to a result (merging first, then hiding)."""
    if merge_words:
        result = merge(result, target.words, source.words)
        target, source = _merged_axis(target), _merged_axis(source)
    if hide_special:
        result = hide(result, [not s for s in target.special], [not s for s in source.special])
    return result


def _merged_axis(axis: TokenAxis) -> TokenAxis:
    groups = _groups(axis.words)
    return TokenAxis(
        tuple(axis.tokens[g[0]] for g in groups), tuple(range(len(groups))), tuple(axis.special[g[0]] for g in groups)
    )
