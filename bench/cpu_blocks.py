"""Benchmark: where a long text's analysis spends its time on the CPU, and what inductor's fusion would save (issue 53).

One SmolLM2 forward pass at N tokens keeps its queries and keys (as the app's long path does); then, on the first
--layers layers, each timed on the same blocks (lazy.LazyAttention._blocks: whole key-head groups x up to 256 rows
within 16 MB):

- plain: LazyAttention.analyse with ATTNVIZ_FUSED=0, the path the CPU ran before its kernel and runs where none
  builds (blocks.BlockPass: the row normalisers, every statistic, the two pooled maps and the attention received,
  each its own PyTorch operation over the block);
- C kernel: LazyAttention.analyse as the app runs it on this CPU (attnviz/cpu_stats.c: each block's scores from one
  product, then three sweeps a row in the cache; its build, or its load where the cache holds it, is timed apart);
- scores: the blocks' scaled, masked QK^T alone (the one product the analysis cannot skip);
- fused (inductor): the scores, then one function compiled by torch.compile (inductor's C++ backend) that takes a
  block's scores to its normalisers, entropy, the five key-column sums, confidence, column sums and both pooled
  maps' column sums, with no weight written to memory. A probe of what fusion saves, not the app's path: prev, next
  and self and the pooled rows' index_add are left out of it (O(N) and O(P²) work), so it is a lower bound of a
  fused pass's time. Its compile time is reported apart (on a fresh machine; inductor caches it on disk after).

The FLOP floors use this machine's float32 matrix-product speed measured in the same run (a 2,048-square product,
best of five), as bench/long_inputs.py's: the forward pass (projections and attention's two products over the causal
pairs) and the analysis (the statistics' second QK^T). Each run is its own process; quote the worst of three.

Usage: python bench/cpu_blocks.py [--tokens 4096] [--layers 4]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def block_values(s, keys, f1: int, f2: int):
    """One block's scores (h, r, c) -> its rows' normalisers, entropy, key-column shares, confidence, the column sums
    and both pooled maps' column sums: every reduction of the weights, which are never stored."""
    import torch

    top = s.amax(-1, keepdim=True)
    shifted = s - top
    e = torch.exp(shifted)
    z = e.sum(-1, keepdim=True)
    w = e / z
    log_z = torch.log(z).squeeze(-1)
    entropy = log_z - (w * torch.where(e > 0, shifted, 0.0)).sum(-1)
    shares = (w.unsqueeze(-1) * keys).sum(-2)
    c = s.shape[-1]
    pooled1 = torch.nn.functional.pad(w, (0, (-c) % f1)).unflatten(-1, (-1, f1)).sum(-1)
    pooled2 = torch.nn.functional.pad(w, (0, (-c) % f2)).unflatten(-1, (-1, f2)).sum(-1)
    return top.squeeze(-1) + log_z, entropy, shares, w.amax(-1), w.sum(-2), pooled1, pooled2


def main() -> None:
    """Run once and print the table's row."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--layers", type=int, default=4)
    args = parser.parse_args()

    import long_inputs
    import torch

    from attnviz import api
    from attnviz.blocks import key_columns
    from attnviz.lazy import GRID_SIDE, THUMB_SIDE, LazyAttention

    eng = api.engine("smollm2")
    enc = long_inputs._encode(eng, args.tokens)
    start = time.perf_counter()
    lazy = eng.lazy_run(enc)
    forward = time.perf_counter() - start
    n, layers = lazy.n_tokens, args.layers
    speed = max(long_inputs.gflops("cpu") for _ in range(3))
    config = eng.model.config
    heads, dh = config.num_attention_heads, config.head_dim
    pairs = n * (n + 1) / 2
    floor_forward = (long_inputs.flops(config, n) - 2 * dh * pairs * heads * config.num_hidden_layers) / (speed * 1e9)
    floor_layer = 2 * dh * pairs * heads / (speed * 1e9)  # the statistics' QK^T of one layer

    from attnviz import cpu_kernel

    def analysed() -> tuple[LazyAttention, float]:
        one = LazyAttention(lazy.q[:layers], lazy.k[:layers], lazy.source, lazy.source, "causal", "probe", "cpu", 0)
        start = time.perf_counter()
        one.analyse()
        return one, (time.perf_counter() - start) / layers

    os.environ["ATTNVIZ_FUSED"] = "0"
    part, plain = analysed()
    del os.environ["ATTNVIZ_FUSED"]
    start = time.perf_counter()
    if cpu_kernel.load() is None:
        raise SystemExit(f"the CPU kernel does not build here: {cpu_kernel.error()}")
    build = time.perf_counter() - start
    _, kernel = analysed()

    blocks = list(part._blocks())
    start = time.perf_counter()
    for layer in range(layers):
        for h, rows in blocks:
            part._scores(layer, rows, part._seen(rows), h)
    scores = (time.perf_counter() - start) / layers

    keys = key_columns(lazy.source, "causal")
    f1, f2 = math.ceil(n / GRID_SIDE), math.ceil(n / THUMB_SIDE)
    fused = torch.compile(block_values, dynamic=True)
    start = time.perf_counter()
    h, rows = blocks[len(blocks) // 2]
    s = part._scores(0, rows, part._seen(rows), h)
    fused(s, keys[: s.shape[-1]], f1, f2)
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    for layer in range(layers):
        for h, rows in blocks:
            s = part._scores(layer, rows, part._seen(rows), h)
            fused(s, keys[: s.shape[-1]], f1, f2)
    fused_s = (time.perf_counter() - start) / layers

    n_l = config.num_hidden_layers
    print(
        f"| {n:,} | {speed:.0f} | {forward:.2f} s ({forward / floor_forward:.1f}x) | {plain * 1000:.0f} ms "
        f"({plain / floor_layer:.1f}x) | {scores * 1000:.0f} ms ({scores / floor_layer:.1f}x) | "
        f"{fused_s * 1000:.0f} ms ({fused_s / floor_layer:.1f}x) | {compile_s:.1f} s | "
        f"{kernel * 1000:.0f} ms ({kernel / floor_layer:.1f}x) | {build:.1f} s | "
        f"{(forward + n_l * plain) / (floor_forward + n_l * floor_layer):.2f}x / "
        f"{(forward + n_l * fused_s) / (floor_forward + n_l * floor_layer):.2f}x / "
        f"{(forward + n_l * kernel) / (floor_forward + n_l * floor_layer):.2f}x |"
    )


if __name__ == "__main__":
    main()
