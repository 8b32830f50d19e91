"""Per-head statistics of a self-attention result (Clark et al. 2019; Voita et al. 2019), and a label per head.

The statistics themselves (entropy, distance, the shares on [CLS], [SEP], punctuation, the previous, next and
same token and the first token, confidence) are defined and computed once, in attnviz.blocks, for every
attention value: `head_stats(result)` is `result.stats()`.

A head is "broad" when its entropy is close to that of uniform attention over the keys each
query can see: n keys for self-attention, i + 1 for query i of a causal model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from attnviz.blocks import CONFIDENCE_EXCLUDES, STATS, confidence_keys, forced, is_punctuation, punctuation
from attnviz.result import Attention
from attnviz.tokens import TokenAxis

__all__ = ["CONFIDENCE_EXCLUDES", "STATS", "confidence_keys", "is_punctuation", "punctuation"]  # re-exported

NAMES = {  # each statistic as a page names it
    "entropy": "entropy (nats)",
    "distance": "mean attention distance (tokens)",
    "cls": "share on [CLS]",
    "sep": "share on [SEP]",
    "punct": "share on punctuation",
    "prev": "share on the previous token",
    "next": "share on the next token",
    "self": "share on itself",
    "confidence": "confidence (mean of each row's largest weight)",
    "first": "share on the first token (an attention sink)",
    "sink": "share on the learned sink (a logit with no token: gpt-oss)",
}
SHORT = {  # each statistic as a colour bar titles it: a phone's bar across the top gives its title about 12 characters
    "entropy": "entropy",
    "distance": "distance",
    "cls": "on [CLS]",
    "sep": "on [SEP]",
    "punct": "on punct.",
    "prev": "on previous",
    "next": "on next",
    "self": "on itself",
    "confidence": "confidence",
    "first": "on first",
    "sink": "on the sink",
}
LABELS = ("previous-token", "next-token", "[SEP]", "[CLS]", "self", "first-token", "sink", "broad", "other")
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
# A decoder's first token is where its heads park attention they do not need (an attention sink, Xiao et al. 2023),
# not a [CLS] that gathers the sentence: a causal head is never "[CLS]" (its start token, <bos> for Gemma 3, is the
# first token), and its first-token head is a "sink".
DECODER_SHARE_LABELS = {k: ("sink" if k == "first" else v) for k, v in SHARE_LABELS.items() if k != "cls"}
# A decoder's head is judged on the attention it gives to tokens other than the sink (each share divided by one minus
# the share on the first token), so a previous-token head that parks 60% on the sink is still previous-token; where
# less than SINK_REST is left for the other tokens, too little to name the head by, a head with more than
# SHARE_THRESHOLD on the first token is a sink.
SINK_REST = 0.1

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


def visible_keys(result: Attention) -> Tensor:
    """(Tq,): how many keys each query the statistics count can see: all of them, or i + 1 for query i of a causal
    result (its forced first rows left out, as blocks.counted leaves them out of every statistic)."""
    tq, tk = len(result.target), len(result.source)
    if result.kind == "causal":
        return torch.arange(1 + forced("causal", tq), tq + 1, dtype=torch.float32)
    return torch.full((tq,), float(tk), dtype=torch.float32)


def uniform_entropy(result: Attention) -> float:
    """The entropy of uniform attention over the keys each query can see, averaged over the queries the statistics
    count (nats)."""
    return visible_keys(result).log().mean().item()


def uniform_entropy_of(n: int, kind: str) -> float:
    """uniform_entropy for a text of n tokens: ln n for self-attention, the mean of ln(i + 1) for causal (over the
    queries past the forced ones)."""
    if kind == "causal":
        return torch.arange(1 + forced(kind, n), n + 1, dtype=torch.float32).log().mean().item()
    return float(torch.tensor(float(n)).log().item())


def head_stats(result: Attention, *, confidence_excludes: str = "end") -> dict[str, Tensor]:
    """The statistics of attnviz.blocks for a self or causal result (computed once, then kept on the result)."""
    return result.stats(confidence_excludes=confidence_excludes)


def share_labels(kind: str) -> dict[str, str]:
    """The share statistics that name a head of this kind of attention, in the order ties go: a decoder's
    (DECODER_SHARE_LABELS) or an encoder's (SHARE_LABELS)."""
    return DECODER_SHARE_LABELS if kind == "causal" else SHARE_LABELS


