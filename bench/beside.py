"""Benchmark: a typed sentence on SmolLM2 while another page's long text runs its forward pass on the same model.

One process, the model loaded once (as the server shares it). A thread sends an N-token text (this repository's
README, cut to N) through the engine's run(), the way a long text's first pass runs; while it is in flight the
main thread types the pronoun sentence again and again, each as a fresh run(). Reported: the sentence alone,
the sentence during the long pass (first, p95, worst), and the long pass alone and beside the typed sentences
(what they cost it). Before issue 24's last step every engine took one lock per pass, so the first sentence
waited for the whole long pass.

Usage: python bench/beside.py [--tokens 4096] [--backend scratch|hf] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SENTENCE = "The animal didn't cross the street because it was too tired."


def long_text(engine, tokens: int) -> str:
    """This repository's README and docs (the README's text before they were split), repeated as needed and cut to
    `tokens` of the model's tokens."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    text = "\n\n".join(page.read_text(encoding="utf-8") for page in pages)
    while len(engine.tokenizer.hf(text)["input_ids"]) < tokens:
        text += "\n" + text
    ids = engine.tokenizer.hf(text)["input_ids"][:tokens]
    return engine.tokenizer.hf.decode(ids)


def one_run(engine, text: str) -> dict:
    """The sentence alone, the long pass alone, then the two at once."""
    start = time.perf_counter()
    engine.run(engine.encode(SENTENCE))
    alone = time.perf_counter() - start
    start = time.perf_counter()
    engine.run(engine.encode(text))
    long_alone = time.perf_counter() - start

    times: list[float] = []
    done = threading.Event()
    long_beside: list[float] = []

    def long_pass() -> None:
        t = time.perf_counter()
        engine.run(engine.encode(text))
        long_beside.append(time.perf_counter() - t)
        done.set()

    thread = threading.Thread(target=long_pass, daemon=True)
    thread.start()
    time.sleep(0.5)  # the long pass is under way
    while not done.is_set():
        t = time.perf_counter()
        engine.run(engine.encode(SENTENCE))
        times.append(time.perf_counter() - t)
        time.sleep(0.25)  # a class types, it does not hammer
    thread.join()
    times.sort()
    return {
        "alone": alone,
        "first": times[0] if times else float("nan"),
        "p95": times[min(len(times) - 1, int(0.95 * len(times)))] if times else float("nan"),
        "worst": times[-1] if times else float("nan"),
        "n": len(times),
        "long_alone": long_alone,
        "long_beside": long_beside[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--backend", choices=("scratch", "hf"), default="scratch")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    from attnviz.engines import registry

    hf = registry.load("smollm2", "hf", "cpu")
    engine = registry.scratch_engine(hf) if args.backend == "scratch" else hf
    text = long_text(engine, args.tokens)
    n = len(engine.encode(text).ids)
    engine.run(engine.encode(SENTENCE))  # warm-up: reads the memory-mapped weights in
    print(
        f"SmolLM2 ({args.backend}), a {n:,}-token text beside a typed {len(engine.encode(SENTENCE).ids)}-token "
        f"sentence, {args.runs} runs"
    )
    print("| run | sentence alone | during: first | p95 | worst | sentences | long pass alone | beside them |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for i in range(args.runs):
        r = one_run(engine, text)
        rows.append(r)
        during = f"{r['first']:.2f} s | {r['p95']:.2f} s | {r['worst']:.2f} s | {r['n']}"
        print(f"| {i + 1} | {r['alone']:.2f} s | {during} | {r['long_alone']:.1f} s | {r['long_beside']:.1f} s |")
    worst = max(r["worst"] for r in rows)
    print(
        f"worst typed sentence during a long pass over {args.runs} runs: {worst:.2f} s "
        f"(median alone {statistics.median(r['alone'] for r in rows):.2f} s)"
    )


if __name__ == "__main__":
    main()
