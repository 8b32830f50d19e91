"""Benchmark: what a head does, on the bundled SmolLM2 (270 heads; --model gemma3: Gemma 3 270M, 72), this machine's
device.

- the per-head ablation grid (each head alone knocked out, zero ablation) on a 20-token text;
- the patching grid (each head's clean output into the corrupted run) on the indirect-object pair;
- induction: 50 random tokens twice, 10 seeded sequences: the loss on each copy and the best heads, with their
  spread and whether each is told apart from the next;
- which built-in minimal pairs the model gets right both ways (the clean and the corrupted logit difference have
  opposite signs): the indirect-object pairs and the pronoun lab's pairs written as continuations
  ("... The word 'it' means the" -> " animal" / " street").

Each grid runs `runs` times in this process (after one warm-up pass); the worst is what counts. The device's
float32 matrix speed is measured before and after, so that a time can be read against the machine it ran on.
Heads are printed 1-based, as the pages name them.

Usage: python bench/interventions.py [--model smollm2|gemma3] [--backend hf|scratch] [--device cpu|cuda] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TEXT = "The trophy doesn't fit into the brown suitcase because it is too large, so we left it"  # 20 tokens


def _pairs():
    """(name, clean, corrupt, answer, wrong): the page's pairs and the pronoun lab's as continuations."""
    from attnviz.interventions.patching import IOI_PAIRS, pronoun_pairs

    return [(name[:50], *pair) for name, pair in {**IOI_PAIRS, **pronoun_pairs()}.items()]


def main() -> int:
    """Time the grids, report the pairs, print markdown."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=("smollm2", "gemma3"), default="smollm2")
    parser.add_argument("--backend", choices=("hf", "scratch"), default="hf")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    import torch
    from long_inputs import gflops

    from attnviz.engines import registry
    from attnviz.interventions import ablation, induction_scores, patching
    from attnviz.result import head_name

    torch.set_grad_enabled(False)
    engine = registry.load(args.model, args.backend, args.device)
    n = len(engine.encode(TEXT).ids)
    print(
        f"{registry.shown_name(args.model)} ({args.backend}) on {engine.device_name}; the ablation text is {n} "
        f"tokens; float32 matrix speed {gflops(args.device):,.0f} GFLOP/s before the runs"
    )
    ablation.ablate(engine, TEXT, {0: [0]})  # warm-up
    name, clean, corrupt, answer, wrong = _pairs()[0]
    times = {"ablation grid": [], "patching grid": []}
    for _ in range(args.runs):
        start = time.perf_counter()
        grid, clean_loss = ablation.importance(engine, TEXT, "zero")
        times["ablation grid"].append(time.perf_counter() - start)
        start = time.perf_counter()
        patched = patching.patch(engine, clean, corrupt, answer, wrong)
        times["patching grid"].append(time.perf_counter() - start)
    speed = gflops(args.device)
    print("\n| grid | runs (s) | worst (s) |\n|---|---|---:|")
    for what, ts in times.items():
        print(f"| {what} | {' / '.join(f'{t:.1f}' for t in ts)} | {max(ts):.1f} |")
    print(f"\nfloat32 matrix speed after the grids: {speed:,.0f} GFLOP/s")
    flat = grid.flatten()
    top = [(int(i) // engine.n_heads, int(i) % engine.n_heads, float(flat[i])) for i in flat.topk(3).indices]
    print(
        f"\nablation (zero): clean mean loss {clean_loss.mean():.3f} nats; largest increases "
        + ", ".join(f"{head_name(a, b)} +{v:.3f}" for a, b, v in top)
    )
    mean_grid, _ = ablation.importance(engine, TEXT, "mean")
    flat = mean_grid.flatten()
    top = [(int(i) // engine.n_heads, int(i) % engine.n_heads, float(flat[i])) for i in flat.topk(3).indices]
    print(
        "ablation (mean over the reference corpus): largest increases "
        + ", ".join(f"{head_name(a, b)} +{v:.3f}" for a, b, v in top)
    )
    best = patched.restored.flatten().topk(3)
    print(
        f"patching ({name}): d clean {patched.clean_diff:+.2f}, corrupted {patched.corrupt_diff:+.2f}; most restored "
        + ", ".join(
            f"{head_name(int(i) // engine.n_heads, int(i) % engine.n_heads)} {float(v):+.2f}"
            for v, i in zip(best.values, best.indices, strict=True)
        )
    )
    start = time.perf_counter()
    run = induction_scores.run(engine, 50, 0)
    print(
        f"\ninduction (50 tokens twice, {run.batch} sequences from seed 0, {time.perf_counter() - start:.1f} s): "
        f"loss first copy {run.first_copy_loss:.2f}, second copy {run.second_copy_loss:.2f} nats"
    )
    best, sd = run.best(6), run.spread("induction")
    for i, (a, b, s) in enumerate(best):
        apart = (
            ""
            if i == 0
            else (
                " (told apart from the one above)"
                if run.separated(best[i - 1][:2], (a, b))
                else " (within the noise of the one above)"
            )
        )
        print(f"  {head_name(a, b)} induction {s:.3f} ± {float(sd[a, b]):.3f}{apart}")
    dup = run.duplicate.flatten().topk(3)
    print(
        "  duplicate-token (second copy only): "
        + ", ".join(
            f"{head_name(int(i) // engine.n_heads, int(i) % engine.n_heads)} {float(v):.3f}"
            for v, i in zip(dup.values, dup.indices, strict=True)
        )
    )
    print("\n| pair | d clean | d corrupted | right both ways |\n|---|---:|---:|---|")
    for name, clean, corrupt, answer, wrong in _pairs():
        try:
            good, bad = patching.one_token(engine, answer), patching.one_token(engine, wrong)
            a, b = (
                float(patching.logit_diff(engine.logits(engine.encode(t).ids)[-1], good, bad)) for t in (clean, corrupt)
            )
        except ValueError as err:
            print(f"| {name} | - | - | not scored: {err} |")
            continue
        same_length = len(engine.encode(clean).ids) == len(engine.encode(corrupt).ids)
        print(
            f"| {name} | {a:+.2f} | {b:+.2f} | {'yes' if a > 0 > b else 'no'}"
            f"{'' if same_length else ' (lengths differ: not patchable)'} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
