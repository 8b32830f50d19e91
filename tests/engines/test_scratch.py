"""Parity of the from-scratch engine with torch.nn.MultiheadAttention, and its invariants."""

import pytest
import torch
from torch import nn

from attnviz.engines import scratch
from attnviz.engines.hooks import Hooks
from attnviz.engines.scratch import MultiHeadAttention, causal_mask, key_padding_mask, scaled_dot_product_attention
from attnviz.engines.steps import layer_steps

TOL = 1e-5


def _pair(d=64, h=8, bias=True, seed=0):
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(d, h, bias=bias, batch_first=True).eval()
    return ref, MultiHeadAttention.from_torch(ref).eval()


def _close(ours, ref, q, k, v, our_mask=None, torch_mask=None):
    out, w = ours(q, k, v, our_mask)
    ref_out, ref_w = ref(q, k, v, attn_mask=torch_mask, need_weights=True, average_attn_weights=False)
    assert w.shape == ref_w.shape
    assert (w - ref_w).abs().max() < TOL
    assert (out - ref_out).abs().max() < TOL
    return w


@pytest.mark.parametrize("bias", [True, False])
def test_self_attention_matches_torch(bias):
    ref, ours = _pair(bias=bias)
    x = torch.randn(1, 10, 64)
    _close(ours, ref, x, x, x)


def test_batched_self_attention_matches_torch():
    ref, ours = _pair()
    x = torch.randn(5, 7, 64)
    assert _close(ours, ref, x, x, x).shape == (5, 8, 7, 7)


def test_masked_self_attention_matches_torch_and_hides_the_future():
    ref, ours = _pair()
    x = torch.randn(3, 9, 64)
    allowed = causal_mask(9)
    w = _close(ours, ref, x, x, x, our_mask=allowed, torch_mask=~allowed)  # torch: True = blocked
    assert torch.count_nonzero(torch.triu(w, diagonal=1)) == 0


def test_cross_attention_matches_torch_with_different_lengths():
    ref, ours = _pair()
    q, kv = torch.randn(2, 4, 64), torch.randn(2, 11, 64)
    w = _close(ours, ref, q, kv, kv)
    assert w.shape == (2, 8, 4, 11)


def test_key_padding_mask_matches_torch():
    ref, ours = _pair()
    x = torch.randn(2, 6, 64)
    real = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    out, w = ours(x, x, x, key_padding_mask(real))
    ref_out, ref_w = ref(x, x, x, key_padding_mask=~real.bool(), need_weights=True, average_attn_weights=False)
    assert (w - ref_w).abs().max() < TOL
    assert (out - ref_out).abs().max() < TOL
    assert torch.count_nonzero(w[1, :, :, 4:]) == 0


def test_rows_sum_to_one():
    _, ours = _pair()
    x = torch.randn(2, 13, 64)
    _, w = ours(x, x, x, causal_mask(13))
    assert torch.allclose(w.sum(-1), torch.ones(2, 8, 13), atol=1e-6)


def test_sdpa_by_hand():
    q = torch.tensor([[1.0, 0.0]])
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    v = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    out, w = scaled_dot_product_attention(q, k, v)
    e = torch.exp(torch.tensor(1 / 2**0.5))
    expected = torch.tensor([[e / (e + 1), 1 / (e + 1)]])
    assert torch.allclose(w, expected, atol=1e-6)
    assert torch.allclose(out, expected @ v, atol=1e-6)


def test_fully_masked_row_stays_finite():
    q = k = v = torch.randn(1, 2, 3, 4)
    _, w = scaled_dot_product_attention(q, k, v, torch.zeros(3, 3, dtype=torch.bool))
    assert torch.isfinite(w).all()


def test_causal_mask_shapes():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert causal_mask(2, 4).tolist() == [[True, True, True, False], [True, True, True, True]]


