"""Benchmark: the app as a person meets it. Playwright drives Debian's Chromium against `python -m attnviz serve`.

1. first page: time from opening the page on a server just started (serve has loaded the default model and
   computed its first page before the port opened) until all heads are drawn;
2. warm: a new sentence of up to 40 tokens typed and Enter pressed -> every heatmap of the layer
   redrawn with the new tokens (median over distinct sentences, so no result cache helps);
3. a 512-token input: each view (layer grid, one head, overview) timed from the action to the
   drawn figure, and the bytes the server sent over its websocket for it.

Targets: warm median <= 0.5 s and first page <= 5 s (issue 15; they were 1.0 s and 10 s in issue 3); overview of
512 tokens <= 3 s; <= 10 MB sent.
`--model smollm2`: the same on SmolLM2 (9 heads a layer; issue 14: warm median <= 1.5 s), and how long a
fresh process takes to load it once it has been converted (<= 5 s).
Usage: python bench/app_latency.py [--sentences N] [--model default|smollm2] [--backend hf|scratch]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from harness.server import ARGS, CHROMIUM, free_port, start_server  # noqa: E402

SENTENCES = [
    "The trophy didn't fit into the suitcase because it was too big.",
    "Paul tried to call George on the phone, but he wasn't successful.",
    "The city councilmen refused the demonstrators a permit because they feared violence.",
    "Joan made sure to thank Susan for all the help she had received.",
    "The lawyer asked the witness a question, but he was reluctant to repeat it.",
    "The delivery truck zoomed by the school bus because it was going so fast.",
    "Frank felt vindicated when his longtime rival Bill revealed that he was the winner.",
    "The man couldn't lift his son because he was so weak.",
    "The fish ate the worm. It was hungry.",
    "Sam's drawing was hung just above Tina's and it did look much better with another one below it.",
    "Anna did a lot better than her good friend Beth on the test because she had studied so hard.",
    "The firemen arrived after the police because they were coming from so far away.",
]
# Drawn: n heatmaps whose labels differ from the previous figure's, and n heatmap images in the page.
DRAWN_JS = """([n, old]) => {
  const el = document.querySelector('.js-plotly-plot');
  if (!el || !el.data) return false;
  const maps = el.data.filter(d => d.type === 'heatmap');
  return maps.length === n && maps[0].x.join('|') !== old
      && el.querySelectorAll('g.hm image').length === n;
}"""
LABELS_JS = "() => document.querySelector('.js-plotly-plot').data[0].x.join('|')"
TITLE_JS = "(t) => [...document.querySelectorAll('.js-plotly-plot .gtitle')].some(e => e.textContent.startsWith(t))"


def _type(page, text: str) -> None:
    box = page.get_by_label("Text", exact=True)
    box.fill(text)
    box.press("Enter")


def load_seconds() -> float:
    """Seconds for a fresh Python process to load SmolLM2 (the conversion already done)."""
    import subprocess

    code = (
        "import time; t = time.perf_counter(); from attnviz.engines import registry; "
        "registry.load('smollm2', 'hf', 'cpu'); print(time.perf_counter() - t)"
    )
    env = {**__import__("os").environ, "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _print(rows) -> None:
    print("| measure | value | target |")
    print("|---|---:|---|")
    for name, value, target in rows:
        print(f"| {name} | {value} | {target} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=len(SENTENCES))
    parser.add_argument("--model", default="default", choices=("default", "smollm2"))
    parser.add_argument("--backend", default="hf", choices=("hf", "scratch"))
    parser.add_argument("--skip-long", action="store_true", help="leave out the 512-token part")
    args = parser.parse_args()
    heads = 12 if args.model == "default" else 9
    from playwright.sync_api import sync_playwright

    port = free_port()
    log = Path(tempfile.mkdtemp()) / "streamlit.log"
    t0 = time.perf_counter()
    server = start_server(port, log)
    healthy = time.perf_counter() - t0
    url = f"http://127.0.0.1:{port}/?model={args.model}&backend={args.backend}"
    rows = []
    if args.model == "smollm2":
        rows.append(("SmolLM2 loaded by a fresh process (converted already)", f"{load_seconds():.2f} s", "<= 5 s"))
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            sent = [0]
            page.on("websocket", lambda ws: ws.on("framereceived", lambda f: sent.__setitem__(0, sent[0] + len(f))))

            start = time.perf_counter()
            page.goto(url)
            page.wait_for_function(DRAWN_JS, arg=[heads, ""], timeout=120_000)
            cold = time.perf_counter() - start
            rows.append(("server start to healthy", f"{healthy:.2f} s", "-"))
            rows.append(("first page load, server just started", f"{cold:.2f} s", "<= 5 s"))

            warm = []
            for sentence in SENTENCES[: args.sentences]:
                old = page.evaluate(LABELS_JS)
                start = time.perf_counter()
                _type(page, sentence)
                page.wait_for_function(DRAWN_JS, arg=[heads, old], timeout=60_000, polling=10)
                warm.append(time.perf_counter() - start)
            target = "<= 0.5 s" if heads == 12 else "<= 1.5 s"
            rows.append(
                (
                    f"sentence -> all {heads} heads drawn (median of {len(warm)}, max {max(warm):.2f} s)",
                    f"{statistics.median(warm):.2f} s",
                    target,
                )
            )
            if args.skip_long:
                browser.close()
                return

            long_text = " ".join(f"word{i % 50} lorem" for i in range(400))  # far past 512 tokens
            old = page.evaluate(LABELS_JS)
            sent[0] = 0
            start = time.perf_counter()
            _type(page, long_text)
            page.wait_for_function(DRAWN_JS, arg=[12, old], timeout=120_000, polling=10)
            rows.append(("512 tokens: layer grid drawn (pooled)", f"{time.perf_counter() - start:.2f} s", "-"))
            grid_bytes = sent[0]

            for view, title in (("Overview", "All 6 layers"), ("Head", "Layer 1, head 1")):
                sent[0] = 0
                start = time.perf_counter()
                page.get_by_role("radio", name=view, exact=True).click()
                page.wait_for_function(TITLE_JS, arg=title, timeout=120_000, polling=10)
                page.wait_for_function("() => document.querySelector('.js-plotly-plot g.hm image')", polling=10)
                target = "<= 3 s" if view == "Overview" else "-"
                rows.append((f"512 tokens: {view.lower()} drawn", f"{time.perf_counter() - start:.2f} s", target))
                rows.append((f"512 tokens: bytes sent for the {view.lower()}", f"{sent[0] / 2**20:.2f} MB", "<= 10 MB"))
            rows.append(("512 tokens: bytes sent for the layer grid", f"{grid_bytes / 2**20:.2f} MB", "<= 10 MB"))
            browser.close()
    finally:
        server.terminate()
        server.wait(10)
        _print(rows)


if __name__ == "__main__":
    main()
