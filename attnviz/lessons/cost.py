"""What attention costs as the input grows: measured, not computed from a formula."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
from torch import Tensor

from attnviz.engines.scratch import (
    MultiHeadAttention,
    causal_mask,
    resolve_device,
    scaled_dot_product_attention,
)
from attnviz.engines.steps import AttentionSteps, layer_steps
from attnviz.lessons import kernels
from attnviz.result import AttentionKind, AttentionResult
from attnviz.tokens import TokenAxis

DEFAULT_LENGTHS = (16, 32, 64, 128, 256, 512)
DEFAULT_REPEATS = 5


@dataclass(frozen=True)
class Cost:
    """One length's measurement."""

    n: int  # tokens
    ms: float  # median time of one forward pass
    weights_mb: float  # size of the (1, H, N, N) weight tensor the pass returned
    peak_mb: float | None  # peak memory the pass allocated on the GPU (None on the CPU)


HEAD_COUNTS = (1, 8, 16)


def demo_attention(
    d_model: int, num_heads: int, seed: int = 0, device=None, num_kv_heads: int | None = None
) -> MultiHeadAttention:
    """A seeded random MultiHeadAttention: the same sizes always give the same weights.

    The seed is set inside a forked random state, so other sessions' random numbers are left alone.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        dev = resolve_device(device)
        return MultiHeadAttention(d_model, num_heads, num_kv_heads=num_kv_heads, device=dev, dtype=torch.float32).eval()


def timed(fn: Callable[[], object], repeats: int, dev: torch.device) -> tuple[float, float | None]:
    """(median ms of fn(), peak MB it allocated on the GPU or None on the CPU), after one warm-up call."""
    with torch.inference_mode():
        fn()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
            torch.cuda.reset_peak_memory_stats(dev)
            base = torch.cuda.memory_allocated(dev)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            times.append(time.perf_counter() - start)
    peak = (torch.cuda.max_memory_allocated(dev) - base) / 2**20 if dev.type == "cuda" else None
    return statistics.median(times) * 1e3, peak


def measure(
    d_model: int, num_heads: int, lengths=DEFAULT_LENGTHS, repeats: int = DEFAULT_REPEATS, device=None
) -> list[Cost]:
    """Time and memory of one self-attention pass for each length N, on the engine's device."""
    mha = demo_attention(d_model, num_heads, device=device)
    dev = next(mha.parameters()).device
    out = []
    for n in lengths:
        x = torch.randn(1, n, d_model, device=dev, dtype=torch.float32)
        ms, peak = timed(partial(mha, x, x, x), repeats, dev)
        out.append(Cost(n, ms, num_heads * n * n * 4 / 2**20, peak))  # the (1, H, N, N) float32 weights
    return out