def test_steps_reproduce_forward_and_show_the_shapes():
    _, ours = _pair(d=48, h=6)
    x = torch.randn(1, 5, 48)
    out, w = ours(x, x, x, causal_mask(5))
    s = layer_steps(ours, x, x, x, causal_mask(5))
    assert s.q_heads.shape == (1, 6, 5, 8) and s.scores.shape == (1, 6, 5, 5) and s.concat.shape == (1, 5, 48)
    assert torch.allclose(s.weights, w, atol=1e-6) and torch.allclose(s.output, out, atol=1e-6)
    assert s.masked_scores[0, 0, 0, 1] == torch.finfo(torch.float32).min  # the same masking as forward
    assert s.allowed().tolist() == causal_mask(5).tolist()
    names = [name for name, _ in s.trace()]
    assert (
        names[0].startswith("X")
        and names[-1].startswith("output")
        and dict(s.trace())["concat the heads"] == (1, 5, 48)
    )


def test_d_model_must_divide_into_heads():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)


def test_device_resolution(monkeypatch):
    monkeypatch.delenv(scratch.DEVICE_ENV, raising=False)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert scratch.resolve_device().type == expected
    monkeypatch.setenv(scratch.DEVICE_ENV, "cpu")
    assert scratch.resolve_device().type == "cpu"
    assert scratch.resolve_device("cpu").type == "cpu"
    with pytest.raises(ValueError, match="Unknown device"):
        scratch.resolve_device("tpu9")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown when CUDA is missing")
def test_asking_for_cuda_without_a_gpu_says_so():
    with pytest.raises(ValueError, match="no CUDA GPU"):
        scratch.resolve_device("cuda")


def test_gradients_flow_through_the_attention():
    _, ours = _pair()
    x = torch.randn(2, 5, 64, requires_grad=True)
    out, w = ours(x, x, x, causal_mask(5))
    (out.sum() + w[:, :, -1].sum()).backward()
    assert x.grad is not None and torch.isfinite(x.grad).all() and ours.w_q.weight.grad.abs().sum() > 0


@pytest.mark.parametrize(("heads", "kv_heads"), [(9, 3), (8, 1), (4, 4)])
def test_grouped_query_attention_matches_torch_sdpa(heads, kv_heads):
    torch.manual_seed(0)
    q = torch.randn(2, heads, 7, 16)
    k, v = torch.randn(2, kv_heads, 7, 16), torch.randn(2, kv_heads, 7, 16)
    allowed = causal_mask(7)
    out, w = scaled_dot_product_attention(q, k, v, allowed)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)
    assert (out - ref).abs().max() < TOL
    # the weights: query head h reads key/value head h // (heads / kv_heads), as transformers' repeat_kv does
    g = heads // kv_heads
    k_rep, v_rep = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    expected = ((q @ k_rep.transpose(-1, -2)) / 4.0).masked_fill(~allowed, float("-inf")).softmax(-1)
    assert (w - expected).abs().max() < TOL and (w @ v_rep - out).abs().max() < TOL


def test_rotary_embedding_matches_transformers():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    cfg = LlamaConfig(hidden_size=64, num_attention_heads=2, rope_theta=100000.0, max_position_embeddings=4096)
    ref = LlamaRotaryEmbedding(cfg)
    ours = scratch.RotaryEmbedding(32, theta=100000.0)
    torch.manual_seed(0)
    q, k = torch.randn(1, 2, 50, 32), torch.randn(1, 2, 50, 32)
    positions = torch.arange(3000, 3050)  # far positions: the float32 angles must round the same way
    cos, sin = ref(q, positions[None])
    q_ref, k_ref = apply_rotary_pos_emb(q, k, cos, sin)
    assert (ours.rotate(q, positions) - q_ref).abs().max() < TOL
    assert (ours.rotate(k, positions) - k_ref).abs().max() < TOL


def test_rotary_scores_depend_only_on_relative_position():
    rope = scratch.RotaryEmbedding(16)
    torch.manual_seed(1)
    q, k = torch.randn(16), torch.randn(16)
    score = lambda pq, pk: rope.rotate(q[None], torch.tensor([pq])) @ rope.rotate(k[None], torch.tensor([pk])).T  # noqa: E731
    assert torch.allclose(score(10, 7), score(110, 107), atol=1e-4)
    assert not torch.allclose(score(10, 7), score(10, 2), atol=1e-4)


