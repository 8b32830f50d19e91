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
    _, q, k, unturned = qk.read_qk(eng, text, 2, 3)
    assert unturned is None and space.content is None  # BERT's positions are added, never turned
    w = torch.softmax(q @ k.T / q.shape[-1] ** 0.5, -1)
    assert torch.allclose(w, api.attention(text).main.weights[2, 3], atol=1e-5)
    assert "[" + space.tokens[3] + "]" in space.contexts[3]


@pytest.mark.slow  # SmolLM2's query/key space
def test_a_decoders_space_counts_only_the_pairs_it_may_attend():
    space = api.qk_space(list(head_stats.CORPUS[:2]), 0, 0, "smollm2")
    lengths = [len(api.attention(t, "smollm2").main.target) for t in head_stats.CORPUS[:2]]
    assert space.pairs == sum(n * (n + 1) // 2 for n in lengths)
    assert sorted(set(space.text_index.tolist())) == [0, 1]


def test_the_position_share_is_what_position_explains_and_about_0_when_it_explains_nothing():
    rng = np.random.default_rng(0)
    positions = np.tile(np.arange(30), 40)  # 40 texts of 30 tokens
    clock = np.stack([np.cos(positions), np.sin(positions)], 1)  # RoPE's fastest pair: 1 radian a token
    assert qk.position_share(clock + rng.normal(0, 0.01, clock.shape), positions) > 0.99
    noise = rng.normal(0, 1, clock.shape)
    assert abs(qk.position_share(noise, positions)) < 0.03  # adjusted: not 30 / 1200 by chance
    half = clock + rng.normal(0, 1 / np.sqrt(2), clock.shape)  # as much spread from elsewhere as from position
    assert abs(qk.position_share(half, positions) - 0.5) < 0.05
    assert np.isnan(qk.position_share(noise, np.zeros(len(noise))))  # one position: nothing to explain it by


def test_a_rotary_turn_is_undone_exactly_and_the_hf_turn_back_equals_the_scratch_engines_unturned_points(
    tiny_llama_dir,
):
    from attnviz.engines import registry
    from attnviz.engines.scratch import RotaryEmbedding

    rope = RotaryEmbedding(16)
    x, pos = torch.randn(2, 9, 16), torch.arange(9)
    angle = rope.angles(pos).repeat(1, 2)
    assert torch.allclose(qk.unturn(rope.rotate(x, pos), angle.cos(), angle.sin()), x, atol=1e-6)
    part = torch.cat([rope.rotate(x[..., :16], pos), x], -1)  # a partial turn: the first 16 of 32 dimensions
    assert torch.allclose(qk.unturn(part, angle.cos(), angle.sin()), torch.cat([x, x], -1), atol=1e-6)
    hf = registry.load(str(tiny_llama_dir), "hf", "cpu")
    scratch = registry.scratch_engine(hf)
    text = "The animal didn't cross the street because it was too tired."
    for layer, head in ((0, 1), (1, 3)):
        _, q, k, (q0, k0) = qk.read_qk(hf, text, layer, head)  # turned back with transformers' own table
        _, q2, k2, (q1, k1) = qk.read_qk(scratch, text, layer, head)  # the scratch engine's q_unturned, k_unturned
        assert torch.allclose(q, q2, atol=1e-5) and torch.allclose(k, k2, atol=1e-5)
        assert torch.allclose(q0, q1, atol=1e-5) and torch.allclose(k0, k1, atol=1e-5)
        assert not torch.allclose(q0[1:], q[1:], atol=1e-3)  # the turn did something (position 0 is not turned)
    space = qk.of_texts(hf, [text, text[:30]], 1, 3)
    assert space.turned and space.content is not None and not space.content.turned
    assert space.content.tokens == space.tokens and space.content.pairs == space.pairs


@pytest.mark.slow  # SmolLM2 on 40 windows
def test_on_smollm2_position_is_most_of_the_layout_and_little_of_it_without_the_rotary_turn():
    """The docs' setting (L3H2, the first 40 windows of the built-in corpus, at most 64 tokens each): after the turn
    position explains most of both clouds' spread; turned back, little; both layouts measured against the model's own
    scores."""
    from attnviz.corpus import readers

    eng = api.engine("smollm2")
    texts = [eng.tokenizer.decode(list(eng.encode(t).ids[:64])) for _, t in readers.builtin().documents[:40]]
    space = qk.of_texts(eng, texts, 2, 1)
    content = space.content
    assert content is not None and min(space.position_share) > 0.8 and max(content.position_share) < 0.3
    assert content.queries == space.queries and content.pairs == space.pairs
    assert space.faithfulness > content.faithfulness  # this head's attention is mostly where the tokens stand
