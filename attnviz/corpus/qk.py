"""A head's query/key space (AttentionViz, Yeh et al. 2023): its queries and keys projected jointly to 2-D.

A head scores key j for query i by q_i . k_j (times 1/sqrt(d)); attention goes where that is high. AttentionViz
places queries and keys in one plot so that a query sits near the keys it attends to, after two changes that leave
attention as it was:
- queries are multiplied and keys divided by one scale c = sqrt(mean |k| / mean |q|), which makes their mean norms
  equal and keeps every dot product: (c q) . (k / c) = q . k;
- then the keys are translated so that their centroid is the queries' centroid: q . (k + t) = q . k + q . t adds
  the same number to every score of a query's row, so every softmax is unchanged.
(The paper names both changes; the order here, scale then translate, is ours: it makes the centroids meet exactly,
where the other order would move them apart again. After the translation the mean norms are no longer equal.)
The points are then projected to 2-D: PCA (the default, exact and deterministic) or UMAP where umap-learn is
installed. How faithful a plot is, is measured, not assumed, query by query, since a softmax compares keys only
within one query's row: for each query, the Spearman rank correlation between its attention weights and minus the
plotted distances to the keys it may attend to (its scores rank its keys as its weights do), averaged over the
queries with at least three such keys, with its spread; and the share of queries whose nearest plotted key is their
most-attended one, beside chance (one over the keys it may attend to, averaged). A key translation changes no weight,
so it changes neither number. (It was one Spearman over every pair of every query, pooled: per-query offsets that
change no weight moved it, e.g. 0.402 -> 0.343 on SmolLM2 L1H1 under a translation, and pooled 0.125 stood for a
per-query mean of 0.008.)
The vectors are read at the engine's hook points q and k (after the rotary turn, where the model has one).

On a model with rotary positions (Llama, SmolLM2, Qwen, Gemma...) each query and key is turned by its position before
the scores, fastest by 1 radian a token, and that turn can be most of what the plot shows: on SmolLM2 L3H2 (the first
64 tokens of 40 built-in documents) position explains 92% of the queries' spread and 95% of the keys'. So the spread
that position explains is measured for every plot (`position_share`: the adjusted R^2 of grouping the points by
position, queries and keys apart; about 0 when position says nothing however many positions there are), and a rotary
model's tokens are also placed without the turn (`Space.content`: Q and K as the layer projected them, turned back by
the model's own table), which shows what the head reads from the tokens themselves (11% and 4% on L3H2). Its
faithfulness is measured against the model's own scores, after the turn, so it says how much of the head's attention
that view still shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from attnviz.engines.base import Engine, HookedEngine, TurningEngine
from attnviz.engines.hooks import Hooks
from attnviz.engines.scratch import rotate_half
from attnviz.tokens import Encoded

METHODS = ("pca", "umap")
MAX_TOKENS = 2_000  # tokens placed (each as a query and a key); past it the texts are cut
CONTEXT = 6  # tokens either side in a point's hover text


@dataclass
class Space:
    """A head's queries and keys in 2-D: rows 0..n-1 are the queries, n..2n-1 the keys of the same tokens."""

    layer: int
    head: int
    method: str
    points: np.ndarray  # (2n, 2)
    tokens: list[str]  # (n,)
    contexts: list[str]  # (n,): the token in its text, a few tokens either side
    text_index: np.ndarray  # (n,): which text
    position: np.ndarray  # (n,): the token's position in its text
    faithfulness: float  # per query: Spearman's rho of its weights against minus its plotted distances; the mean
    pairs: int  # how many (query, key) pairs it was measured on
    explained: float | None  # PCA: the share of the variance the two axes keep
    faithfulness_sd: float = float("nan")  # the spread of the per-query rho (standard deviation)
    queries: int = 0  # the queries it was measured on (those that may attend to three keys or more)
    nearest_top: float = float("nan")  # the share of queries whose nearest plotted key is their most-attended one
    nearest_chance: float = float("nan")  # that share by chance: the mean of 1 / (keys a query may attend to)
    position_share: tuple[float, float] = (float("nan"), float("nan"))  # (queries, keys): the spread position explains
    turned: bool = True  # placed as the model scores them: after the rotary turn, where the model has one
    content: Space | None = None  # a rotary model's tokens placed without the turn (the same tokens and measures)

    def __repr__(self) -> str:
        n = len(self.tokens)
        return (
            f"Space(L{self.layer + 1}H{self.head + 1} (1-based) by {self.method}: {n:,} queries and {n:,} keys of "
            f"{len(set(self.text_index.tolist()))} texts in 2-D; faithfulness {self.faithfulness:.3f} (mean over "
            f"{self.queries:,} queries; nearest key the most attended {self.nearest_top:.0%}, chance "
            f"{self.nearest_chance:.0%}); position explains {self.position_share[0]:.0%} of the queries' spread, "
            f"{self.position_share[1]:.0%} of the keys'{'' if self.turned else '; without the rotary turn'})"
        )

    @property
    def n(self) -> int:
        """How many tokens are placed (each as a query and a key)."""
        return len(self.tokens)