def test_grouped_attention_module_shares_each_kv_head_with_its_group():
    torch.manual_seed(0)
    mha = MultiHeadAttention(48, 6, num_kv_heads=2, bias=False, rope=scratch.RotaryEmbedding(8)).eval()
    assert mha.w_k.weight.shape == (16, 48) and mha.w_q.weight.shape == (48, 48)
    x = torch.randn(1, 5, 48)
    out, w = mha(x, x, x, causal_mask(5))
    s = layer_steps(mha, x, x, x, causal_mask(5))
    assert s.k_heads.shape == (1, 2, 5, 8) and s.group == 3 and s.kv_head(4) == 1
    assert torch.allclose(s.weights, w, atol=1e-6) and torch.allclose(s.output, out, atol=1e-6)
    assert s.angles.shape == (5, 4) and torch.allclose(s.angles[2, 0], torch.tensor(2.0))  # pair 0 turns 1 rad a step
    assert "Q turned by position (RoPE)" in dict(s.trace())


def test_value_norms_are_the_norm_of_each_value_through_its_head_s_part_of_w_o():
    _, ours = _pair(d=48, h=6)
    x = torch.randn(1, 5, 48)
    hooks = Hooks(read=("value_norms",))
    ours(x, x, x, hooks=hooks)
    norms = hooks.get("value_norms", 0)  # (1, H, T)
    v = ours.w_v(x).view(1, 5, 6, 8)  # (B, T, H, Dh)
    for h in (0, 5):
        f = v[0, :, h] @ ours.w_o.weight[:, h * 8 : (h + 1) * 8].T  # (T, D): head h's share of the output
        assert torch.allclose(norms[0, h], f.norm(dim=-1), atol=1e-5)


@pytest.mark.parametrize(("n", "window"), [(100, 16), (257, 64), (130, 65)])
def test_a_windowed_fused_pass_by_blocks_equals_sdpa_with_the_window_as_a_mask(n, window):
    """scratch.windowed_attention (a long text's windowed layers: blocks of queries with the keys each reaches) equals
    SDPA given the whole (N, N) window mask, including the last, shorter block and a window that is no block's size."""
    g = torch.Generator().manual_seed(n)
    q, k, v = (torch.randn(2, 3, n, 8, generator=g) for _ in range(3))
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    dense = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=(j <= i) & (i - j < window))
    assert (scratch.windowed_attention(q, k, v, window) - dense).abs().max() < 1e-5


@pytest.mark.parametrize(("window", "softcap", "sink"), [(0, 0.5, False), (40, None, True), (0, 0.5, True)])
def test_a_fused_pass_with_soft_capping_or_sinks_equals_the_whole_masked_attention(window, softcap, sink):
    """A long text's fused pass for Gemma 2 (soft-capped scores) and gpt-oss (learned sinks): blocks of queries with
    the keys each can see (scratch._explicit_blocks, EXPLICIT_ROWS a block) give what attend gives with the whole
    causal (and window) mask and every weight: the output and, beside a sink, rows that sum to less than 1."""
    n = scratch.EXPLICIT_ROWS + 37  # two blocks, the second shorter
    g = torch.Generator().manual_seed(window)
    q = torch.randn(1, 4, n, 8, generator=g) * 2
    k, v = (torch.randn(1, 2, n, 8, generator=g) for _ in range(2))  # two key/value heads for four query heads
    sinks = torch.tensor([0.0, 2.0, -1.0, 4.0]) if sink else None
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    mask = (j <= i) & ((i - j < window) if window else torch.ones(n, n, dtype=torch.bool))
    dense, w = scratch.attend(q, k, v, mask, None, 0, softcap=softcap, sinks=sinks)
    fused, none = scratch.attend(q, k, v, None, Hooks(fused=True), 0, window=window, softcap=softcap, sinks=sinks)
    assert none is None and (fused - dense).abs().max() < 1e-5
    assert w is not None and w[..., ~mask].abs().max() == 0
    rows = w.sum(-1)
    if sink:  # the sink takes a share of every row, most where few keys are seen (the first rows)
        assert rows.max() <= 1 and rows[0, 3, 0] < 0.1 and rows[0, 3].mean() < 0.9
    else:
        assert (rows - 1).abs().max() < 1e-5
    if softcap:  # every score is within the cap
        scores = scratch.capped(scratch.attention_scores(q, k), softcap)
        assert scores.abs().max() <= softcap and (scores.abs() > 0.4).float().mean() > 0.5  # and it bends most
