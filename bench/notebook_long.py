"""Benchmark: a long text drawn in a notebook (issue 54, item 3): `attnviz.show` on the first 2,000 SmolLM2 tokens of
this repository's README and DESIGN.md, then its HTML (what a notebook embeds), in a fresh process; the time from the
call to the HTML and the process's peak memory. Before, show() computed for about a minute and refused the text.

Usage: python bench/notebook_long.py [--tokens 2000] [--runs 3]   (each run a fresh Python: no memo carries over)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ONE_RUN = """
import json, resource, sys, time
import attnviz
n = int(sys.argv[1])
text = open("README.md", encoding="utf-8").read() + open("DESIGN.md", encoding="utf-8").read()
engine = attnviz.engine("smollm2")
cut = engine.tokenizer.hf.decode(engine.encode(text).ids[:n], skip_special_tokens=True)
start = time.perf_counter()
view = attnviz.show(cut, model="smollm2", layer=3, head=4)
html = view.html()
seconds, peak = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
got = {"tokens": len(view.result.target_tokens), "long": view.long, "seconds": seconds, "peak_gb": peak}
print(json.dumps({**got, "html_mb": len(html.encode()) / 2**20}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    env = {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    runs = []
    for _ in range(args.runs):
        out = subprocess.run(
            [sys.executable, "-c", ONE_RUN, str(args.tokens)],
            cwd=ROOT,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
        print(runs[-1])
    worst = max(runs, key=lambda r: r["seconds"])
    print(
        f"{worst['tokens']} tokens, long path: {worst['long']}; worst of {len(runs)}: {worst['seconds']:.1f} s to the "
        f"view's HTML ({worst['html_mb']:.1f} MB), peak memory {max(r['peak_gb'] for r in runs):.2f} GB"
    )


if __name__ == "__main__":
    main()