def equal_norms(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Queries times c, keys divided by c, c = sqrt(mean |k| / mean |q|): equal mean norms, every q . k kept."""
    c = (k.norm(dim=-1).mean() / q.norm(dim=-1).mean().clamp_min(1e-12)).sqrt()
    return q * c, k / c


def translate_keys(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The keys moved so that their centroid is the queries': every query's scores move by one constant."""
    return k - k.mean(0) + q.mean(0)


def normalise(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, d) queries and keys -> the same, AttentionViz's two changes (see the module's docstring): the scale first,
    then the translation, so that the two centroids meet exactly in the plot; every softmax over keys and every
    q . k difference within a row unchanged."""
    q, k = equal_norms(q, k)
    return q, translate_keys(q, k)


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1 with ties given their mean rank."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x))
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    if (counts > 1).any():
        sums = np.bincount(inverse, weights=ranks)
        ranks = (sums / counts)[inverse]
    return ranks


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (Pearson's on the ranks, ties at their mean rank)."""
    ra, rb = _ranks(a), _ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = np.sqrt((ra**2).sum() * (rb**2).sum())
    return float((ra * rb).sum() / den) if den > 0 else float("nan")


def faithfulness(scores: list[np.ndarray], gaps: list[np.ndarray], causal: bool) -> dict:
    """How well a plot's distances follow attention, query by query: per text, `scores` (m, m) ranks each query's
    keys as its weights do (q . k, or the weights themselves) and `gaps` (m, m) are the plotted query-key distances.
    For each query with at least three keys it may attend to (a decoder's first two have one and two: forced), the
    Spearman correlation of its scores with minus its distances, and whether its nearest key is its most attended.
    Returns the mean and standard deviation of those correlations, the queries and pairs counted, the nearest-key
    share and its chance level (the mean of 1 / keys seen)."""
    rhos, tops, chance, pairs = [], [], [], 0
    for d, gap in zip(scores, gaps, strict=True):
        m = d.shape[0]
        for i in range(m):
            seen = i + 1 if causal else m  # the keys query i may attend to: 0..seen-1
            pairs += seen
            if seen < 3:
                continue
            rhos.append(spearman(d[i, :seen], -gap[i, :seen]))
            tops.append(float(np.argmax(d[i, :seen]) == np.argmin(gap[i, :seen])))
            chance.append(1 / seen)
    rho = np.array([r for r in rhos if np.isfinite(r)])
    nan = float("nan")
    return {
        "mean": float(rho.mean()) if rho.size else nan,
        "sd": float(rho.std()) if rho.size else nan,
        "queries": len(rho),
        "pairs": pairs,
        "nearest_top": float(np.mean(tops)) if tops else nan,
        "nearest_chance": float(np.mean(chance)) if chance else nan,
    }


