"""Attention masks, and kernels that skip what a mask forbids.

Masks are (N, N) bool, True = "may attend" (as everywhere in attnviz): full, causal, padding, sliding window of
width w (query i sees keys i-w+1 … i, and i+w-1 when not causal: Longformer's local band), strided (Child et al.
2019: the local band plus every key whose distance is a multiple of the stride) and block-sparse (layouts
of b x b blocks: the diagonal blocks, their neighbours on each side and the first "global" block; like BigBird's
window and global blocks, with one global block where BigBird's ITC layout has two, the first and the last, and
without its random ones).

A dense computation with a mask still forms all N² scores: the mask changes the weights, not the cost. The two
kernels here compute only the allowed blocks, every block in one batched product (no Python loop over blocks):
- `sliding_window_attention`: each block of queries reads only the keys within its window, O(N·w) scores;
- `block_sparse_attention`: each block of queries reads only the key blocks its layout row allows.
Both return what dense attention under the same mask returns (tests/test_masks.py, within 1e-5). They are plain
PyTorch, not fused kernels: they still write their (smaller) scores to memory, as FlashAttention-style kernels
do not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from attnviz.engines.scratch import attend, causal_mask, scaled_dot_product_attention
from attnviz.engines.steps import AttentionSteps

MASKS = ("full", "causal", "padding", "sliding window", "strided", "block-sparse")


def full(n: int) -> Tensor:
    """(n, n) every query sees every key."""
    return torch.ones(n, n, dtype=torch.bool)


def padding(n: int, real: int) -> Tensor:
    """(n, n): a batch padded to n tokens, of which the first `real` are the text: no query looks at padding."""
    if not 0 < real <= n:
        raise ValueError(f"real tokens ({real}) must be between 1 and n ({n})")
    keys = torch.arange(n) < real  # (n,)
    return keys[None, :].expand(n, n).clone()


def sliding_window(n: int, width: int, *, causal: bool = True) -> Tensor:
    """(n, n): query i sees keys j with 0 <= i - j < width (causal), or |i - j| < width (both sides)."""
    if width < 1:
        raise ValueError(f"the window must hold at least one token, not {width}")
    d = torch.arange(n)[:, None] - torch.arange(n)[None, :]  # (n, n): i - j
    return (d >= 0) & (d < width) if causal else d.abs() < width


def strided(n: int, stride: int, *, causal: bool = True) -> Tensor:
    """(n, n): Child et al.'s (2019) strided pattern: keys i - stride … i, and every key a multiple of stride back.

    Not causal: the same on both sides (the paper's pattern is for decoders)."""
    if stride < 1:
        raise ValueError(f"the stride must be at least 1, not {stride}")
    d = torch.arange(n)[:, None] - torch.arange(n)[None, :]  # (n, n): i - j
    m = (d.abs() <= stride) | (d % stride == 0)
    return m & (d >= 0) if causal else m


def block_layout(n_blocks: int, *, neighbours: int = 1, global_blocks: int = 1, causal: bool = True) -> Tensor:
    """(nb, nb) bool: which key blocks each query block reads: itself, `neighbours` blocks each side, the first
    `global_blocks` blocks (read by every block, and reading every block when not causal)."""
    i = torch.arange(n_blocks)
    d = i[:, None] - i[None, :]
    layout = d.abs() <= neighbours
    layout[:, :global_blocks] = True
    if not causal:
        layout[:global_blocks, :] = True
    return layout & (d >= 0) if causal else layout


def expand_layout(layout: Tensor, block: int, n: int) -> Tensor:
    """(nb, nb) block layout -> (n, n) token mask (the last block may be short)."""
    return layout.repeat_interleave(block, 0).repeat_interleave(block, 1)[:n, :n]


def block_sparse(n: int, block: int, *, neighbours: int = 1, global_blocks: int = 1, causal: bool = True) -> Tensor:
    """(n, n) token mask of a block-sparse layout of `block`-token blocks (causal: also within the diagonal)."""
    layout = block_layout(math.ceil(n / block), neighbours=neighbours, global_blocks=global_blocks, causal=causal)
    m = expand_layout(layout, block, n)
    return m & causal_mask(n) if causal else m


def make(
    name: str, n: int, *, width: int = 4, stride: int = 4, block: int = 4, real: int | None = None, causal: bool = False
) -> Tensor:
    """One of MASKS by name, (n, n) bool; `causal` is and-ed into the patterns that have both forms."""
    if name == "full":
        return full(n)
    if name == "causal":
        return causal_mask(n)
    if name == "padding":
        m = padding(n, n if real is None else real)
        return m & causal_mask(n) if causal else m
    if name == "sliding window":
        return sliding_window(n, width, causal=causal)
    if name == "strided":
        return strided(n, stride, causal=causal)
    if name == "block-sparse":
        return block_sparse(n, block, causal=causal)
    raise ValueError(f"unknown mask {name!r}: choose one of {', '.join(MASKS)}")


def density(mask: Tensor) -> float:
    """The share of (query, key) pairs the mask allows: the share of the N² scores a skipping kernel computes."""
    return float(mask.float().mean())


def reweigh(steps: AttentionSteps, mask: Tensor) -> Tensor:
    """(H, T, T): one layer's real Q and K (after position encoding) under another mask, dense.

    The queries, keys and values are the model's own at that layer, scored as the layer scores them (its scale, its
    soft cap, its sinks); only the mask changes.
    """
    q, k, v = steps.q_scored.float(), steps.k_scored.float(), steps.v_heads.float()  # (1, H, T, Dh), (1, Hkv, T, Dh)
    _, w = attend(q, k, v, mask.to(q.device), None, 0, scale=steps.scale, softcap=steps.softcap, sinks=steps.sinks)
    if w is None:  # attend forms every weight unless hooks ask for a fused pass, and there are none
        raise RuntimeError("a dense pass gave no weights")
    return w[0]  # (H, T, T)


def _blocks(x: Tensor, block: int, nb: int) -> Tensor:
    """(.., H, N, D) -> (.., nb, H, block, D): the rows cut into blocks (the last padded with zeros)."""
    x = F.pad(x, (0, 0, 0, nb * block - x.shape[-2]))
    return x.unflatten(-2, (nb, block)).movedim(-3, -4)


def sliding_window_attention(
    q: Tensor, k: Tensor, v: Tensor, width: int, *, causal: bool = True, block: int = 64
) -> tuple[Tensor, Tensor]:
    """Attention under `sliding_window(N, width, causal)` that never forms the N x N scores.

    q, k, v (.., H, N, Dh) (k, v may have fewer heads: grouped-query). The queries are cut into blocks of `block`;
    block b reads only the S = block + width - 1 keys its window can reach (+ width - 1 more when not causal), taken
    as overlapping views of the keys (unfold), so every block is computed in one batched product: H·N·S scores
    instead of H·N². Returns (output (.., H, N, Dv), band (.., H, N, 2·width - 1)): band[.., i, c] is the weight of
    key i - (width - 1) + c (0 outside the sequence or the mask; causal: only the first `width` columns).
    """
    n, w1 = q.shape[-2], width - 1
    nb = -(-n // block)
    right = 0 if causal else w1
    span = block + w1 + right  # S: the keys one block of queries can reach
    qb = _blocks(q, block, nb)  # (.., nb, H, B, Dh)

    def windows(x: Tensor) -> Tensor:  # (.., Hkv, N, D) -> (.., nb, Hkv, S, D): block b's keys, views not copies
        padded = F.pad(x, (0, 0, w1, nb * block - n + right))  # (.., Hkv, w1 + nb·B + right, D)
        return padded.unfold(-2, span, block).transpose(-1, -2).movedim(-3, -4)

    dev = q.device
    qi = (torch.arange(nb, device=dev)[:, None] * block + torch.arange(block, device=dev))[:, :, None]  # (nb, B, 1)
    kj = (torch.arange(nb, device=dev)[:, None] * block - w1 + torch.arange(span, device=dev))[:, None, :]  # (nb,1,S)
    d = qi - kj  # (nb, B, S): i - j
    allowed = ((d >= 0) & (d < width) if causal else d.abs() < width) & (kj >= 0) & (kj < n)
    o, w = scaled_dot_product_attention(qb, windows(k), windows(v), allowed[:, None])  # (.., nb, H, B, Dv|S)
    out = o.movedim(-4, -3).flatten(-3, -2)[..., :n, :]  # (.., H, N, Dv)
    # query r of a block reads its key s at band column c = s - r (both counted from the block's first query)
    c = torch.arange(2 * width - 1, device=dev)
    idx = torch.arange(block, device=dev)[:, None] + c  # (B, 2w-1): s = r + c
    inside = idx < span
    wt = w.movedim(-4, -3)  # (.., H, nb, B, S)
    band = wt.gather(-1, idx.clamp_max(span - 1).expand(*wt.shape[:-1], -1)) * inside  # (.., H, nb, B, 2w-1)
    return out, band.flatten(-3, -2)[..., :n, :]


def band_to_dense(band: Tensor, width: int) -> Tensor:
    """(.., N, 2w-1) band -> (.., N, N) dense weights (zeros off the band), to compare with dense attention."""
    n = band.shape[-2]
    dense = torch.zeros(*band.shape[:-1], n, dtype=band.dtype, device=band.device)
    for c in range(2 * width - 1):
        off = c - (width - 1)  # key = query + off
        if abs(off) >= n:
            continue
        rows = torch.arange(max(0, -off), min(n, n - off), device=band.device)
        dense[..., rows, rows + off] = band[..., rows, c]
    return dense


def block_sparse_attention(
    q: Tensor, k: Tensor, v: Tensor, layout: Tensor, block: int, *, causal: bool = True
) -> tuple[Tensor, Tensor, Tensor]:
    """Attention under a block layout (nb, nb) that computes only the key blocks each query block's row allows.

    Every query block reads m key blocks (m = the longest layout row; shorter rows are padded and masked), gathered
    into one (.., nb, H, B, m·B) product: H·N·m·B scores instead of H·N². Returns (output (.., H, N, Dv),
    weights (.., H, N, m·B) over the keys read, keys (nb, m·B): the key index of each column, -1 for padding).
    """
    n = q.shape[-2]
    nb = -(-n // block)
    dev = q.device
    rows = [r.nonzero().flatten().tolist() for r in layout]
    m = max(len(r) for r in rows)
    chosen = torch.tensor([r + [0] * (m - len(r)) for r in rows], device=dev)  # (nb, m) key blocks, padded
    real = torch.tensor([[True] * len(r) + [False] * (m - len(r)) for r in rows], device=dev)  # (nb, m)

    def gathered(x: Tensor) -> Tensor:  # (.., Hkv, N, D) -> (.., nb, Hkv, m·B, D)
        xb = _blocks(x, block, nb)  # (.., nb, Hkv, B, D)
        picked = xb[..., chosen, :, :, :]  # (.., nb, m, Hkv, B, D)
        return picked.movedim(-4, -3).flatten(-3, -2)  # (.., nb, Hkv, m·B, D)

    keys = (chosen[:, :, None] * block + torch.arange(block, device=dev)).flatten(1)  # (nb, m·B)
    keys = torch.where(real.repeat_interleave(block, 1) & (keys < n), keys, -1)
    qi = torch.arange(nb * block, device=dev).view(nb, block, 1)  # (nb, B, 1)
    allowed = keys[:, None, :] >= 0  # (nb, 1, m·B)
    if causal:
        allowed = allowed & (qi >= keys[:, None, :])
    o, w = scaled_dot_product_attention(_blocks(q, block, nb), gathered(k), gathered(v), allowed[:, None])
    out = o.movedim(-4, -3).flatten(-3, -2)[..., :n, :]  # (.., H, N, Dv)
    return out, w.movedim(-4, -3).flatten(-3, -2)[..., :n, :], keys


def blocks_to_dense(weights: Tensor, keys: Tensor, block: int) -> Tensor:
    """block_sparse_attention's (.., H, N, m·B) weights as a dense (.., H, N, N) tensor (zeros where not read)."""
    n = weights.shape[-2]
    dense = torch.zeros(*weights.shape[:-1], n + 1, dtype=weights.dtype, device=weights.device)  # column n: padding
    cols = torch.where(keys >= 0, keys, n).repeat_interleave(block, 0)[:n]  # (N, m·B): each query's key columns
    dense.scatter_add_(-1, cols.expand_as(weights), weights)
    return dense[..., :n]


@dataclass(frozen=True)
class MaskCost:
    """One length's measurement of one way to compute a masked attention."""

    method: str  # "dense + mask", "sliding window (blocked)", ...
    n: int
    ms: float  # median time of one pass
    scores_mb: float  # the float32 scores the method forms (all of them: H·N² dense, H·N·S blocked)
    peak_mb: float | None  # peak memory the pass allocated on the GPU (None on the CPU)
