"""Benchmark: every page's own time, as a person meets it in Chromium (issue 36, item 6).

One `python -m attnviz serve` (the default model loaded before its port opens, as `make run` does) and Debian's
Chromium through Playwright, one tab at 1280x800. For BERT and then SmolLM2:

- each page opened on its own URL, timed from the navigation to its first whole run drawn: the run's end
  (Streamlit's `script_finished`, read off the tab's websocket) and every plotly figure of the page laid out;
- each button a person presses for a page's result, timed from the click to the end of the run it starts, drawn
  the same way (a run that follows within 0.3 s, as a click's rerun does, counts instead): Generate's "Write"; the
  pronoun lesson's guess and "Reveal", then "Run the benchmark" (the built-in 273 cases); the knock-out grid ("Knock
  out each of the N heads alone"), the Patch tab and its grid ("Patch every head"); a corpus run of 50 paragraphs;
  "Start a class".

Each model's first page (the Heads page) is reported apart: it is the model's first use on this server (SmolLM2
loads there; BERT was loaded before the port opened), then every page is timed with the model loaded. Each round
opens a new tab, so no browser state carries over. Each round gives the pages a different sentence (the sidebar's
text, Generate's prompt), so the server's result memo never answers a round's forward passes or buttons from an
earlier round; the work whose input does not follow the sentence (the pronoun benchmark's built-in cases, the
patching pair, the corpus run) is timed on round 1 only.

Gemma 3 270M too with `--models gemma3`. Figures go in bench/RESULTS.md beside the functions' own times
(bench/interventions.py, bench/corpus.py), which measure the same work without the browser and the server. Usage:
python bench/pages.py [--rounds 2] [--models default,smollm2] [--pages PAGE,...] [--screens docs/screens]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.server import ARGS, CHROMIUM, IDLE_JS, SETTLED_JS, free_port, start_server  # noqa: E402

PAGES = (
    "",
    "inside",
    "compare",
    "generate",
    "overview",
    "pronouns",
    "positions",
    "head_count",
    "masks",
    "induction",
    "knockout",
    "corpora",
    "classroom",
)
MODELS = {"default": "model=default", "smollm2": "model=smollm2&backend=hf", "gemma3": "model=gemma3&backend=hf"}
TEXTS = (  # one per round, so that a round's buttons never meet the memo of an earlier round's work
    "The animal didn't cross the street because it was too tired.",
    "The trophy didn't fit into the suitcase because it was too big.",
    "Paul tried to call George on the phone, but he wasn't successful.",
    "The city councilmen refused the demonstrators a permit because they feared violence.",
)
# Every plotly figure in sight laid out (drawn), after a run's end; one in a tab not shown is drawn when it is opened.
LAID_OUT_JS = """() => [...document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')]
  .every(p => p.offsetParent === null || (p._fullLayout && p.querySelector('.main-svg')))"""
QUIET_S = 0.3  # a run is over when no other whole run ends this long after it (a click may rerun the page)
FINISHED = 0  # ForwardMsg.script_finished: a whole page's run finished successfully (not a fragment's, not rerun)


class Runs:
    """The whole-page runs whose end has reached this tab (Streamlit's `script_finished`, read off its websocket)."""

    def __init__(self, pg) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        self.ended = 0
        self._msg = ForwardMsg

        def frame(payload) -> None:
            if isinstance(payload, bytes):
                msg = self._msg.FromString(payload)
                if msg.WhichOneof("type") == "script_finished" and msg.script_finished == FINISHED:
                    self.ended += 1

        pg.on("websocket", lambda ws: ws.on("framereceived", frame))


def settled(pg, runs: Runs, before: int, timeout_s: float = 600) -> float:
    """Wait for a whole run's end after `before` ended ones, and its figures laid out; a run that follows within
    QUIET_S counts instead. The time the page was last so (perf_counter)."""
    deadline = time.perf_counter() + timeout_s
    while True:
        while runs.ended <= before:
            if time.perf_counter() > deadline:
                raise TimeoutError("no run ended")
            pg.wait_for_timeout(20)  # Playwright delivers the websocket's frames while it waits
        pg.wait_for_function(LAID_OUT_JS, timeout=timeout_s * 1000, polling=20)
        at, before = time.perf_counter(), runs.ended
        pg.wait_for_timeout(QUIET_S * 1000)
        if runs.ended == before:
            return at


def open_page(browser, base: str, path: str, query: str) -> tuple:
    """A new tab on a page: (tab, its runs, seconds from navigation to the page's first run drawn)."""
    pg = browser.new_page(viewport={"width": 1280, "height": 800})
    runs = Runs(pg)
    t0 = time.perf_counter()
    pg.goto(f"{base}/{path}?{query}")
    return pg, runs, settled(pg, runs, 0) - t0


def press(pg, runs: Runs, button) -> float | None:
    """Click a button (a Locator) once the page has settled (no run under way, its elements stable: SETTLED_JS, so a
    slow machine's run still drawing is waited for, not taken for a page without the button); seconds from the click
    to its run's end drawn, or None where the settled page has no such button."""
    pg.wait_for_function(SETTLED_JS, timeout=600_000, polling=250)
    if not button.count() or not button.first.is_visible():
        return None
    before = runs.ended
    t0 = time.perf_counter()
    button.first.click()
    return settled(pg, runs, before) - t0


def buttons(pg, runs: Runs, path: str, text: str, first_round: bool) -> dict[str, float | None]:
    """The page's buttons, in the order a person would press them: {what: seconds}."""
    main = pg.locator("[data-testid=stMain]")
    got: dict[str, float | None] = {}
    if path == "generate":
        box = main.get_by_label("Prompt")
        box.fill(f"Write one sentence about this, as {len(text)} people would: {text}")
        before = runs.ended
        box.press("Control+Enter")
        settled(pg, runs, before)
        got["Write"] = press(pg, runs, main.get_by_role("button", name="Write"))
    elif path in ("pronouns", "induction"):
        guess = main.locator("[data-testid=stRadio]").filter(has_text="Your guess")
        guess = guess.locator("label").nth(1)  # label 0 is the question's own
        if guess.count() == 0:  # an encoder on the induction page: its message
            return got
        before = runs.ended
        guess.click()
        settled(pg, runs, before)
        got["guess, Reveal"] = press(pg, runs, main.get_by_role("button", name="Reveal"))
        if first_round and path == "pronouns":
            main.get_by_role("tab", name="Benchmark").click()
            got["Run the benchmark (273 cases)"] = press(pg, runs, main.get_by_role("button", name="Run the benchmark"))
    elif path == "knockout":
        got["Knock out each head"] = press(pg, runs, main.get_by_role("button", name="Knock out each of"))
        tab = main.locator("[data-testid=stButtonGroup]").get_by_text("Patch", exact=True)
        if tab.count():
            got["Patch tab"] = press(pg, runs, tab)
            if first_round:  # its pair is the page's first, whatever the text
                got["Patch every head"] = press(pg, runs, main.get_by_role("button", name="Patch every head"))
    elif path == "corpora" and first_round:
        main.get_by_text("Start a run on the built-in corpus").click()
        got["Run on 50 paragraphs"] = press(pg, runs, main.get_by_role("button", name="paragraphs"))
    elif path == "classroom":
        got["Start a class"] = press(pg, runs, main.get_by_role("button", name="Start a class"))
    return got


DECODER_PAGES = ("generate", "induction", "knockout")  # shown with SmolLM2 (BERT has only a message there)


def screens(browser, base: str, folder: Path, pages=PAGES) -> None:
    """Every page at 1280x800, plain and in projector mode, after the buttons a person presses first (BERT; SmolLM2
    where the page needs a decoder): PAGE_MODEL_MODE.png, and its first map alone, PAGE_MODEL_MODE_map.png."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in pages:
        model = "smollm2" if path in DECODER_PAGES else "default"
        for mode in ("plain", "projector"):
            query = MODELS[model] + ("&projector=true" if mode == "projector" else "")
            pg, runs, _ = open_page(browser, base, path, query)
            buttons(pg, runs, path, TEXTS[1], first_round=False)
            maps = pg.locator("[data-testid=stMain] [data-testid=stPlotlyChart]")
            name = f"{path or 'heads'}_{model}_{mode}"
            pg.wait_for_function(IDLE_JS, timeout=300_000)  # no run under way, then its widgets drawn (after 0.8 s
            pg.wait_for_timeout(3000)  # a projector's page still showed grey placeholders for its first widgets)
            pg.screenshot(path=str(folder / f"{name}.png"))
            if maps.count():  # and the page's first map, whole, below Streamlit's header (it hid the map's top)
                box = maps.first.bounding_box() or {"height": 800}
                pg.set_viewport_size({"width": 1280, "height": min(8000, round(box["height"]) + 200)})
                maps.first.evaluate(SCROLL_UNDER_HEADER_JS)
                pg.wait_for_timeout(800)
                box = maps.first.bounding_box()
                if box:
                    pg.screenshot(path=str(folder / f"{name}_map.png"), clip=box)
            pg.close()


# the main area scrolled until the element's top stands 100 px below the window's: clear of the header
SCROLL_UNDER_HEADER_JS = """e => { const main = document.querySelector('[data-testid=stMain]');
  main.scrollTop += e.getBoundingClientRect().top - 100; }"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--models", default="default,smollm2")
    parser.add_argument("--screens", type=Path, help="then save every page, plain and in projector mode, here")
    parser.add_argument("--pages", default=",".join(PAGES), help="a comma-separated part of PAGES ('' is Heads)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="attnviz-pages-"))
    env = {"ATTNVIZ_DB": str(workdir / "classes.db"), "ATTNVIZ_CORPUS_DIR": str(workdir / "runs")}
    proc = start_server(port, workdir / "server.log", env)
    base = f"http://127.0.0.1:{port}"
    rows: dict[tuple[str, str], list[float]] = {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            for model in args.models.split(","):
                pg, _, cold = open_page(browser, base, "", MODELS[model])
                pg.close()
                print(f"{model}: the Heads page, the model's first use on this server: {cold:.2f} s", flush=True)
                for r in range(args.rounds):
                    text = TEXTS[(r + 1) % len(TEXTS)]  # not the app's default sentence, which a page may hold
                    query = f"{MODELS[model]}&text={quote(text)}"
                    for path in args.pages.split(","):
                        where = query + ("&size=50" if path == "corpora" else "")
                        pg, runs, drawn = open_page(browser, base, path, where)
                        said = pg.locator("[data-testid=stMain] [data-testid=stAlertContainer]").all_inner_texts()
                        if said:  # what the page said (a model's note, or why it drew less than it could)
                            print(f"  {path or 'heads'} says: {[t[:160] for t in said]}", flush=True)
                        rows.setdefault((model, f"{path or 'heads'}: first draw"), []).append(drawn)
                        for what, took in buttons(pg, runs, path, text, r == 0).items():
                            if took is not None:
                                rows.setdefault((model, f"{path or 'heads'}: {what}"), []).append(took)
                        pg.close()
                        line = {
                            k[1]: round(v[-1], 2)
                            for k, v in rows.items()
                            if k[0] == model and k[1].startswith(f"{path or 'heads'}:")
                        }
                        print(f"{model} round {r + 1}: {line}", flush=True)
            if args.screens:
                screens(browser, base, args.screens, args.pages.split(","))
            browser.close()
    finally:
        proc.terminate()
        proc.wait(30)
    print("\n| model | page: what | median s | max s | n |\n|---|---|---:|---:|---:|")
    for (model, what), times in rows.items():
        print(f"| {model} | {what} | {statistics.median(times):.2f} | {max(times):.2f} | {len(times)} |")
    print(f"(server log: {workdir / 'server.log'})")


if __name__ == "__main__":
    main()
