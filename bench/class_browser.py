"""Benchmark: a class led live as the room sees it, in Chromium (issue 51): how long each follower's page shows a view
other than the teacher's.

One `python -m attnviz serve` (this machine, SQLite, the bundled BERT and SmolLM2), one Chromium: a teacher at
1280x800 starts a class; three laptop students (1280x800) and one phone student (390x844, a phone's User-Agent, touch)
open the student link and follow. The teacher then makes ten changes through the teacher link (each a new page load,
as bench/load.py --class does): one head, another, a layer, the Class page, back to one head (the first change after
the Class page took 7-10 s in the issue's run), the Model overview, SmolLM2 (a model switch), its layer grid, BERT
again, a layer. For each change:

- the teacher's moment: the first poll at which the teacher's own page holds the change (its address, no run in
  progress): the class's view is written at the end of that run;
- each follower's moment: the first poll at which its page holds the change (its address names the view, no run in
  progress, no element left over from the view before, and a one-head or layer view's map titled with it);
- the lag: the follower's moment minus the teacher's. "On a wrong view for more than 2 s" is a lag over 2 s; a
  follower that never shows it within --wait seconds counts as never seen.

Then the phone student moves its layer slider while following: the page must say so in its main area ("Exploring on
your own") and keep the student's layer for 3 s while the teacher makes an eleventh change (no silent undo); Rejoin
brings the teacher's view back. The pages time themselves (WATCH_JS).

Usage: python bench/class_browser.py [--runs 3] [--wait 20]
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

PHONE_AGENT = (
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Mobile Safari/537.36"
)
BERT, SMOL = "model=default&backend=hf", "model=smollm2&backend=hf"
# (what the change is, its page and parameters, what a follower's address must hold, a map title it must draw)
CHANGES = (
    ("one head", f"?{BERT}&view=Head&layer=2&head=4", ("view=Head", "layer=2", "head=4"), "Layer 2, head 4"),
    ("another head", f"?{BERT}&view=Head&layer=5&head=5", ("view=Head", "layer=5", "head=5"), "Layer 5, head 5"),
    ("a layer", f"?{BERT}&view=Layer&layer=3", ("view=Layer", "layer=3"), "Layer 3: every head"),
    ("the Class page", f"classroom?{BERT}", ("/classroom",), None),
    (
        "one head after the Class page",
        f"?{BERT}&view=Head&layer=4&head=2",
        ("view=Head", "layer=4", "head=2"),
        "Layer 4, head 2",
    ),
    ("the Model overview", f"overview?{BERT}", ("/overview",), None),
    (
        "SmolLM2: one head",
        f"?{SMOL}&view=Head&layer=3&head=1",
        ("model=smollm2", "view=Head", "layer=3", "head=1"),
        "Layer 3, head 1",
    ),
    (
        "SmolLM2: a layer",
        f"?{SMOL}&view=Layer&layer=6",
        ("model=smollm2", "view=Layer", "layer=6"),
        "Layer 6: every head",
    ),
    (
        "BERT again: one head",
        f"?{BERT}&view=Head&layer=1&head=1",
        ("model=default", "view=Head", "layer=1", "head=1"),
        "Layer 1, head 1",
    ),
    ("a layer", f"?{BERT}&view=Layer&layer=6", ("model=default", "view=Layer", "layer=6"), "Layer 6: every head"),
)
# Each page watches for itself (every 25 ms, in the page): the moment (Date.now(), the machine's clock) it first holds
# the change: its address names the view, no run in progress, no element left over, the map titled with it. Polling
# five pages from here measured Chromium's busy main threads instead (one round took up to a second).
WATCH_JS = """([needles, title]) => { window.__seen = window.__url = null; clearInterval(window.__watch);
  const named = () => needles.every(n => location.href.includes(n));
  const holds = () => !document.querySelector('[data-testid=stStatusWidget], [data-testid=stMain] [data-stale=true]')
    && named() && (!title || [...document.querySelectorAll('[data-testid=stMain] .gtitle')]
      .some(t => t.textContent.includes(title)));
  const check = () => { if (!window.__url && named()) window.__url = Date.now();
    if (holds()) { window.__seen = Date.now(); clearInterval(window.__watch); } };
  window.__watch = setInterval(check, 25); check(); }"""
LEFT_JS = """() => ({href: location.href, running: !!document.querySelector('[data-testid=stStatusWidget]'),
  stale: document.querySelectorAll('[data-testid=stMain] [data-stale=true]').length,
  titles: [...document.querySelectorAll('[data-testid=stMain] .gtitle')].map(t => t.textContent).join(' | ')
    .slice(0, 120),
  main: (document.querySelector('[data-testid=stMain]') || {innerText: 'no main area'}).innerText.slice(0, 300)})"""
EXPLORING_JS = """() => (document.querySelector('[data-testid=stMain]') || {innerText: ''}).innerText
  .includes('Exploring on your own')"""


def _seen(pages: dict, until: float) -> dict[str, float | None]:
    """Each page's moment (epoch seconds) once every page has one or `until` (epoch) passed; None: never."""
    while True:
        got = {name: pg.evaluate("() => window.__seen") for name, pg in pages.items()}
        if all(v is not None for v in got.values()) or time.time() > until:
            return {name: v / 1000 if v is not None else None for name, v in got.items()}
        time.sleep(0.1)


