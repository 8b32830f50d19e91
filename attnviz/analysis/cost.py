"""What attention costs as the input grows: measured, not computed from a formula."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from attnviz.engines.scratch import AttentionSteps, MultiHeadAttention, causal_mask, resolve_device
from attnviz.result import AttentionResult
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


def demo_attention(d_model: int, num_heads: int, seed: int = 0, device=None) -> MultiHeadAttention:
    """A seeded random MultiHeadAttention: the same sizes always give the same weights.

    The seed is set inside a forked random state, so other sessions' random numbers are left alone.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return MultiHeadAttention(d_model, num_heads, device=resolve_device(device), dtype=torch.float32).eval()


def measure(
    d_model: int, num_heads: int, lengths=DEFAULT_LENGTHS, repeats: int = DEFAULT_REPEATS, device=None
) -> list[Cost]:
    """Time and memory of one self-attention pass for each length N, on the engine's device."""
    mha = demo_attention(d_model, num_heads, device=device)
    dev = next(mha.parameters()).device
    out = []
    for n in lengths:
        x = torch.randn(1, n, d_model, device=dev, dtype=torch.float32)
        times, peak = [], None
        with torch.inference_mode():
            mha(x, x, x)  # warm-up
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
                torch.cuda.reset_peak_memory_stats(dev)
                base = torch.cuda.memory_allocated(dev)
            for _ in range(repeats):
                start = time.perf_counter()
                _, w = mha(x, x, x)
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                times.append(time.perf_counter() - start)
            if dev.type == "cuda":
                peak = (torch.cuda.max_memory_allocated(dev) - base) / 2**20
        out.append(Cost(n, statistics.median(times) * 1e3, w.element_size() * w.nelement() / 2**20, peak))
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
    s = mha.steps(x, x, x, mask)
    kind = "causal" if causal else "self"
    name = f"random d_model={mha.d_model}, h={mha.num_heads}"
    return s, AttentionResult(s.weights[0][None].float().cpu().contiguous(), tokens, tokens, kind, name)
