"""Masks and the kernels that skip masked blocks: equal to dense attention under the same mask."""

import pytest
import torch

from attnviz.engines.scratch import causal_mask, scaled_dot_product_attention
from attnviz.lessons import cost, kernels

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _qkv(n: int, heads: int = 4, kv: int | None = None, dh: int = 16, device="cpu"):
    gen = torch.Generator().manual_seed(n)
    q = torch.randn(2, heads, n, dh, generator=gen)
    k, v = (torch.randn(2, kv or heads, n, dh, generator=gen) for _ in range(2))
    return q.to(device), k.to(device), v.to(device)


def test_mask_shapes_and_meaning():
    n = 10
    assert kernels.full(n).all()
    assert torch.equal(kernels.make("causal", n), causal_mask(n))
    pad = kernels.padding(n, 6)
    assert pad[:, :6].all() and not pad[:, 6:].any()
    sw = kernels.sliding_window(n, 3)
    assert sw[5].nonzero().flatten().tolist() == [3, 4, 5]
    assert kernels.sliding_window(n, 3, causal=False)[5].nonzero().flatten().tolist() == [3, 4, 5, 6, 7]
    st = kernels.strided(16, 4)
    assert st[13].nonzero().flatten().tolist() == [1, 5, 9, 10, 11, 12, 13]
    assert not torch.triu(st, 1).any()  # causal: nothing above the diagonal
    bs = kernels.block_sparse(12, 4)
    assert bs[11].nonzero().flatten().tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert bs[3].nonzero().flatten().tolist() == [0, 1, 2, 3]
    assert kernels.density(causal_mask(4)) == pytest.approx(10 / 16)
    with pytest.raises(ValueError, match="unknown mask"):
        kernels.make("diagonal", 4)
    with pytest.raises(ValueError, match="window"):
        kernels.sliding_window(4, 0)


def test_block_layout_global_and_neighbours():
    lay = kernels.block_layout(5, neighbours=1, global_blocks=1, causal=False)
    assert lay[0].all() and lay[:, 0].all()  # the global block reads and is read by every block
    assert lay[3].nonzero().flatten().tolist() == [0, 2, 3, 4]
    causal = kernels.block_layout(5)
    assert not torch.triu(causal, 1).any()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(("n", "width", "block"), [(100, 1, 16), (100, 5, 16), (64, 17, 64), (33, 40, 8)])
