"""Blocks of rows: the one implementation of every head statistic, pooled map and attention received.

Both attention values (result.AttentionResult, every weight held; lazy.LazyAttention, weights computed from
queries and keys) hand their weights to `BlockPass` one block of rows at a time; an eager result is the case of
one block per layer. So each statistic below is written once:
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
Each is a (L, H) tensor averaged over the queries of the text, except a decoder's first two (FORCED): the first sees
only itself and puts all its weight there, the second sees two keys, and its previous token is the first; they say
nothing of the head, so no statistic counts them (in a text longer than two tokens; `counted` says how many rows each
statistic averages).

Pooling brings a map to a screen's size: fixed blocks of f x f tokens, each cell the mean of the weights it
covers (the last block may be smaller: it averages what it has), so a cell's label ("tokens 7–12") says
exactly which tokens it averages, for eager and lazy maps alike.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Collection
from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnviz.tokens import TokenAxis

STATS = ("entropy", "distance", "cls", "sep", "punct", "prev", "next", "self", "confidence", "first")
FORCED = 2  # a causal text's first queries whose rows are forced (see the module's docstring)
CONFIDENCE_EXCLUDES = {  # what a row's maximum leaves out, for "confidence"
    "end": "the end token (Voita et al. 2019)",
    "specials": "every special token",
    "none": "nothing",
}


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


# --- pooling ---


def pool_factor(n: int, max_side: int) -> int:
    """The block size f that brings n tokens to at most max_side cells."""
    return max(1, math.ceil(n / max_side))


def block_sums(x: Tensor, f: int, dim: int) -> Tensor:
    """Sums over consecutive blocks of f along dim (-1 or -2), the last block shorter, without padding copies."""
    if f == 1:
        return x
    n = x.shape[dim]
    whole = n // f * f
    dim = dim % x.dim() - x.dim()  # counted from the end, so that the unflattened block dimension is `dim`
    main = x.narrow(dim, 0, whole).unflatten(dim, (-1, f)).sum(dim)
    if whole == n:
        return main
    rest = x.narrow(dim, whole, n - whole).sum(dim, keepdim=True)
    return torch.cat([main, rest], dim)


def block_counts(n: int, f: int) -> Tensor:
    """How many tokens each block of f covers: f, f, ..., and the rest."""
    counts = torch.full((math.ceil(n / f),), float(f), dtype=torch.float32)
    counts[-1] = n - f * (len(counts) - 1)
    return counts


def pool_rows(acc: Tensor, w: Tensor, rows: slice, f: int, col0: int = 0) -> None:
    """Add a block of rows' weights, (..., r, c) over keys col0 .. col0 + c - 1, to pooled sums (..., P, P) in blocks
    of f x f tokens.

    The rows may start and end anywhere: each is added to the pooled row it belongs to (index r // f); so may the
    keys (a sliding window's first key): they are padded on the left to their block's start.
    """
    shift = col0 % f
    if shift:
        w = torch.nn.functional.pad(w, (shift, 0))
    sums = block_sums(w, f, -1).double()  # (..., r, c/f)
    index = torch.arange(rows.start, rows.stop, device=w.device) // f
    first = col0 // f
    acc[..., first : first + sums.shape[-1]].index_add_(-2, index.to(acc.device), sums.to(acc.device))


def pooled_means(sums: Tensor, n: int, f: int) -> np.ndarray:
    """Pooled sums (..., P, P) of an n-token map in blocks of f -> the means of each block, float32."""
    counts = block_counts(n, f).double()
    return (sums.cpu() / (counts[:, None] * counts[None, :])).float().numpy()


# --- the pass ---


def forced(kind: str, n: int) -> int:
    """How many of a text's first queries are forced: FORCED for a causal text longer than FORCED tokens, else 0."""
    return FORCED if kind == "causal" and n > FORCED else 0


def forced_of(kind: str, lengths: Tensor) -> Tensor:
    """`forced` for each of a tensor of lengths."""
    return FORCED * (lengths > FORCED) if kind == "causal" else torch.zeros_like(lengths)


def counted(name: str, n, kind: str):
    """How many rows a text's statistic averages (n: a length, or a tensor of lengths): every query but the forced
    ones; prev and next only those that have that neighbour (a decoder's forced rows include the one without a
    previous token). At least 1."""
    f = forced_of(kind, n) if isinstance(n, Tensor) else forced(kind, n)
    missing = {"prev": 1 if kind != "causal" else (f == 0) * 1, "next": 1}.get(name, 0)
    rows = n - f - missing
    return rows.clamp_min(1) if isinstance(rows, Tensor) else max(1, rows)


def key_columns(axis: TokenAxis, kind: str) -> Tensor:
    """(N, 5) float32: which keys are [CLS], another special token, punctuation, the first token, and each key's
    position: one matrix product with a block of weights gives every share and sum_j w_ij j at once. A decoder
    (kind "causal") has no [CLS]: its first token, special (Gemma 3's <bos>) or not, is the sink, counted in the
    first token's share only."""
    n = len(axis)
    special = torch.tensor(axis.special, dtype=torch.bool)
    cls = torch.zeros(n, dtype=torch.bool)
    first = torch.zeros(n, dtype=torch.bool)
    first[:1] = True
    if kind != "causal":
        cls[0] = special[0] if n else False
    punct = torch.tensor(punctuation(axis), dtype=torch.bool)
    other = special & ~(first if kind == "causal" else cls)
    keys = torch.stack([cls, other, punct, first]).float()  # (4, N)
    return torch.cat([keys, torch.arange(n, dtype=torch.float32)[None]]).T.contiguous()


def _entropy(w: Tensor, s: Tensor | None, log_z: Tensor | float, mass: Tensor | None = None) -> Tensor:
    """Each row's entropy over the tokens (row_values' w, s, log_z, mass)."""
    if s is None:  # the weights are all there is (an eager result): -sum_j w log w, 0 log 0 = 0
        return -torch.special.xlogy(w, w).sum(-1)
    # -sum_j w log w = -sum_j w (s - log z) = log z sum_j w - sum_j w s, and sum_j w = 1 unless a sink takes a share
    return (log_z if mass is None else log_z * mass) - torch.linalg.vecdot(w, s)


def _confidence(w: Tensor, excluded) -> Tensor:
    """Each row's largest weight on a key `excluded` does not leave out (row_values' arguments)."""
    if isinstance(excluded, tuple):  # (text, key) index pairs: zeroed for the maximum, then put back
        texts, cols = excluded
        saved = w[texts, ..., cols]
        w[texts, ..., cols] = 0.0
        top = w.amax(-1)
        w[texts, ..., cols] = saved
        return top
    return (w.masked_fill(excluded, 0.0) if excluded is not None else w).amax(-1)


def row_values(
    w: Tensor,
    s: Tensor | None,
    log_z: Tensor | float,
    keys: Tensor,
    excluded,
    n,
    start: int,
    kind: str,
    col0: int = 0,
    only: Collection[str] = STATS,
    mass: Tensor | None = None,
) -> dict[str, Tensor]:
    """{statistic: (..., r)}: every statistic of each row of a block, the values a text's statistic averages; the one
    place each is written (see the module's docstring).

    w (..., r, c): rows start, start + 1, ... of one or more texts' weights over their first c keys, with s and log_z
    as BlockPass.add takes them (s None: the weights are exact and complete, w log w is taken from them); keys
    (..., c, 5): key_columns, per text where there is a batch of texts (padded keys: weight 0); excluded (..., c) or
    None: what a row's maximum leaves out, or for a batch (B, H, r, c), a pair of index tensors (texts, keys): those
    weights are set to 0 for the maximum and put back (w changes during the call only); n: the text's length (a
    number, or a tensor broadcasting over the rows, one per text). prev and next are NaN on a row with no previous
    or next token in the text. col0: the first key's position where the keys start later than 0 (a sliding window's
    first key: those before it have weight 0), keys and excluded then given from there. only: the statistics
    computed (a corpus run's Settings.statistics); the others are not in the dict. mass (..., r): each row's sum of
    weights where it may be less than 1 (a model's learned sinks take the rest); None: every row sums to 1. Beside a
    sink, entropy and distance are over the tokens (the sink's own term left out), the shares of the whole row."""
    c, r = w.shape[-1], w.shape[-2]
    out = {}
    if "entropy" in only:
        out["entropy"] = _entropy(w, s, log_z, mass)
    pos = torch.arange(start, start + r, dtype=torch.float32, device=w.device)  # (r,)
    share_names = ("cls", "sep", "punct", "first")
    if any(name in only for name in share_names) or (kind == "causal" and "distance" in only):
        shares = w @ keys  # (..., r, 5): on cls, sep, punct, first; sum_j w_ij j
        out.update({name: shares[..., i] for i, name in enumerate(share_names) if name in only})
    if "distance" in only and kind == "causal":  # every key j <= i: |i - j| = i - j, so it is i - sum_j w_ij j
        out["distance"] = (pos if mass is None else pos * mass) - shares[..., 4]
    elif "distance" in only:
        j = torch.arange(col0, col0 + c, device=w.device, dtype=torch.float32)
        out["distance"] = torch.einsum("...ij,ij->...i", w, (j[None, :] - pos[:, None]).abs())
    at = torch.arange(start, start + r, device=w.device)  # the rows' positions
    for name, offset in (("prev", -1), ("next", 1), ("self", 0)):
        if name in only:
            j = at + offset
            seen = (j >= col0) & (j < col0 + c)  # a key these rows may see (a masked one has weight 0)
            value = torch.zeros(w.shape[:-1], dtype=w.dtype, device=w.device)
            value[..., seen] = w[..., (at - start)[seen], (j - col0)[seen]]
            out[name] = value.masked_fill((j < 0) | (j >= n), float("nan"))
    if "confidence" in only:
        out["confidence"] = _confidence(w, excluded)
    if kind == "causal":  # a decoder's forced rows (NaN): no statistic counts them
        gone = at < (forced_of(kind, n) if isinstance(n, Tensor) else forced(kind, n))  # (r,), or (..., 1, r)
        out = {k: v.masked_fill(gone, float("nan")) for k, v in out.items()}
    return out


class BlockPass:
    """Running sums over blocks of rows, layer by layer: the statistics, pooled maps and attention received.

    `add` takes one block of one layer: the exact weights w (h, r, c) of heads `heads` and rows `rows` over the
    first c keys (the keys those rows may see), the scores s they came from, shifted so that w = exp(s) / z with
    log_z (h, r), and 0 (not -inf) where a key is masked. An eager result passes s = log w (0 where w is 0) and
    log_z = 0. The sums live on `device` (where the weights are computed) and come to the CPU once, when read.
    """

    def __init__(
        self,
        n_layers: int,
        n_heads: int,
        axis: TokenAxis,
        kind: str,
        *,
        factors: tuple[int, ...] = (),
        confidence_excludes: str = "end",
        device: torch.device | str = "cpu",
    ) -> None:
        n = len(axis)
        self.n, self.kind, self.factors = n, kind, factors
        self.keys = key_columns(axis, kind).to(device)  # (N, 5)
        self.excluded = (~confidence_keys(axis, confidence_excludes)).to(device)  # (N,)
        self.any_excluded = bool(self.excluded.any())
        zeros: dict[str, Any] = {"dtype": torch.float64, "device": device}
        self.acc = {name: torch.zeros(n_layers, n_heads, **zeros) for name in STATS}
        self.received_sum = torch.zeros(n_layers, n_heads, n, **zeros)
        self.pooled_sums = [
            torch.zeros(n_layers, n_heads, math.ceil(n / f), math.ceil(n / f), **zeros) for f in factors
        ]

    def row_values(
        self, rows: slice, w: Tensor, s: Tensor, log_z: Tensor, col0: int = 0, mass: Tensor | None = None
    ) -> dict[str, Tensor]:
        """{statistic: (h, r)}: each statistic of each row of one block (arguments as `add`'s): `row_values`."""
        cols = slice(col0, col0 + w.shape[-1])
        mask = self.excluded[cols] if self.any_excluded else None
        return row_values(w, s, log_z, self.keys[cols], mask, self.n, rows.start, self.kind, col0, mass=mass)

    def add(
        self,
        layer: int,
        rows: slice,
        w: Tensor,
        s: Tensor,
        log_z: Tensor,
        heads: slice = slice(None),
        col0: int = 0,
        mass: Tensor | None = None,
    ) -> None:
        """Add one block of rows of one layer, of some heads (see the class docstring); w and s are not changed.
        col0: the block's first key where its keys start later (a sliding window's: the keys before it have weight
        0, and are not passed); mass (h, r): the rows' sums where a learned sink takes part of each (row_values)."""
        c = w.shape[-1]
        for name, values in self.row_values(rows, w, s, log_z, col0, mass).items():
            self.acc[name][layer, heads] += values.nansum(-1).double()  # prev, next: the rows that have one
        self.received_sum[layer, heads, col0 : col0 + c] += w.sum(1).double()
        for f, sums in zip(self.factors, self.pooled_sums, strict=True):
            pool_rows(sums[layer, heads], w, rows, f, col0)

    def add_rows(self, layer: int, values: dict[str, Tensor], received: Tensor, pooled: list[Tensor]) -> None:
        """Add one whole layer computed elsewhere (attnviz.fused): {statistic: (H, N)} per row (NaN: a row without
        that neighbour), the column sums (H, N) and each factor's pooled sums (H, P, P). A decoder's forced rows are
        left out here, as `row_values` leaves them out of a block."""
        skip = forced(self.kind, self.n)
        for name in STATS:
            self.acc[name][layer] += values[name][..., skip:].double().nansum(-1)
        self.received_sum[layer] += received.double()
        for sums, cells in zip(self.pooled_sums, pooled, strict=True):
            sums[layer] += cells.double()

    def stats(self) -> dict[str, Tensor]:
        """{statistic: (L, H) float32}, each averaged over the queries it counts (`counted`: not a decoder's forced
        rows; prev and next over those that have one)."""
        n = self.n
        return {k: (v / counted(k, n, self.kind)).float().cpu() for k, v in self.acc.items()}

    def received(self) -> Tensor:
        """(L, H, N): the attention each token receives, averaged over the queries."""
        return (self.received_sum / max(1, self.n)).float().cpu()

    def pooled(self, index: int) -> np.ndarray:
        """(L, H, P, P): the means of the pooled map made with the index-th factor."""
        return pooled_means(self.pooled_sums[index], self.n, self.factors[index])


def log_weights(w: Tensor) -> Tensor:
    """log w, with 0 where w is 0 (so that w * log w is 0 there): what an eager result passes as the scores."""
    return torch.where(w > 0, w.clamp_min(torch.finfo(w.dtype).tiny).log(), torch.zeros((), dtype=w.dtype))


def block_mean(x: Tensor, fq: int, fk: int) -> Tensor:
    """(..., Tq, Tk) -> (..., ceil(Tq/fq), ceil(Tk/fk)): the mean of each fq x fk block."""
    sums = block_sums(block_sums(x, fk, -1), fq, -2)
    return sums / (block_counts(x.shape[-2], fq)[:, None] * block_counts(x.shape[-1], fk)[None, :])
