"""Benchmark: the course's cost lessons, measured on one device (the figures the Heads & masks page shows live).

1. The cost of heads: one self-attention pass (d_model 512) for num_heads = 1, 8, 16, every head at once
   (batched (B, H, N, d/h)) against a Python loop over the heads (the same arithmetic, head by head); and at
   16 query heads, 4 and 1 key/value heads (grouped-query, multi-query), batched.
2. Masks and their cost: causal sliding-window attention (width 64) computed dense with a mask, against the
   blocked sliding-window kernel and a blocked block-sparse layout that compute only the allowed blocks.

Each figure is the median of --repeats passes after a warm-up; peak memory is measured on a GPU only (on the
CPU the table gives the size of the scores each method forms). Ratios are within this one run.
Usage: python bench/lessons.py [--device cpu|cuda] [--n 512] [--repeats 10] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from attnviz.engines.scratch import describe_device, resolve_device  # noqa: E402
from attnviz.lessons import cost  # noqa: E402


def _mb(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f}"


def heads_table(rows: list[cost.HeadsCost]) -> list[str]:
    batched = {(r.heads, r.kv_heads): r.ms for r in rows if r.method == "batched"}
    out = ["| heads | K/V heads | method | ms | × batched | peak MB (GPU) | weights MB | K+V MB |", "|" + "---|" * 8]
    for r in rows:
        ratio = r.ms / batched[(r.heads, r.kv_heads)]
        out.append(
            f"| {r.heads} | {r.kv_heads} | {r.method} | {r.ms:.3f} | {ratio:.2f} | {_mb(r.peak_mb)} | "
            f"{r.weights_mb:.1f} | {r.kv_mb:.2f} |"
        )
    return out


def masks_table(rows) -> list[str]:
    dense = {r.n: r.ms for r in rows if r.method == "dense + mask"}
    out = ["| N | method | ms | × dense | peak MB (GPU) | scores formed MB |", "|" + "---|" * 6]
    for r in rows:
        out.append(
            f"| {r.n} | {r.method} | {r.ms:.3f} | {r.ms / dense[r.n]:.2f} | {_mb(r.peak_mb)} | {r.scores_mb:.2f} |"
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="cpu or cuda (default: CUDA when present)")
    parser.add_argument("--n", type=int, default=512, help="tokens for the heads comparison")
    parser.add_argument("--lengths", default="256,512,1024,2048,4096", help="N for the masks comparison")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    dev = resolve_device(args.device)
    torch.set_grad_enabled(False)
    print(f"device: {describe_device(dev)}; torch {torch.__version__}; {platform.processor() or platform.machine()}")
    heads = cost.heads_cost(512, args.n, kv_heads={16: (4, 1)}, repeats=args.repeats, device=dev)
    print(f"\n## The cost of heads: one pass, d_model 512, N = {args.n}\n")
    print("\n".join(heads_table(heads)))
    lengths = tuple(int(x) for x in args.lengths.split(","))
    mask_rows = cost.mask_cost(lengths, repeats=args.repeats, device=dev)
    print("\n## Causal sliding window (w = 64), 8 heads x 64 dims: dense + mask vs blocked kernels\n")
    print("\n".join(masks_table(mask_rows)))
    if args.json:
        payload = {
            "device": describe_device(dev),
            "torch": torch.__version__,
            "heads": [asdict(r) for r in heads],
            "masks": [asdict(r) for r in mask_rows],
        }
        Path(args.json).write_text(json.dumps(payload, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
