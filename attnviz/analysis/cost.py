"""What attention costs as the input grows: measured, not computed from a formula."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from attnviz.engines.scratch import MultiHeadAttention, resolve_device

DEFAULT_LENGTHS = (16, 32, 64, 128, 256, 512)


@dataclass(frozen=True)
class Cost:
    n: int  # tokens
    ms: float  # median time of one forward pass
    weights_mb: float  # size of the (1, H, N, N) weight tensor the pass returned
    peak_mb: float | None  # peak memory the pass allocated on the GPU (None on the CPU)


def demo_attention(d_model: int, num_heads: int, seed: int = 0, device=None) -> MultiHeadAttention:
    """A seeded random MultiHeadAttention: the same sizes always give the same weights."""
    torch.manual_seed(seed)
    return MultiHeadAttention(d_model, num_heads, device=resolve_device(device)).eval()


def measure(d_model: int, num_heads: int, lengths=DEFAULT_LENGTHS, repeats: int = 5, device=None) -> list[Cost]:
    """Time and memory of one self-attention pass for each length N, on the engine's device."""
    mha = demo_attention(d_model, num_heads, device=device)
    dev = next(mha.parameters()).device
    out = []
    for n in lengths:
        x = torch.randn(1, n, d_model, device=dev)
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