def test_sliding_window_kernel_equals_dense(device, causal, n, width, block):
    q, k, v = _qkv(n, device=device)
    out, band = kernels.sliding_window_attention(q, k, v, width, causal=causal, block=block)
    ref_out, ref_w = scaled_dot_product_attention(q, k, v, kernels.sliding_window(n, width, causal=causal).to(device))
    assert (out - ref_out).abs().max() < 1e-5
    dense = kernels.band_to_dense(band, width)
    assert (dense - ref_w).abs().max() < 1e-5
    assert torch.allclose(dense.sum(-1), torch.ones(2, 4, n, device=device), atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(("n", "block"), [(96, 16), (100, 7), (16, 16)])
def test_block_sparse_kernel_equals_dense(device, causal, n, block):
    q, k, v = _qkv(n, heads=4, kv=2, device=device)  # grouped-query keys and values too
    layout = kernels.block_layout(-(-n // block), causal=causal)
    out, w, keys = kernels.block_sparse_attention(q, k, v, layout, block, causal=causal)
    mask = kernels.block_sparse(n, block, causal=causal).to(device)
    ref_out, ref_w = scaled_dot_product_attention(q, k, v, mask)
    assert (out - ref_out).abs().max() < 1e-5
    assert (kernels.blocks_to_dense(w, keys, block) - ref_w).abs().max() < 1e-5
    # it formed only the allowed blocks: each query block read the keys of its layout row, no more
    m = int(layout.sum(1).max())
    assert w.shape[-1] == m * block  # the longest row: a global query block that reads every block makes m = nb
    for b in range(len(layout)):
        chosen = layout[b].nonzero().flatten().tolist()
        expected = [j for c in chosen for j in range(c * block, min(n, (c + 1) * block))]
        assert [j for j in keys[b].tolist() if j >= 0] == expected


def test_reweigh_uses_the_layers_own_queries_and_keys(bundled_scratch):
    enc, steps = bundled_scratch.steps("The animal didn't cross the street because it was too tired.", 2)
    n = len(enc.ids)
    full = kernels.reweigh(steps, kernels.full(n))
    assert (full - steps.weights[0]).abs().max() < 1e-5  # no new mask: the model's own weights
    window = kernels.reweigh(steps, kernels.sliding_window(n, 3, causal=False))
    assert window.shape == (12, n, n)
    assert torch.allclose(window.sum(-1), torch.ones(12, n), atol=1e-5)
    assert (window[:, 0, 3:] == 0).all()


@pytest.mark.parametrize("device", DEVICES)
def test_looped_heads_equal_batched_heads(device):
    x = torch.randn(2, 20, 64, device=device)
    for kv in (8, 2, 1):
        mha = cost.demo_attention(64, 8, num_kv_heads=kv, device=device)
        with torch.no_grad():
            a, wa = mha(x, x, x, causal_mask(20, device=device))
            b, wb = cost.looped_attention(mha, x, causal_mask(20, device=device))
        assert (a - b).abs().max() < 1e-5 and (wa - wb).abs().max() < 1e-6


def test_heads_cost_measures_every_plan():
    rows = cost.heads_cost(64, 32, (1, 4), kv_heads={4: (2, 1)}, repeats=1, device="cpu")
    plan = [(r.heads, r.kv_heads, r.method) for r in rows]
    assert plan == [
        (1, 1, "batched"),
        (1, 1, "loop over heads"),
        (4, 4, "batched"),
        (4, 4, "loop over heads"),
        (4, 2, "batched"),
        (4, 1, "batched"),
    ]
    assert all(r.ms > 0 and r.peak_mb is None for r in rows)
    assert [r.kv_mb for r in rows[-2:]] == [2 * 32 * 2 * 16 * 4 / 2**20, 2 * 32 * 1 * 16 * 4 / 2**20]


def test_mask_cost_blocked_kernels_form_fewer_scores():
    rows = cost.mask_cost((128, 256), heads=2, d_head=8, width=16, block=16, repeats=1, device="cpu")
    by = {(r.method, r.n): r for r in rows}
    assert by[("dense + mask", 256)].scores_mb == 2 * 256 * 256 * 4 / 2**20
    # linear in N: twice the tokens, twice the scores (dense: four times)
    assert by[("sliding window (blocked)", 256)].scores_mb == 2 * by[("sliding window (blocked)", 128)].scores_mb
    assert by[("dense + mask", 256)].scores_mb == 4 * by[("dense + mask", 128)].scores_mb
    assert by[("sliding window (blocked)", 256)].scores_mb < by[("dense + mask", 256)].scores_mb


def test_the_masks_page_says_what_the_masks_are():
    from attnviz.ui.pages.masks import HOW

    causal = kernels.sliding_window(12, 4)  # w = 4: itself and the 3 before it
    assert causal[8].nonzero().flatten().tolist() == [5, 6, 7, 8] and "w − 1 tokens before it" in HOW["sliding window"]
    both = kernels.sliding_window(12, 4, causal=False)
    assert both[6].nonzero().flatten().tolist() == [3, 4, 5, 6, 7, 8, 9]  # and the w − 1 after it
    layout = kernels.block_layout(5, causal=False)  # itself, a neighbour on each side, one global block (the first)
    assert layout[2].tolist() == [True, True, True, True, False] and layout[:, 0].all() and not layout[1:3, 4].any()
    assert "one global block where BigBird's has two" in HOW["block-sparse"]