def labels(stats: Mapping[str, Tensor | np.ndarray], uniform: float, kind: str) -> list[list[str]]:
    """A label per head: the pattern holding more than SHARE_THRESHOLD of its attention, else broad or other.

    `uniform` is the entropy of uniform attention (`uniform_entropy`; averaged, for several texts); `kind` the
    attention's ("causal": a decoder's heads are never "[CLS]", are judged on what they give tokens other than the
    sink (SINK_REST), and a first-token head is a "sink").
    """
    named = share_labels(kind)
    n_l, n_h = stats["entropy"].shape
    out = []
    for layer in range(n_l):
        row = []
        for head in range(n_h):
            learned = stats["sink"][layer, head].item() if "sink" in stats else 0.0  # a model's learned sinks
            share = _share_label({k: stats[k][layer, head].item() for k in named}, named, kind, learned)
            if share is not None:
                row.append(share)
            elif uniform > 0 and stats["entropy"][layer, head].item() >= BROAD_THRESHOLD * uniform:
                row.append("broad")
            else:
                row.append("other")
        out.append(row)
    return out


def _share_label(shares: dict[str, float], named: dict[str, str], kind: str, learned: float = 0.0) -> str | None:
    """The label of the pattern holding more than SHARE_THRESHOLD of a head's attention (a decoder's: of what it gives
    tokens other than the sink, see SINK_REST; `learned`: the share a learned sink logit takes, a sink too), or
    None."""
    if kind == "causal":
        sink = shares["first"] + learned
        rest = 1.0 - sink
        if rest >= SINK_REST:
            others = {k: v / rest for k, v in shares.items() if k != "first"}
            best = max(others, key=lambda k: others[k])
            if others[best] > SHARE_THRESHOLD:
                return named[best]
        return named["first"] if sink > SHARE_THRESHOLD else None
    best = max(shares, key=lambda k: shares[k])
    return named[best] if shares[best] > SHARE_THRESHOLD else None


def punctuation_tokens(axis: TokenAxis) -> list[str]:
    """The tokens counted as punctuation, each once, in order: what the "punct" share adds up."""
    return list(dict.fromkeys(t for t, p in zip(axis.tokens, punctuation(axis), strict=True) if p))


def shown_stats(result: Attention) -> tuple[str, ...]:
    """The statistics that say something of this text's heads. A decoder has no [CLS] (its first token is "first",
    the sink: share_labels) and sees no next token (the causal mask: its share is 0 by definition); a text with no
    special token after its first has no [SEP] to attend to (a decoder's text). Each would be a column of zeros that
    only hides the others."""
    return shown_of(result.kind, any(result.target.special[1:]))


def shown_of(kind: str, later_special: bool) -> tuple[str, ...]:
    """shown_stats for attention of `kind` over texts with (or without) a special token after their first."""
    drop = {"cls", "next"} if kind == "causal" else set()
    if not later_special:
        drop.add("sep")
    return tuple(k for k in STATS if k not in drop)


def table(
    stats: Mapping[str, Tensor | np.ndarray], head_labels: list[list[str]], keys: Sequence[str] = STATS
) -> list[dict]:
    """One row per head: layer and head (1-based), its label, and each statistic of `keys` present in `stats` (and
    gpt-oss's learned sink, where measured), 4 decimals."""
    n_l, n_h = stats["entropy"].shape
    return [
        {
            "layer": layer + 1,
            "head": h + 1,
            "label": head_labels[layer][h],
            **{k: round(stats[k][layer, h].item(), 4) for k in (*keys, "sink") if k in stats},
        }
        for layer in range(n_l)
        for h in range(n_h)
    ]


def sink_share(result: Attention) -> Tensor | None:
    """(L, H): the share of each head's attention that its learned sink logit takes (gpt-oss: a logit in every row's
    softmax with no token; the row's weights over the tokens sum to the rest), averaged over the queries the other
    statistics count (a decoder's forced first rows left out); None for a model without learned sinks."""
    if not result.sinks:
        return None
    n = len(result.target)
    skip = forced(result.kind, n)
    mass = result.received().sum(-1) * n  # (L, H): every row's weight over the tokens, summed over the rows
    if skip:
        mass = mass - result.rows(range(skip)).sum(-1).sum(-1)
    return (1 - mass / max(1, n - skip)).clamp_min(0)


def with_sink(stats: dict[str, Tensor], result: Attention) -> dict[str, Tensor]:
    """`stats` with the share a learned sink logit takes (sink_share) where the model has one (gpt-oss), which
    labels counts as a sink's: the Model overview's, `attnviz stats`', a notebook's and a class's answers alike."""
    learned = sink_share(result)
    return stats if learned is None else {**stats, "sink": learned}


def average(stats_list: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """The mean of several texts' statistics, statistic by statistic."""
    return {k: torch.stack([s[k] for s in stats_list]).mean(0) for k in stats_list[0]}
