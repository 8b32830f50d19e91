"""Benchmark: the bundled Gemma 3 270M's first load (the one-time conversion of its GGUF file) and a second load.

Each run uses a fresh, empty $ATTNVIZ_CACHE_DIR: one process loads "gemma3" (joining the chunk packages' file,
dequantising it, building the 262,144-token tokenizer, saving the float32 folder), then a second process loads it
again from that folder. Each time is the whole process's (imports included: what a user waits for), with its peak
resident memory; the ratio first / second is what a second start saves. The same for SmolLM2 with --model smollm2.

Usage: python bench/gemma_load.py [--runs 3] [--model gemma3|smollm2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import json, resource, sys, time
start = time.perf_counter()
from attnviz.engines import registry
engine = registry.load(sys.argv[1], "hf", "cpu")
engine.run(engine.encode("The animal didn't cross the street because it was too tired."))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
print(json.dumps({"seconds": time.perf_counter() - start, "peak_gb": peak}))
"""


def _load(model: str, cache: str) -> dict:
    env = {**os.environ, "ATTNVIZ_CACHE_DIR": cache, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, model], env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["process_s"] = time.perf_counter() - start
    return out


def _size(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--model", choices=("gemma3", "smollm2"), default="gemma3")
    args = parser.parse_args()
    print(f"# first and second load of {args.model}, {os.cpu_count()} cores, each in a fresh cache\n")
    print("| run | first load (converts) | peak | second load | peak | first / second | cache folder |")
    print("|---|---|---|---|---|---|---|")
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="attnviz-cache-") as cache:
            first = _load(args.model, cache)
            second = _load(args.model, cache)
            size = _size(Path(cache))
        print(
            f"| {run} | {first['process_s']:.1f} s | {first['peak_gb']:.2f} GB | {second['process_s']:.1f} s | "
            f"{second['peak_gb']:.2f} GB | {first['process_s'] / second['process_s']:.1f}x | {size:.2f} GB |",
            flush=True,
        )


if __name__ == "__main__":
    main()
