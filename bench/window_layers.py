"""Benchmark: a sliding-window layer's analysis grows linearly in N, a full layer's quadratically (issue 53).

Gemma 3 270M's shape (4 query heads sharing one key/value head of 256 dimensions; five layers in six see the 512
keys before each query, the sixth every key before it): one layer of each kind, its queries and keys seeded random
numbers (the time does not depend on their values), analysed by LazyAttention as the app does on this CPU (the CPU
kernel where it builds; `--plain` for blocks.BlockPass), at each N. The growth rate between two sizes is
log(t2 / t1) / log(N2 / N1): 1 linear, 2 quadratic; and the windowed layers' share of a whole model's analysis
(15 windowed layers and 3 full ones, Gemma 3 270M's 18) at each N. Best of --repeats.

Usage: python bench/window_layers.py [--sizes 2048,4096,8192] [--repeats 3] [--plain]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEADS, KV_HEADS, DH, WINDOW = 4, 1, 256, 512
WINDOWED, FULL = 15, 3  # Gemma 3 270M's 18 layers: five windowed in every six


def layer_seconds(n: int, window: int, repeats: int) -> float:
    """The best of `repeats` analyses of one layer of n tokens (window 0: every key before each query)."""
    import torch

    from attnviz.lazy import LazyAttention
    from attnviz.tokens import NO_SPAN, TokenAxis

    g = torch.Generator().manual_seed(n)
    q = torch.randn(1, HEADS, n, DH, generator=g)
    k = torch.randn(1, KV_HEADS, n, DH, generator=g)
    tokens = tuple("," if i % 9 == 4 else f"w{i}" for i in range(n))
    axis = TokenAxis(tokens, (True,) + (False,) * (n - 1), tuple(range(n)), (NO_SPAN,) * n)
    best = math.inf
    for _ in range(repeats):
        lazy = LazyAttention(q, k, axis, axis, "causal", "gemma3-shaped", windows=(window,), scale=DH**-0.5)
        start = time.perf_counter()
        lazy.analyse()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2048,4096,8192")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--plain", action="store_true", help="the plain path (ATTNVIZ_FUSED=0)")
    args = parser.parse_args()
    if args.plain:
        os.environ["ATTNVIZ_FUSED"] = "0"
    import torch

    from attnviz import cpu_kernel, fused

    path = "plain" if not fused.available(torch.device("cpu")) else "the CPU kernel"
    if not args.plain and cpu_kernel.error():
        path += f" (not built: {cpu_kernel.error()})"
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = [(n, layer_seconds(n, WINDOW, args.repeats), layer_seconds(n, 0, args.repeats)) for n in sizes]
    print(f"# Gemma 3 270M-shaped layers, {path}, best of {args.repeats}\n")
    print("| N | windowed layer | its growth | full layer | its growth | windowed share of the model's analysis |")
    print("|---|---|---|---|---|---|")
    for i, (n, w, f) in enumerate(rows):
        grow_w = grow_f = "–"
        if i:
            n0, w0, f0 = rows[i - 1]
            grow_w = f"{math.log(w / w0) / math.log(n / n0):.2f}"
            grow_f = f"{math.log(f / f0) / math.log(n / n0):.2f}"
        share = WINDOWED * w / (WINDOWED * w + FULL * f)
        print(f"| {n:,} | {w * 1000:.0f} ms | {grow_w} | {f * 1000:.0f} ms | {grow_f} | {share:.0%} |")


if __name__ == "__main__":
    main()