def _run(base: str, browser, wait: float) -> dict:
    teacher = browser.new_page(viewport={"width": 1280, "height": 800})
    teacher.goto(f"{base}/classroom?{BERT}")
    teacher.get_by_role("button", name="Start a class").click()
    teacher.wait_for_function("() => new URL(location.href).searchParams.get('teacher')", timeout=60_000)
    params = teacher.evaluate("() => Object.fromEntries(new URL(location.href).searchParams)")
    code, secret = params["class"], params["teacher"]
    laptops = [browser.new_page(viewport={"width": 1280, "height": 800}) for _ in range(3)]
    phone_context = browser.new_context(
        viewport={"width": 390, "height": 844}, user_agent=PHONE_AGENT, is_mobile=True, has_touch=True
    )
    phone = phone_context.new_page()
    followers = {**{f"laptop {i + 1}": pg for i, pg in enumerate(laptops)}, "phone": phone}
    for pg in followers.values():
        pg.goto(f"{base}/?class={code}")
        pg.get_by_text("Follow the teacher").first.wait_for(state="attached", timeout=60_000)
        pg.evaluate(WATCH_JS, [["/classroom"], None])
    joined = _seen(followers, time.time() + 120)  # every student on the join screen, as the teacher left it
    assert all(v is not None for v in joined.values()), joined
    time.sleep(2.0)  # the room reads the join screen
    rows = []
    for what, address, needles, title in CHANGES:
        sep = "&" if "?" in address else "?"
        for pg in followers.values():
            pg.evaluate(WATCH_JS, [list(needles), title])
        start = time.time()
        teacher.goto(f"{base}/{address}{sep}class={code}&teacher={secret}")
        teacher.evaluate(WATCH_JS, [list(needles), None])
        t0 = _seen({"teacher": teacher}, start + 60)["teacher"] or start
        seen = _seen(followers, t0 + wait)
        lags = {name: v - t0 if v is not None else None for name, v in seen.items()}
        named = {name: pg.evaluate("() => window.__url") for name, pg in followers.items()}
        url = {name: v / 1000 - t0 for name, v in named.items() if v is not None}
        rows.append({"what": what, "teacher_s": t0 - start, "lags": lags, "url": url})
        shown = ", ".join(f"{n} {v:.2f}" if v is not None else f"{n} never" for n, v in lags.items())
        for name in (n for n, v in lags.items() if v is None):  # what a follower left behind shows instead
            print(f"  {name} never showed it: {followers[name].evaluate(LEFT_JS)}", file=sys.stderr, flush=True)
        print(f"  {what}: teacher {t0 - start:.2f} s; {shown}", file=sys.stderr, flush=True)
        time.sleep(1.0)  # the room looks at it
    undo = _exploring(base, teacher, phone, code, secret)
    for pg in [teacher, *laptops, phone]:
        pg.close()
    phone_context.close()
    return {"rows": rows, "undo": undo}


