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
installed. How faithful a plot is, is measured, not assumed: the Spearman rank correlation between the dot product
q_i . k_j and minus the plotted distance between q_i and k_j, over every pair a query may attend to (1.0: nearer
always means a higher score).
The vectors are read at the engine's hook points q and k (after the rotary turn, where the model has one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnviz.engines.base import Engine
from attnviz.engines.hooks import Hooks
from attnviz.tokens import Encoded

METHODS = ("pca", "umap")
MAX_TOKENS = 2_000  # tokens placed (each as a query and a key); past it the texts are cut
MAX_PAIRS = 200_000  # pairs the faithfulness is measured on (a fixed-seed sample past it)
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
    faithfulness: float  # Spearman's rho of q.k against minus the plotted q-k distance
    pairs: int  # how many (query, key) pairs it was measured on
    explained: float | None  # PCA: the share of the variance the two axes keep

    def __repr__(self) -> str:
        n = len(self.tokens)
        return (
            f"Space(L{self.layer + 1}H{self.head + 1} (1-based) by {self.method}: {n:,} queries and {n:,} keys of "
            f"{len(set(self.text_index.tolist()))} texts in 2-D; faithfulness {self.faithfulness:.3f} over "
            f"{self.pairs:,} pairs)"
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


def read_qk(eng: Engine, text: str, layer: int, head: int) -> tuple[Encoded, torch.Tensor, torch.Tensor]:
    """A text's encoding and one head's (T, d) queries and keys at the hook points (a HookedEngine's forward)."""
    if not hasattr(eng, "forward"):
        raise ValueError(
            f"'{eng.name}' has no hook points here: its queries and keys are read on the scratch "
            "backend (BERT, Llama-family models)"
        )
    if not (0 <= layer < eng.n_layers and 0 <= head < eng.n_heads):
        raise ValueError(f"'{eng.name}' has layers 1-{eng.n_layers} and heads 1-{eng.n_heads}")
    enc = eng.encode(text)
    hooks = Hooks(read=("q", "k"), layers=(layer,))
    eng.forward(enc, hooks)
    q, k = hooks.taken[("q", layer)][0].float().cpu(), hooks.taken[("k", layer)][0].float().cpu()  # (H, T, d), (Hkv..)
    return enc, q[head], k[head // (q.shape[0] // k.shape[0])]


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
    qs, ks, tokens, contexts, which, positions, spans = [], [], [], [], [], [], []
    start = 0
    for t, text in enumerate(texts):
        if start >= max_tokens:
            break
        enc, q, k = read_qk(eng, text, layer, head)
        n = min(len(enc.ids), max_tokens - start)
        toks = list(enc.axis.tokens)
        qs.append(q[:n])
        ks.append(k[:n])
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
    q, k = normalise(torch.cat(qs), torch.cat(ks))
    points, explained = project(torch.cat([q, k]).double().numpy(), method, seed)
    n = len(tokens)
    dots, dist = [], []
    qn, kn = torch.cat(qs).double(), torch.cat(ks).double()  # the scores as the model has them (before normalising)
    for s, m in spans:
        d = (qn[s : s + m] @ kn[s : s + m].T).numpy()  # (m, m)
        gap = np.linalg.norm(points[s : s + m, None, :] - points[None, n + s : n + s + m, :], axis=-1)
        seen = np.tril(np.ones((m, m), bool)) if causal else np.ones((m, m), bool)
        dots.append(d[seen])
        dist.append(gap[seen])
    dots_all, dist_all = np.concatenate(dots), np.concatenate(dist)
    if len(dots_all) > MAX_PAIRS:
        pick = np.random.default_rng(seed).choice(len(dots_all), MAX_PAIRS, replace=False)
        dots_all, dist_all = dots_all[pick], dist_all[pick]
    return Space(
        layer,
        head,
        method,
        points,
        tokens,
        contexts,
        np.array(which),
        np.array(positions),
        spearman(dots_all, -dist_all),
        len(dots_all),
        explained,
    )
