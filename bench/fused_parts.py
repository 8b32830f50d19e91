"""Benchmark: where the fused statistics kernel's time goes, one layer of a SmolLM2-shaped model on a GPU.

attnviz/stats_kernel.py runs one Triton program per block of query rows of one head; the profiler sees one kernel
a layer and cannot look inside it. This bench times that kernel (CUDA events, the median of --repeats launches after
a compile and a warm-up) on random queries and keys of the model's shape (9 query heads sharing 3 key/value heads,
head size 64, causal, both pooled maps of a long text: 96 and 32 cells a side, punctuation every 10th key) and:

- parts, by difference (--bf16-parts: also with bf16 products): the whole kernel; without distance and the
  shares; without the column sums; without the pooled maps; without the whole second pass (the row normalisers
  alone); the kernel before this round (its file, .gpu/old_stats_kernel.py, where present: scripts/gpu-site.sh
  writes it from git), in ieee and bf16;
- the second pass alone, given each row's log-sum-exp as the forward pass's own kernel gives it (fused.layer_stats
  takes it from there: `LazyAttention.normalisers`), in each precision: what a long text's analysis costs now;
- the products' precision: ieee (exact float32), tf32x3 (three TF32 products, about float32's accuracy on the
  tensor cores), tf32, bf16, each with its largest difference from ieee (row statistics, column sums, pooled cells);
- the keys' bytes: bf16's second pass from float32 keys that each tile rounds as it loads them (as before 2026-12-01),
  beside the same from keys rounded to bfloat16 once a layer (stats_kernel.layer_pass, now): in the parts, and in
  the sweep at bf16's first tile;
- tile shapes (rows, keys, warps, stages) of the second pass alone (what a long text's analysis runs) for ieee and
  bf16: each time one is the fastest of its precision so far it is printed as `best <precision> tile at N = n:
  R,K,W,S` (the last such line is the best, and a sweep cut short keeps its best so far), which
  scripts/gpu-check.sh hands to bench/long_inputs.py (ATTNVIZ_FUSED_TILES) for that precision's runs.

The floor: the two QK^T products over the pairs a causal query sees (2 x 2 x Dh x pairs x heads flops) at this
device's measured float32 and bf16 matrix-product speeds; a variant that makes one pass over the keys (the second
pass alone, the row normalisers alone) is divided by one product's, half of it (its row says "one QK^T"). A layer's
time x 30 is the model's analysis.

Usage: python bench/fused_parts.py [--sizes 8192,32768] [--repeats 5] [--bf16-parts] [--sweep [--no-parts]]
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEADS, KV, DH, LAYERS = 9, 3, 64, 30
DEVICE = "cuda"  # "cpu" under Triton's interpreter (TRITON_INTERPRET=1, --dry-run): this script's own check
SIDES = (96, 32)
# Each precision's tiles, most likely first (a sweep cut by its time limit keeps the first of each: they alternate).
# The order weighs the one timing there is against spill counts for sm_90 (`python scripts/kernel_compile.py
# --variants given-ieee,given --tiles "64,64,4,2;64,64,8,2;..."`, the given-lse pass, compiled as a launch at 32,768
# tokens specializes it; bench/RESULTS.md, 2026-12-01): the ieee kernel at the default 64 x 64 with 4 warps spills
# (1,133 loads from local memory in its code), at 32 x 64 / 64 x 32 / 32 x 32 0 / 11 / 0, with 8 warps 0; yet on the
# H200 (2026-11-27, the whole kernel) 8 warps took 208.7 ms to the default's 125.5, so the spill-free 8 warps come
# after the smaller tiles. bf16 (bf16 keys) spills at none of these but 128 x 64 with 4 warps (169) and 128 x 128
# (252); none of bf16's shapes has been timed.
TILES = {
    "ieee": ("32,64,4,2", "64,32,4,2", "64,64,4,2", "32,32,4,2", "64,64,8,2", "64,128,8,2", "128,64,8,2",
             "64,64,4,3", "128,64,4,2", "128,128,8,2"),
    "bf16": ("64,64,4,2", "128,64,8,2", "64,64,8,2", "64,64,4,3", "64,128,8,2", "128,32,4,2", "32,64,4,2",
             "128,64,4,2", "128,128,8,2"),
}  # fmt: skip


def _inputs(n: int, seed: int = 0):
    import torch

    g = torch.Generator(device=DEVICE).manual_seed(seed)
    q = torch.randn(HEADS, n, DH, device=DEVICE, generator=g)
    k = torch.randn(KV, n, DH, device=DEVICE, generator=g)
    k[:, 0] += 2.0  # a first key most rows favour, as a decoder's
    codes = torch.zeros(n, dtype=torch.int32, device=DEVICE)
    codes[::10] = 4  # punctuation
    codes[0] = 8  # the first token
    return q, k, codes


def _buffers(n: int):
    import torch

    from attnviz.blocks import pool_factor

    received = torch.zeros(HEADS, n, device=DEVICE)
    pools = []
    for side in SIDES:
        f = pool_factor(n, side)
        pools.append((torch.zeros(HEADS, math.ceil(n / f), math.ceil(n / f), device=DEVICE), f))
    return received, tuple(pools)


def _time(call, repeats: int) -> float:
    """Median seconds of one call, after one untimed call (compile, warm-up)."""
    import torch

    if DEVICE == "cpu":
        start = time.perf_counter()
        call()
        return time.perf_counter() - start
    call()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return sorted(times)[len(times) // 2]


def _run(
    module, n: int, precision: str = "ieee", tile: str | None = None, skip: int = 0, seed: int = 0, given=False,
    round_keys: bool = True,
):  # fmt: skip
    """One layer's pass: (out rows, received, pools) and a closure that runs it again into the same buffers. `given`:
    the rows' normalisers are handed in (as the forward pass's kernel gives them), so only the second pass runs.
    `round_keys=False`: bf16 products from float32 keys, rounded by the kernel as it loads them (before 2026-12-01)."""
    q, k, codes = _inputs(n, seed)
    received, pools = _buffers(n)
    kw = {"scale": DH**-0.5, "causal": True, "pools": pools, "received": received, "precision": precision}
    if module.__name__ == "attnviz.stats_kernel":
        kw.update(tile=tuple(int(x) for x in tile.split(",")) if tile else None, skip=skip)
        if not round_keys:
            kw["round_keys"] = False
    if given:
        # exact normalisers, from the default tile: the same for every tile swept, and one compile fewer a variant
        exact = {**kw, "precision": "ieee"} | ({"tile": None} if "tile" in kw else {})
        kw["lse"] = module.layer_pass(q, k, codes, **exact)[7].clone()

    def call():
        received.zero_()
        for sums, _ in pools:
            sums.zero_()
        return module.layer_pass(q, k, codes, **kw)

    out = call()
    return call, (out, received, [p for p, _ in pools])


def _diff(a, b) -> float:
    (oa, ra, pa), (ob, rb, pb) = a, b
    d = [(oa[:7] - ob[:7]).nan_to_num(0).abs().max().item() / 1.0, (ra - rb).abs().max().item()]
    d += [(x - y).abs().max().item() for x, y in zip(pa, pb, strict=True)]
    return max(d)


def _speed(dtype) -> float:
    import torch

    if DEVICE == "cpu":
        return 1e11
    a = torch.randn(8192, 8192, device=DEVICE, dtype=dtype)
    b = torch.randn(8192, 8192, device=DEVICE, dtype=dtype)
    t = _time(lambda: a @ b, 5)
    return 2 * 8192**3 / t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="8192,32768")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sweep", action="store_true", help="also time every tile shape of TILES")
    parser.add_argument("--bf16-parts", action="store_true", help="the parts again with bf16 products")
    parser.add_argument("--no-parts", action="store_true", help="the whole kernel and the sweep only (with --sweep)")
    parser.add_argument("--dry-run", action="store_true", help="on CPU tensors under Triton's interpreter (slow)")
    args = parser.parse_args()
    global DEVICE
    if args.dry_run:
        os.environ["TRITON_INTERPRET"] = "1"
        DEVICE = "cpu"
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    from attnviz import stats_kernel

    old = None
    old_path = ROOT / ".gpu/old_stats_kernel.py"
    if old_path.exists():
        spec = importlib.util.spec_from_file_location("old_stats_kernel", old_path)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
    f32, bf16 = _speed(torch.float32), _speed(torch.bfloat16)
    name = torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu (interpreter)"
    print(
        f"# the fused statistics kernel, one layer ({HEADS} heads, {KV} key/value heads, head size {DH}, causal, "
        f"pools {SIDES}): {name}, torch {torch.__version__}; matrix products float32 {f32 / 1e12:.1f} TFLOP/s, "
        f"bf16 {bf16 / 1e12:.0f} TFLOP/s; default tile {stats_kernel.tiles(DH)}"
    )
    for n in (int(s) for s in args.sizes.split(",")):
        pairs = n * (n + 1) / 2
        floor_flops = 2 * 2 * DH * pairs * HEADS
        print(f"\n## N = {n:,}: floor {floor_flops / f32 * 1e3:.2f} ms a layer in float32, "
              f"{floor_flops / bf16 * 1e3:.2f} ms in bf16\n")  # fmt: skip
        print(
            "| variant | ms a layer | x 30 layers | / float32 floor of its products | max difference from ieee | "
            "compile, first run |"
            "\n|---|---|---|---|---|---|"
        )
        variants: list[tuple[str, object, dict]] = []
        for precision in ("ieee",) if args.no_parts else ("ieee", "tf32x3", "bf16"):  # first: today's kernel against
            # the one before, and what the analysis costs with the forward pass's normalisers
            variants.append((f"whole kernel, {precision}", stats_kernel, {"precision": precision}))
            if args.no_parts:
                continue
            if old is not None and precision != "tf32x3":
                variants.append((f"the kernel before this round, {precision}", old, {"precision": precision}))
            variants.append((f"second pass alone (lse given), {precision}", stats_kernel,
                             {"precision": precision, "given": True}))  # fmt: skip
            if precision == "bf16":  # the keys read as float32 and rounded in each tile, as before 2026-12-01
                variants.append(("second pass alone (lse given), bf16, float32 keys", stats_kernel,
                                 {"precision": precision, "given": True, "round_keys": False}))  # fmt: skip
        parts = (
            ("without distance and shares", 1),
            ("without column sums", 2),
            ("without pooled maps", 4),
            ("without all three", 7),
            ("row normalisers alone", 8),
        )
        for label, skip in () if args.no_parts else parts:
            variants.append((label, stats_kernel, {"skip": skip}))
        if args.bf16_parts:  # the same parts with bf16 products: what is left once the products are cheap
            variants.append(("whole kernel, bf16", stats_kernel, {"precision": "bf16"}))
            for label, skip in parts:
                variants.append((f"{label}, bf16", stats_kernel, {"skip": skip, "precision": "bf16"}))
        for precision in () if args.no_parts else ("tf32",):
            variants.append((f"whole kernel, {precision}", stats_kernel, {"precision": precision}))
        if args.sweep:
            for tiles in itertools.zip_longest(*TILES.values()):  # ieee's first, bf16's first, ieee's second, ...
                for precision, tile in zip(TILES, tiles, strict=True):
                    if tile is None:
                        continue
                    kw = {"precision": precision, "tile": tile, "given": True}  # the pass a long text runs
                    variants.append((f"second pass, {precision} tile {tile}", stats_kernel, kw))
                    if precision == "bf16" and tile == TILES["bf16"][0]:  # and once from float32 keys: what the
                        # keys' bytes cost (layer_pass rounds them to bf16 once a layer since 2026-12-01)
                        kw = {**kw, "round_keys": False}
                        variants.append((f"second pass, bf16 tile {tile}, float32 keys", stats_kernel, kw))
        best: dict[str, float] = {}
        ref = None
        for label, module, kw in variants:  # each built, compiled, timed and printed in turn: a cut run keeps its rows
            started = time.perf_counter()
            try:
                call, got = _run(module, n, **kw)
            except Exception as e:  # a shape this GPU cannot compile (shared memory, registers): said, not fatal
                print(f"| {label} | failed: {type(e).__name__}: {str(e)[:80]} | | | | |", flush=True)
                continue
            built = time.perf_counter() - started
            ref = got if ref is None else ref
            t = _time(call, args.repeats)
            diff = f"{_diff(got, ref):.1e}" if "skip" not in kw else "–"
            if DEVICE == "cpu" and kw.get("precision") == "bf16":  # the interpreter has no bfloat16: its sums are noise
                diff = "– (interpreter)"
            one = kw.get("given") or kw.get("skip") == 8  # one pass over the keys: one QK^T, half the floor
            print(
                f"| {label} | {t * 1e3:.2f} | {t * LAYERS:.3f} s | {t / (floor_flops / f32 / (2 if one else 1)):.1f}x"
                f"{' (one QK^T)' if one else ''} | {diff} | "
                f"{built:.1f} s |",
                flush=True,
            )
            if "tile" in kw and kw.get("round_keys", True):
                precision = kw["precision"]
                if precision not in best or t < best[precision]:  # printed as found: a sweep cut keeps its best
                    best[precision] = t
                    print(f"best {precision} tile at N = {n:,}: {kw['tile']} ({t * 1e3:.2f} ms)", flush=True)


if __name__ == "__main__":
    main()