def _exploring(base: str, teacher, phone, code: str, secret: str) -> dict:
    """The phone student moves its layer slider while following (the last view: BERT's layer 6, of 6); the teacher
    moves on; the student's page must say it is exploring and keep layer 5 for 3 s; Rejoin takes the teacher's
    view."""
    phone.locator("[data-testid=stMain] [data-testid=stSlider] input[type=range]").first.press("ArrowLeft")
    moved = time.time()
    phone.wait_for_function("() => new URL(location.href).searchParams.get('layer') === '5'", timeout=30_000)
    teacher.goto(f"{base}/?{BERT}&view=Head&layer=2&head=3&class={code}&teacher={secret}")
    kept, banner = True, False
    while time.time() - moved < 3.0:
        kept &= "layer=5" in phone.evaluate("() => location.href")
        banner |= phone.evaluate(EXPLORING_JS)
        time.sleep(0.05)
    phone.evaluate(WATCH_JS, [["view=Head", "layer=2", "head=3"], "Layer 2, head 3"])
    start = time.time()
    phone.locator("[data-testid=stMain]").get_by_role("button", name="Rejoin").first.click()
    back = _seen({"phone": phone}, start + 20)["phone"]
    return {"kept": kept, "banner": banner, "rejoin_s": back - start if back is not None else None}


def _spread(values: list[float]) -> str:
    """p50 / p95 / max of some seconds (p95 by the inclusive method: within what was measured)."""
    if not values:
        return "–"
    q = statistics.quantiles(values, n=20, method="inclusive")[18] if len(values) > 1 else values[0]
    return f"{statistics.median(values):.2f} / {q:.2f} / {max(values):.2f} s"


def _summary(run: int, got: dict) -> str:
    """One run's row of the table."""
    rows = got["rows"]
    lags = [v for r in rows for v in r["lags"].values() if v is not None]
    never = sum(v is None for r in rows for v in r["lags"].values())
    phone = [r["lags"]["phone"] for r in rows if r["lags"]["phone"] is not None]
    first = max((v for v in rows[0]["lags"].values() if v is not None), default=float("nan"))
    again = max((v for v in rows[4]["lags"].values() if v is not None), default=float("nan"))
    u = got["undo"]
    rejoin = f"{u['rejoin_s']:.2f} s" if u["rejoin_s"] is not None else "never"
    phone_spread = " / ".join(_spread(phone).split(" / ")[1:])
    return (
        f"| {run} | {_spread(lags)} | {_spread([v for r in rows for v in r['url'].values()])} | "
        f"{sum(v > 2 for v in lags)} of {len(lags) + never} | {never} | {first:.2f} s | {again:.2f} s | "
        f"{phone_spread} | {'yes' if u['banner'] and u['kept'] else 'NO'} ({u['banner']}, {u['kept']}) | {rejoin} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the servers' logs (their folder is printed)")
    parser.add_argument("--wait", type=float, default=20.0, help="seconds after the teacher before 'never seen'")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    print(f"# a class in Chromium: a teacher, three laptop followers and a phone follower, {len(CHANGES)} changes\n")
    print("| run | drawn: p50 / p95 / max | address taken: p50 / p95 / max | drawn over 2 s | never | first change "
          "(from the join screen), max | after the Class page again, max | the phone: p95 / max | no silent undo "
          "(banner, kept 3 s) | Rejoin |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    with sync_playwright() as p, tempfile.TemporaryDirectory(prefix="class-browser-") as scratch:
        tmp = tempfile.mkdtemp(prefix="class-browser-logs-") if args.keep else scratch
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        if args.keep:
            print(f"servers' logs: {tmp}", file=sys.stderr)
        for run in range(1, args.runs + 1):
            port = free_port()
            proc = start_server(port, Path(tmp) / f"server{run}.log", {"ATTNVIZ_DB": str(Path(tmp) / f"c{run}.db")})
            try:
                got = _run(f"http://127.0.0.1:{port}", browser, args.wait)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
            print(_summary(run, got), flush=True)
        browser.close()


if __name__ == "__main__":
    main()
