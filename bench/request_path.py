"""Benchmark: the request path a page uses, on one device: first call and warm median.

- Heads: `api.prepare(model, backend, text).results()` made anew each call, as a page run makes it (the
  memo asked once, the text encoded once on a miss, the long/eager choice, service.attention with the GPU
  fallback), for a typed sentence, on both backends;
- on a decoder, the Knock out page's grid (`importance_work`: each head alone knocked out, zero ablation) and the
  Patching page's grid (every head's clean output into the corrupted run, the first indirect-object pair).

"load" is the engine's load onto the device (a fresh process: nothing kept). "first" is the first call after the
load (CUDA's kernels and caches warm up in it). "warm" is the median of `--repeats` more calls, the memo emptied
before each, so each one computes; "memo" is a repeated call the memo answers. The patching grid is timed with
require_flip=False: its arithmetic is the same whether or not the model gets the pair right both ways (a model with
random weights rarely does), and the page computes it only where it does.

--model default is the bundled BERT; --model shaped a Llama of SmolLM2's exact shape with seeded random weights
(engines/smollm2.shaped: what travels to a GPU machine; time depends on the shape, not the weights); any other value
is a model's name or folder as the command line takes it.

Usage: python bench/request_path.py [--device cpu|cuda] [--model default|shaped|NAME] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TEXT = "The animal didn't cross the street because it was too tired."
ABLATION_TEXT = "The trophy doesn't fit into the brown suitcase because it is too large, so we left it"


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _timed(device: str, call: Callable[[], object]) -> float:
    _sync(device)
    start = time.perf_counter()
    call()
    _sync(device)
    return time.perf_counter() - start


def _row(what: str, device: str, call: Callable[[], object], repeats: int, forget: Callable[[], None]) -> str:
    first = _timed(device, call)
    warm = []
    for _ in range(repeats):
        forget()
        warm.append(_timed(device, call))
    memo = _timed(device, call)
    ms = lambda s: f"{s * 1000:,.1f}"  # noqa: E731
    return f"| {what} | {ms(first)} | {ms(statistics.median(warm))} | {ms(max(warm))} | {ms(memo)} |"


def _grids(eng, device: str, repeats: int, forget: Callable[[], None]) -> list[str]:
    """The Knock out page's grid and the Patching page's, on a decoder."""
    from attnviz import api
    from attnviz.interventions import patching

    n = len(eng.encode(ABLATION_TEXT).ids)
    grid = api.importance_work(eng, ABLATION_TEXT, "zero")
    clean, corrupt, answer, wrong = next(iter(patching.IOI_PAIRS.values()))
    patched = api.Work(
        ("bench-patch", eng.name), lambda: patching.patch(eng, clean, corrupt, answer, wrong, require_flip=False)
    )
    return [
        _row(f"Knock out grid, {n} tokens (hf)", device, grid.run, repeats, forget),
        _row("Patching grid (hf)", device, patched.run, repeats, forget),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", default="default")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import torch
    from transformers.utils import logging as hf_logging

    from attnviz import api, service
    from attnviz.engines import registry, smollm2
    from attnviz.interventions.runs import can_intervene

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    torch.set_grad_enabled(False)
    model, label = args.model, args.model
    if args.model == "shaped":
        folder = Path(tempfile.mkdtemp(prefix="smollm2-shaped-"))
        model = str(smollm2.shaped(folder, registry.default_model_dir(), seed=0))
        label = "a Llama of SmolLM2's shape (seeded random weights)"

    def forget() -> None:
        for store in (service.memo(), service.long_memo(), service.heavy_memo()):
            store.clear()

    rows = []
    for backend in ("hf", "scratch"):
        start = time.perf_counter()
        prepared = api.prepare(model, backend, TEXT, device=args.device)
        eng = prepared.engine
        _sync(args.device)
        load = time.perf_counter() - start
        n = len(eng.encode(TEXT).ids)
        rows.append(f"| load ({backend}) | {load * 1000:,.1f} | | | |")

        def heads(backend: str = backend) -> object:  # a page run: its own request, made, looked up, encoded on a miss
            return api.prepare(model, backend, TEXT, device=args.device).results()

        rows.append(_row(f"Heads, {n} tokens ({backend})", args.device, heads, args.repeats, forget))
        if backend == "hf" and can_intervene(eng):
            rows += _grids(eng, args.device, args.repeats, forget)
        device_name = eng.device_name
    print(
        f"# request path: {label} on {device_name}, torch {torch.__version__}, {os.cpu_count()} cores; "
        f"ms, warm = median of {args.repeats} (memo emptied before each)\n"
    )
    print("| what | first | warm median | warm max | memo |\n|---|---:|---:|---:|---:|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