def position_share(points: np.ndarray, positions: np.ndarray) -> float:
    """The share of the points' spread (squared distance to their centroid) that their position explains: the
    adjusted R^2 of their positions' means, 1 - (within-position variance / total variance), each divided by its
    degrees of freedom (n - g and n - 1 for n points at g positions), so that it is about 0, not g / n, when position
    says nothing; it can fall below 0 then. NaN with fewer than two positions or no spread."""
    n = len(points)
    groups, inverse = np.unique(positions, return_inverse=True)
    g = len(groups)
    total = float(((points - points.mean(0)) ** 2).sum())
    if g < 2 or n <= g or total <= 0:
        return float("nan")
    counts = np.bincount(inverse, minlength=g)[:, None]
    means = np.stack([np.bincount(inverse, weights=points[:, c], minlength=g) for c in range(points.shape[1])], 1)
    within = float(((points - (means / counts)[inverse]) ** 2).sum())
    return 1 - (within / (n - g)) / (total / (n - 1))


def unturn(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (.., T, d) turned by the rotary table (cos, sin), each (T, r), on its first r dimensions (x cos +
    rotate_half(x) sin) -> x as it was before: each pair turned back by its angle, and divided by the table's own
    scale where it has one (YaRN's attention factor multiplies cos and sin alike: cos² + sin² is its square)."""
    r = cos.shape[-1]
    turned, rest = x[..., :r], x[..., r:]
    return torch.cat(((turned * cos - rotate_half(turned) * sin) / (cos * cos + sin * sin), rest), dim=-1)


def project(x: np.ndarray, method: str = "pca", seed: int = 0) -> tuple[np.ndarray, float | None]:
    """(m, d) -> (m, 2), and the share of variance kept (PCA); each PCA axis signed so its largest loading is > 0."""
    if method == "umap":
        try:
            import umap
        except ImportError as err:
            raise ValueError("UMAP needs umap-learn (pip install umap-learn); PCA needs nothing") from err
        return umap.UMAP(n_components=2, random_state=seed).fit_transform(x), None
    if method != "pca":
        raise ValueError(f"the projections are {', '.join(METHODS)}, not {method!r}")
    centred = x - x.mean(0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    axes = vt[:2] * np.sign(vt[:2][np.arange(min(2, len(vt))), np.abs(vt[:2]).argmax(1)])[:, None]
    total = float((s**2).sum())
    return centred @ axes.T, (float((s[:2] ** 2).sum()) / total if total > 0 else None)


def read_qk(eng: Engine, text: str, layer: int, head: int) -> tuple[Encoded, torch.Tensor, torch.Tensor, tuple | None]:
    """A text's encoding, one head's (T, d) queries and keys at the hook points (a HookedEngine's forward), and the
    same before the rotary turn, (q, k), where the model has one (else None): the scratch engine's q_unturned and
    k_unturned points, or the turn undone with the model's own table (engine.turns)."""
    if not isinstance(eng, HookedEngine):
        raise ValueError(
            f"'{eng.name}' has no hook points here: its queries and keys are read on the scratch "
            "backend (BERT, and the decoders attnviz computes: Llama, Qwen 2/3, Mistral, OLMo 2, Phi-3, Gemma 2/3, "
            "GPT-2, gpt-oss)"
        )
    if not (0 <= layer < eng.n_layers and 0 <= head < eng.n_heads):
        raise ValueError(
            f"'{eng.name}' has layers 0-{eng.n_layers - 1} and heads 0-{eng.n_heads - 1}, 0-based (L1H1 to "
            f"L{eng.n_layers}H{eng.n_heads} as the pages name them); got layer {layer}, head {head}"
        )
    enc = eng.encode(text)
    hooks = Hooks(read=("q", "k", "q_unturned", "k_unturned"), layers=(layer,))
    eng.forward(enc, hooks)

    def one(name: str) -> torch.Tensor:
        x = hooks.taken[(name, layer)][0].float().cpu()  # (H, T, d) or (Hkv, T, d)
        return x[head] if name.startswith("q") else x[head // (eng.n_heads // x.shape[0])]

    q, k = one("q"), one("k")
    if ("q_unturned", layer) in hooks.taken:
        return enc, q, k, (one("q_unturned"), one("k_unturned"))
    table = eng.turns(layer, q.shape[0]) if isinstance(eng, TurningEngine) else None
    return enc, q, k, None if table is None else (unturn(q, *table), unturn(k, *table))


def _placed(q, k, model_q, model_k, spans, positions, causal, method, seed) -> dict[str, Any]:
    """Queries and keys placed in 2-D (normalised, then projected) and measured against the model's own scores
    (model_q . model_k, after any rotary turn): the fields of a Space that depend on the placing."""
    q, k = normalise(q, k)
    points, explained = project(torch.cat([q, k]).double().numpy(), method, seed)
    n = len(positions)
    qn, kn = model_q.double(), model_k.double()  # the scores as the model has them (before normalising)
    scores = [(qn[s : s + m] @ kn[s : s + m].T).numpy() for s, m in spans]  # row i ranks its keys as its weights do
    gaps = [np.linalg.norm(points[s : s + m, None, :] - points[None, n + s : n + s + m, :], axis=-1) for s, m in spans]
    measured = faithfulness(scores, gaps, causal)
    return {
        "points": points,
        "faithfulness": measured["mean"],
        "pairs": measured["pairs"],
        "explained": explained,
        "faithfulness_sd": measured["sd"],
        "queries": measured["queries"],
        "nearest_top": measured["nearest_top"],
        "nearest_chance": measured["nearest_chance"],
        "position_share": (position_share(points[:n], positions), position_share(points[n:], positions)),
    }


def of_texts(
    eng: Engine,
    texts: list[str],
    layer: int,
    head: int,
    *,
    method: str = "pca",
    max_tokens: int = MAX_TOKENS,
    seed: int = 0,
) -> Space:
    """A head's query/key space over some texts (their first `max_tokens` tokens in all)."""
    causal = eng.kinds[0] == "causal"
    qs, ks, plain, tokens, contexts, which, positions, spans = [], [], [], [], [], [], [], []
    start = 0
    for t, text in enumerate(texts):
        if start >= max_tokens:
            break
        enc, q, k, unturned = read_qk(eng, text, layer, head)
        n = min(len(enc.ids), max_tokens - start)
        toks = list(enc.axis.tokens)
        qs.append(q[:n])
        ks.append(k[:n])
        if unturned is not None:
            plain.append((unturned[0][:n], unturned[1][:n]))
        tokens += toks[:n]
        contexts += [
            " ".join(toks[max(0, i - CONTEXT) : i]) + f" [{toks[i]}] " + " ".join(toks[i + 1 : i + 1 + CONTEXT])
            for i in range(n)
        ]
        which += [t] * n
        positions += list(range(n))
        spans.append((start, n))
        start += n
    if not qs:
        raise ValueError("no tokens to place: give a text")
    model_q, model_k, at = torch.cat(qs), torch.cat(ks), np.array(positions)
    same: dict[str, Any] = {"layer": layer, "head": head, "method": method, "tokens": tokens, "contexts": contexts}
    same |= {"text_index": np.array(which), "position": at}
    content = None
    if plain:
        q0, k0 = torch.cat([p[0] for p in plain]), torch.cat([p[1] for p in plain])
        content = Space(**same, **_placed(q0, k0, model_q, model_k, spans, at, causal, method, seed), turned=False)
    return Space(
        **same, **_placed(model_q, model_k, model_q, model_k, spans, at, causal, method, seed), content=content
    )