def looped_attention(mha: MultiHeadAttention, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The same pass as mha(x, x, x, mask), one head at a time in a Python loop: (output, weights (B, H, N, N)).

    The projections are the same batched matrix products; only step 3 (attend) runs head by head.
    """
    b, n, _ = x.shape
    q, k, v = mha._project(x, x, x)  # (B, H, N, Dh), (B, Hkv, N, Dh) x 2
    if mha.rope is not None:
        pos = torch.arange(n, device=x.device)
        q, k = mha.rope.rotate(q, pos), mha.rope.rotate(k, pos)
    group = mha.num_heads // mha.num_kv_heads
    outs, weights = [], []
    for h in range(mha.num_heads):
        o, w = scaled_dot_product_attention(q[:, h], k[:, h // group], v[:, h // group], mask)  # (B, N, Dh), (B, N, N)
        outs.append(o)
        weights.append(w)
    concat = torch.cat(outs, dim=-1)  # (B, N, H*Dh): head h's output in its own slice, as the batched concat
    return mha.w_o(concat), torch.stack(weights, dim=1)


@dataclass(frozen=True)
class HeadsCost:
    """One attention pass with `heads` query heads (and `kv_heads` key/value heads), computed one way."""

    heads: int
    kv_heads: int
    method: str  # "batched" or "loop over heads"
    n: int
    ms: float
    peak_mb: float | None  # peak GPU memory of the pass (None on the CPU)
    weights_mb: float  # the (1, H, N, N) float32 weights the pass returns
    kv_mb: float  # K and V for N tokens (what a decoder caches): 2 · N · H_kv · d_head floats


def heads_cost(
    d_model: int = 512,
    n: int = 512,
    head_counts=HEAD_COUNTS,
    *,
    kv_heads: dict[int, tuple[int, ...]] | None = None,
    repeats: int = DEFAULT_REPEATS,
    device=None,
) -> list[HeadsCost]:
    """Time and memory of one self-attention pass at fixed d_model for each head count, batched and looped.

    kv_heads: for a head count, the key/value head counts to try as well (grouped-query; 1 = multi-query),
    batched only. The loop is the same arithmetic (looped_attention), so any gap is launch and scheduling cost.
    """
    dev = resolve_device(device)
    x = torch.randn(1, n, d_model, device=dev, dtype=torch.float32, generator=None)
    out = []
    plan = [(h, h) for h in head_counts] + [(h, kv) for h, kvs in (kv_heads or {}).items() for kv in kvs if kv != h]
    for h, kv in plan:
        mha = demo_attention(d_model, h, device=dev, num_kv_heads=kv)
        methods = {"batched": lambda mha=mha: mha(x, x, x)}
        if kv == h:
            methods["loop over heads"] = lambda mha=mha: looped_attention(mha, x)
        kv_mb = 2 * n * kv * mha.d_head * 4 / 2**20
        for method, fn in methods.items():
            ms, peak = timed(fn, repeats, dev)
            out.append(HeadsCost(h, kv, method, n, ms, peak, h * n * n * 4 / 2**20, kv_mb))
    return out


MASK_METHODS = ("dense + mask", "sliding window (blocked)", "block-sparse (blocked)")


def _mask_runs(q: Tensor, k: Tensor, v: Tensor, width: int, block: int) -> dict[str, tuple[Callable, int]]:
    """For each method: (a call computing causal local attention of q, k, v, the scores it forms)."""
    heads, n = q.shape[1], q.shape[2]
    window = kernels.sliding_window(n, width).to(q.device)
    layout = kernels.block_layout(-(-n // block), neighbours=1, global_blocks=1)
    return {
        "dense + mask": (lambda: scaled_dot_product_attention(q, k, v, window), heads * n * n),
        "sliding window (blocked)": (
            lambda: kernels.sliding_window_attention(q, k, v, width, block=block),
            heads * n * (block + width - 1),
        ),
        "block-sparse (blocked)": (
            lambda: kernels.block_sparse_attention(q, k, v, layout, block),
            heads * n * block * int(layout.sum(1).max()),
        ),
    }


def mask_cost(
    lengths=(256, 512, 1024, 2048),
    *,
    heads: int = 8,
    d_head: int = 64,
    width: int = 64,
    block: int = 64,
    repeats: int = DEFAULT_REPEATS,
    device=None,
) -> list[kernels.MaskCost]:
    """Time and memory of causal local attention against N: dense with a sliding-window mask, the blocked
    sliding-window kernel (same weights), and the blocked block-sparse kernel (its own layout, same cost class).

    The dense method forms H·N² scores whatever the mask; the blocked ones H·N·(block + width - 1) and
    H·N·block·(blocks a row reads).
    """
    dev = resolve_device(device)
    gen = torch.Generator().manual_seed(0)
    out = []
    for n in lengths:
        q, k, v = (torch.randn(1, heads, n, d_head, generator=gen).to(dev) for _ in range(3))
        runs = _mask_runs(q, k, v, width, block)
        for method, (fn, scores) in runs.items():
            ms, peak = timed(fn, repeats, dev)
            out.append(kernels.MaskCost(method, n, ms, scores * 4 / 2**20, peak))
    return out


def demo_run(
    mha: MultiHeadAttention, tokens: TokenAxis, causal: bool, seed: int = 1
) -> tuple[AttentionSteps, AttentionResult]:
    """A random engine over seeded random token vectors, one per token: its steps and its weights as a result.

    Only the shapes mean something here: the weights are random.
    """
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(1, len(tokens), mha.d_model, generator=gen, dtype=torch.float32)  # (1, T, D)
    x = x.to(next(mha.parameters()).device)
    mask = causal_mask(len(tokens), device=x.device) if causal else None
    s = layer_steps(mha, x, x, x, mask)
    kind: AttentionKind = "causal" if causal else "self"
    name = f"random d_model={mha.d_model}, h={mha.num_heads}"
    return s, AttentionResult(s.weights[0][None].float().cpu().contiguous(), tokens, tokens, kind, name)
