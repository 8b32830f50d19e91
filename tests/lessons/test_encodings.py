"""Positions: the sinusoidal encoding against its formula, similarity by offset, learned and rotary positions."""

import math

import pytest
import torch

from attnviz.analysis import head_stats
from attnviz.engines.scratch import RotaryEmbedding
from attnviz.lessons import encodings


@pytest.mark.parametrize(("n", "d"), [(1, 2), (50, 64), (128, 384), (7, 5)])
def test_sinusoidal_equals_the_formula(n, d):
    pe = encodings.sinusoidal(n, d)
    assert pe.shape == (n, d) and pe.dtype == torch.float32
    for pos in range(n):
        for col in range(d):
            i = col // 2
            angle = pos / 10000 ** (2 * i / d)
            expected = math.sin(angle) if col % 2 == 0 else math.cos(angle)
            assert abs(pe[pos, col].item() - expected) < 1e-6, (pos, col)


def test_sinusoidal_rejects_empty_sizes():
    with pytest.raises(ValueError, match="at least one"):
        encodings.sinusoidal(0, 8)


def test_sinusoidal_similarity_depends_on_the_offset_only():
    sim = encodings.similarity(encodings.sinusoidal(60, 64))
    for k in (0, 1, 5, 20):
        diag = sim.diagonal(k)
        assert (diag - diag[0]).abs().max() < 1e-4  # every pair k apart has the same PE·PE
        assert torch.allclose(sim.diagonal(-k), diag)  # symmetric
    # sum_i cos(k w_i) over d/2 pairs: d/2 at k = 0, and smaller at every other offset
    assert abs(sim[0, 0].item() - 32) < 1e-4
    assert (sim[0, 1:] < 32).all()
    offsets = encodings.by_offset(sim, 3)
    assert offsets.shape == (7,) and abs(offsets[3].item() - 32) < 1e-4


def test_cosine_similarity_is_one_on_the_diagonal():
    sim = encodings.similarity(encodings.sinusoidal(10, 16), cosine=True)
    assert torch.allclose(sim.diagonal(), torch.ones(10), atol=1e-6)


def test_wavelengths_run_from_two_pi_to_ten_thousand_two_pi():
    w = encodings.wavelengths(512)
    assert abs(w[0].item() - 2 * math.pi) < 1e-5
    assert w[-1].item() < 2 * math.pi * 10000 and w[-1].item() > 2 * math.pi * 9000


def test_rotary_angles_are_the_engines_own():
    angles = encodings.rotary_angles(20, 64, 100000.0)
    rope = RotaryEmbedding(64, 100000.0)
    assert torch.equal(angles, rope.angles(torch.arange(20)))
    assert abs(angles[3, 0].item() - 3.0) < 1e-6  # the first pair turns one radian per position
    assert abs(angles[3, 1].item() - 3 * 100000 ** (-2 / 64)) < 1e-6


def test_rotary_score_depends_on_the_offset_as_the_formula_says():
    score = encodings.rotary_score_by_offset(16, 10000.0, 12)
    w = [10000 ** (-2 * i / 16) for i in range(8)]
    for offset in range(13):
        expected = sum(2 * math.cos(offset * wi) for wi in w)
        assert abs(score[offset].item() - expected) < 1e-4


def test_learned_positions_are_berts_table(bundled_scratch, bundled_hf):
    table = encodings.learned_positions(bundled_scratch)
    assert table.shape == (512, 384)
    hf_table = encodings.learned_positions(bundled_hf)
    assert torch.equal(table, hf_table)
    sim = encodings.similarity(table[:64], cosine=True)
    # learned, not a formula: neighbours are still more alike than far-apart positions
    near = torch.stack([sim.diagonal(1).mean(), sim.diagonal(2).mean()])
    assert (near > sim.diagonal(40).mean()).all()


def test_learned_positions_say_what_a_rotary_model_uses(tiny_llama_dir):
    from attnviz.engines import registry

    eng = registry.load(str(tiny_llama_dir), "scratch", "cpu")
    with pytest.raises(ValueError, match="rotary"):
        encodings.learned_positions(eng)


def test_positional_heads_use_the_overviews_numbers():
    stats = {s: torch.zeros(2, 3) for s in head_stats.STATS}
    stats["prev"][1, 2] = 0.8
    stats["next"][0, 0] = 0.6
    stats["prev"][0, 1] = 0.5  # not above the threshold
    found = encodings.positional_heads(stats)
    assert [(h.layer, h.head, h.kind) for h in found] == [(1, 2, "previous-token"), (0, 0, "next-token")]
    assert found[0].share == pytest.approx(0.8)


def test_learned_positions_find_gpt2_s_table_and_refuse_marian_s_sinusoid(tiny_gpt2_dir, tiny_marian_dir):
    from attnviz.engines import registry

    gpt2 = registry.load(str(tiny_gpt2_dir), "hf", "cpu")
    assert torch.equal(encodings.learned_positions(gpt2), gpt2.model.base_model.wpe.weight.detach())  # GPT-2: wpe
    marian = registry.load(str(tiny_marian_dir), "hf", "cpu")  # embed_positions: a frozen sinusoid, not learned
    with pytest.raises(ValueError, match="no learned position table"):
        encodings.learned_positions(marian)


def test_a_models_own_rotary_numbers_are_read_from_its_config_and_none_where_theta_alone_does_not_give_them():
    """rotary_of: head size and θ per kind of layer, from transformers' configs as they are (no model built)."""
    from types import SimpleNamespace

    from transformers import BertConfig, Gemma3TextConfig, LlamaConfig, Qwen2Config

    def of(config):
        return encodings.rotary_of(SimpleNamespace(model=SimpleNamespace(config=config), n_layers=4))

    llama = of(LlamaConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=4, rope_theta=500000.0))
    assert llama == encodings.Rotary(16, {"": 500000.0}, {"": 4}) and llama.theta == 500000.0
    qwen = of(Qwen2Config(hidden_size=64, num_attention_heads=2, num_hidden_layers=3, rope_theta=1e6))
    assert (qwen.head_dim, qwen.theta) == (32, 1e6)
    gemma = of(Gemma3TextConfig(num_hidden_layers=6, head_dim=32, sliding_window_pattern=3))
    assert gemma.head_dim == 32 and gemma.thetas == {"full_attention": 1e6, "sliding_attention": 1e4}
    assert gemma.layers == {"full_attention": 2, "sliding_attention": 4} and gemma.theta == 1e4  # most layers'
    scaled = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0}
    scaled |= {"high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    assert of(LlamaConfig(hidden_size=64, num_attention_heads=4, rope_parameters=scaled)) is None  # not θ alone
    assert of(BertConfig()) is None and encodings.rotary_of(SimpleNamespace(n_layers=2)) is None
