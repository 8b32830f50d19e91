"""A head's query/key space: AttentionViz's normalisation changes no attention, and the plot's faithfulness is
measured as stated."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz import api
from attnviz.analysis import head_stats
from attnviz.corpus import qk


def test_the_normalisation_keeps_every_softmax_and_every_q_k_difference_within_a_row():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(40, 16, generator=g) * 3 + 2, torch.randn(40, 16, generator=g) * 0.5 - 4
    q2, k2 = qk.normalise(q.double(), k.double())
    s, s2 = q.double() @ k.double().T, q2 @ k2.T
    assert torch.allclose(torch.softmax(s / 4, -1), torch.softmax(s2 / 4, -1), atol=1e-12)
    assert torch.allclose(s - s[:, :1], s2 - s2[:, :1], atol=1e-9)  # each row moved by one constant
    assert torch.allclose(k2.mean(0), q2.mean(0), atol=1e-9)  # the centroids meet
    q3, k3 = qk.equal_norms(q.double(), k.double())  # the scale alone: equal mean norms, every dot product kept
    assert abs(q3.norm(dim=-1).mean() - k3.norm(dim=-1).mean()) < 1e-9
    assert torch.allclose(q3 @ k3.T, s, atol=1e-9)


def test_spearman_is_the_rank_correlation():
    a = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert qk.spearman(a, a**3) == 1.0 and qk.spearman(a, -a) == -1.0
    assert abs(qk.spearman(a, np.array([1.0, 1.0, 2.0, 2.0, 3.0])) - 9 / 90**0.5) < 1e-12  # ties at their mean rank


def _rank_rho(a, b) -> float:  # Spearman without ties, from scratch: Pearson of argsort ranks
    ra, rb = np.argsort(np.argsort(a)).astype(float), np.argsort(np.argsort(b)).astype(float)
    return float(np.corrcoef(ra, rb)[0, 1])


def test_faithfulness_is_per_query_unmoved_by_a_key_translation_and_tells_a_faithful_plot_from_a_shuffled_one():
    """The pooled Spearman over every pair moved when the keys were translated (0.402 -> 0.343 on SmolLM2 L1H1: a
    per-query offset that changes no weight). Per query it cannot: a row's scores plus one number rank as before."""
    rng = np.random.default_rng(0)
    m = 40
    qp, kp = rng.normal(size=(m, 2)), rng.normal(size=(m, 2))
    gap = np.linalg.norm(qp[:, None] - kp[None], axis=-1)
    near = -3.0 * gap + 0.05 * rng.normal(size=(m, m))  # attention falls with the plotted distance
    for causal in (False, True):
        got = qk.faithfulness([near], [gap], causal)
        assert got["mean"] > 0.98 and got["nearest_top"] > 0.9 and got["queries"] == (m - 2 if causal else m)
        moved = qk.faithfulness([near + rng.normal(size=(m, 1)) * 10], [gap], causal)  # q . (k + t): + q . t per row
        assert moved == got
        weights = np.exp(near - near.max(-1, keepdims=True))  # what a person means: the weights, recomputed per query
        rows = [(i, i + 1 if causal else m) for i in range(m) if (i + 1 if causal else m) >= 3]
        by_hand = [_rank_rho(weights[i, :s], -gap[i, :s]) for i, s in rows]
        assert abs(got["mean"] - np.mean(by_hand)) < 1e-12 and abs(got["sd"] - np.std(by_hand)) < 1e-12
        assert abs(got["nearest_chance"] - np.mean([1 / s for _, s in rows])) < 1e-12
        shuffled = np.array([rng.permutation(row) for row in near])
        assert abs(qk.faithfulness([shuffled], [gap], causal)["mean"]) < 0.1


def test_a_heads_space_on_bert_reads_the_q_and_k_the_model_scores_with():
    text = head_stats.CORPUS[0]
    space = api.qk_space(text, 2, 3, "default")
    n = len(api.attention(text).main.target)
    assert space.n == n and space.points.shape == (2 * n, 2) and space.pairs == n * n
    assert -1 <= space.faithfulness <= 1 and 0 < space.explained <= 1 and space.queries == n
    assert 0 <= space.nearest_top <= 1 and abs(space.nearest_chance - 1 / n) < 1e-12
    eng = api.engine("default", "scratch")
    _, q, k = qk.read_qk(eng, text, 2, 3)
    w = torch.softmax(q @ k.T / q.shape[-1] ** 0.5, -1)
    assert torch.allclose(w, api.attention(text).main.weights[2, 3], atol=1e-5)
    assert "[" + space.tokens[3] + "]" in space.contexts[3]


@pytest.mark.slow  # SmolLM2's query/key space
def test_a_decoders_space_counts_only_the_pairs_it_may_attend():
    space = api.qk_space(list(head_stats.CORPUS[:2]), 0, 0, "smollm2")
    lengths = [len(api.attention(t, "smollm2").main.target) for t in head_stats.CORPUS[:2]]
    assert space.pairs == sum(n * (n + 1) // 2 for n in lengths)
    assert sorted(set(space.text_index.tolist())) == [0, 1]
