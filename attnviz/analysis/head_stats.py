"""Per-head statistics of a self-attention result (Clark et al. 2019; Voita et al. 2019), and a label per head.

Every statistic is a (L, H) tensor, averaged over the queries of the text:
- entropy: of each row, in nats (uniform attention over n keys has entropy ln n);
- distance: mean attention distance, sum_j w_ij |i - j|;
- cls, sep, punct, prev, next, self: the share of attention on [CLS] (the first token when it is
  special), on the other special tokens, on punctuation (tokens whose characters in the text are
  all Unicode punctuation), on the previous, next and same position (prev and next averaged over
  the queries that have a previous or next token);
- first: the share of attention on the first token, special or not (where decoders park attention:
  an "attention sink"; for BERT the first token is [CLS], so it equals cls);
- confidence: the mean of each row's largest weight; as in Voita et al. (2019), the end token
  ([SEP], </s>: the last token when it is special) is left out of each row's maximum, or, as
  stated options, every special token or none.

A head is "broad" when its entropy is close to that of uniform attention over the keys each
query can see: n keys for self-attention, i + 1 for query i of a causal model.
"""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from attnviz.result import AttentionResult
from attnviz.tokens import TokenAxis

if TYPE_CHECKING:
    from attnviz.lazy import LazyAttention

STATS = ("entropy", "distance", "cls", "sep", "punct", "prev", "next", "self", "confidence", "first")
CONFIDENCE_EXCLUDES = {  # what a row's maximum leaves out, for "confidence"
    "end": "the end token (Voita et al. 2019)",
    "specials": "every special token",
    "none": "nothing",
}
LABELS = ("previous-token", "next-token", "[SEP]", "[CLS]", "self", "first-token", "broad", "other")
SHARE_THRESHOLD = 0.5  # a head is "previous-token" when more than half its attention goes to the previous token
BROAD_THRESHOLD = 0.9  # a head is "broad" when its entropy is at least 90% of uniform attention's
SHARE_LABELS = {  # in order: on a tie the earlier wins ([CLS] before first-token when the first token is [CLS])
    "prev": "previous-token",
    "next": "next-token",
    "sep": "[SEP]",
    "cls": "[CLS]",
    "self": "self",
    "first": "first-token",
}

CORPUS = (
    "The animal didn't cross the street because it was too tired.",
    "The trophy doesn't fit into the brown suitcase because it is too large.",
    "Students in the back row could not read the projector, so the teacher made the font bigger.",
    "A transformer turns every word into a vector and lets the vectors look at each other.",
    "After the rain stopped, the children ran outside to play in the puddles.",
    "She said that the results, which surprised everyone, would be published next week.",
    "Attention weights are not explanations, but they are a good place to start looking.",
    "In 1969, two astronauts walked on the Moon while a third orbited above them.",
)


def is_punctuation(text: str) -> bool:
    """True when every character is Unicode punctuation (categories P*): '.', ',', '—', '"', '¿'."""
    text = text.strip()
    return bool(text) and all(unicodedata.category(c).startswith("P") for c in text)


def punctuation(axis: TokenAxis) -> list[bool]:
    """Which tokens are punctuation, judged by the characters each covers in the text.

    Tokens whose characters are unknown (hand-built axes) are judged by their own names.
    """
    return [
        not axis.special[i] and is_punctuation(axis.surface(i) if axis.text else axis.tokens[i])
        for i in range(len(axis))
    ]


def _offset_share(w: Tensor, offset: int) -> Tensor:
    """(L, H, T, T) -> (L, H): the weight on key i + offset, averaged over the queries that have one."""
    diag = torch.diagonal(w, offset=offset, dim1=-2, dim2=-1)  # (L, H, T - |offset|)
    return diag.mean(-1) if diag.shape[-1] else torch.zeros(w.shape[:2], dtype=w.dtype)


def visible_keys(result: AttentionResult | LazyAttention) -> Tensor:
    """(Tq,): how many keys each query can see: all of them, or i + 1 for query i of a causal result."""
    tq, tk = len(result.target), len(result.source)
    if result.kind == "causal":
        return torch.arange(1, tq + 1, dtype=torch.float32)
    return torch.full((tq,), float(tk), dtype=torch.float32)


def uniform_entropy(result: AttentionResult | LazyAttention) -> float:
    """The entropy of uniform attention over the keys each query can see, averaged over the queries (nats)."""
    return visible_keys(result).log().mean().item()


def confidence_keys(axis: TokenAxis, excludes: str) -> Tensor:
    """(T,) bool: the keys a row's maximum may take, for "confidence"."""
    if excludes not in CONFIDENCE_EXCLUDES:
        raise ValueError(f"confidence can leave out {', '.join(CONFIDENCE_EXCLUDES)}, not {excludes!r}")
    keep = torch.ones(len(axis), dtype=torch.bool)
    if excludes == "specials":
        keep &= ~torch.tensor(axis.special, dtype=torch.bool)
    elif excludes == "end" and axis.special and axis.special[-1]:
        keep[-1] = False
    return keep if keep.any() else torch.ones_like(keep)


def head_stats(result: AttentionResult, *, confidence_excludes: str = "end") -> dict[str, Tensor]:
    """The statistics above for a self or causal result; special tokens are those its token axis marks."""
    if result.kind == "cross":
        raise ValueError("head statistics are defined for self and causal attention, not cross-attention")
    w = result.weights  # (L, H, T, T)
    t = w.shape[-1]
    special = torch.tensor(result.source.special, dtype=torch.bool)
    pos = torch.arange(t, dtype=torch.float32)
    cls_mask = torch.zeros(t, dtype=torch.bool)
    cls_mask[0] = special[0]
    sep_mask = special & ~cls_mask
    punct_mask = torch.tensor(punctuation(result.source), dtype=torch.bool)
    entropy = -(w * torch.log(w.clamp_min(1e-12))).sum(-1)  # (L, H, T)
    distance = (w * (pos[None, :] - pos[:, None]).abs()).sum(-1)  # (L, H, T)
    confident = w[..., confidence_keys(result.source, confidence_excludes)]  # (L, H, T, T')
    return {
        "entropy": entropy.mean(-1),
        "distance": distance.mean(-1),
        "cls": w[..., cls_mask].sum(-1).mean(-1),
        "sep": w[..., sep_mask].sum(-1).mean(-1),
        "punct": w[..., punct_mask].sum(-1).mean(-1),
        "prev": _offset_share(w, -1),
        "next": _offset_share(w, 1),
        "self": _offset_share(w, 0),
        "confidence": confident.max(-1).values.mean(-1),
        "first": w[..., 0].mean(-1),
    }


def labels(stats: dict[str, Tensor], uniform: float) -> list[list[str]]:
    """A label per head: the pattern holding more than SHARE_THRESHOLD of its attention, else broad or other.

    `uniform` is the entropy of uniform attention (`uniform_entropy`; averaged, for several texts).
    """
    n_l, n_h = stats["entropy"].shape
    out = []
    for layer in range(n_l):
        row = []
        for head in range(n_h):
            shares = {k: stats[k][layer, head].item() for k in SHARE_LABELS}
            best = max(shares, key=shares.get)
            if shares[best] > SHARE_THRESHOLD:
                row.append(SHARE_LABELS[best])
            elif uniform > 0 and stats["entropy"][layer, head].item() >= BROAD_THRESHOLD * uniform:
                row.append("broad")
            else:
                row.append("other")
        out.append(row)
    return out


def punctuation_tokens(axis: TokenAxis) -> list[str]:
    """The tokens counted as punctuation, each once, in order: what the "punct" share adds up."""
    return list(dict.fromkeys(t for t, p in zip(axis.tokens, punctuation(axis), strict=True) if p))


def table(stats: dict[str, Tensor], head_labels: list[list[str]]) -> list[dict]:
    """One row per head: layer and head (1-based), its label, and every statistic (4 decimals)."""
    n_l, n_h = stats["entropy"].shape
    return [
        {
            "layer": layer + 1,
            "head": h + 1,
            "label": head_labels[layer][h],
            **{k: round(stats[k][layer, h].item(), 4) for k in STATS},
        }
        for layer in range(n_l)
        for h in range(n_h)
    ]


def average(stats_list: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """The mean of several texts' statistics, statistic by statistic."""
    return {k: torch.stack([s[k] for s in stats_list]).mean(0) for k in stats_list[0]}
