"""Benchmark: a class led live as the room sees it, in Chromium (issue 51): how long each follower's page shows a view
other than the teacher's.

One `python -m attnviz serve` (this machine, SQLite, the bundled BERT and SmolLM2), one Chromium: a teacher at
1280x800 starts a class; three laptop students (1280x800) and one phone student (390x844, a phone's User-Agent, touch)
open the student link and follow. The teacher then makes ten changes through the teacher link (each a new page load,
as bench/load.py --class does): one head, another, a layer, the Class page, back to one head (the first change after
the Class page took 7-10 s in the issue's run), the Model overview, SmolLM2 (a model switch), its layer grid, BERT
again, a layer. For each change:

- the teacher's moment: when the teacher's run made its view the class's (the class database's `changed`, written
  in the run's last lines, just before this server's followers are woken). Until 2026-11-28 it was the first moment
  the teacher's page showed its address with no run in progress, which a page just opened does before its run has
  begun: every lag also counted the teacher's page load and run (0.04 s to 0.7 s, the model switch the longest);
- each follower's moment: the first poll at which its page holds the change (its address names the view, no run in
  progress, no element left over from the view before, and a one-head or layer view's map titled with it);
- when its run was delivered: the moment the end of the last whole run before the follower's moment was handed to
  this process from the page's websocket (harness/wire.py): the server's part of the lag, at most (under load
  Playwright hands a message over up to a few tenths of a second late); the rest is the browser drawing;
- the lag: the follower's moment minus the teacher's. "On a wrong view for more than 2 s" is a lag over 2 s; a
  follower that never shows it within --wait seconds counts as never seen.

Then the phone student moves its layer slider while following: the page must say so in its main area ("Exploring on
your own") and keep the student's layer for 3 s while the teacher makes an eleventh change (no silent undo); Rejoin
brings the teacher's view back. The pages time themselves (WATCH_JS).

Usage: python bench/class_browser.py [--runs 3] [--wait 20] [--keep] [--trace DIR] [--drawn 4] [--timeline DIR]

--drawn N: Chromium draws only N of the four followers (laptops first); the others follow through Streamlit's
protocol (bench/load_class.py's Follower) and draw nothing, so the server still serves four while this machine's two
cores draw fewer pages, as a room's own devices would (the lag of five pages drawn on two cores is mostly drawing).
--trace writes each follower's websocket messages, decoded (harness/wire.py), with the changes marked, into DIR.
--timeline records Chromium's timeline (each page's renderer tasks; not a JavaScript profile, whose sampling would
slow the pages) into DIR/runN.json and says, for each change, how much CPU each drawn page's main thread used from
the teacher's moment until the last follower showed it: the CPU drawing the change cost each page, and all of
them together against the machine's cores (open the file in Chromium's Performance panel for the rest).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.server import ARGS, CHROMIUM, free_port, start_server  # noqa: E402
from harness.wire import Wire  # noqa: E402

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
WATCH_JS = """([needles, title]) => { window.__seen = window.__url = window.__step = null; window.__steps = [];
  clearInterval(window.__watch);
  const named = () => needles.every(n => location.href.includes(n));
  const look = () => [!!document.querySelector('[data-testid=stStatusWidget]'),
    document.querySelectorAll('[data-testid=stMain] [data-stale=true]').length,
    !title || [...document.querySelectorAll('[data-testid=stMain] .gtitle')].some(t => t.textContent.includes(title))];
  let href = null;
  const check = () => { const now = location.pathname + location.search.slice(0, 60);
    if (now !== href) { href = now; window.__steps.push([Date.now(), 'at ' + now]); }
    if (!named()) return;
    if (!window.__url) window.__url = Date.now();
    const [running, stale, titled] = look(), step = `${running ? 'running' : '-'} ${stale} stale ${titled}`;
    if (step !== window.__step) { window.__step = step; window.__steps.push([Date.now(), step]); }
    if (!running && !stale && titled) { window.__seen = Date.now(); clearInterval(window.__watch); } };
  window.__watch = setInterval(check, 25); check(); }"""
SLOW = 1.5  # seconds: a follower this late says what its page showed meanwhile
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
        next(iter(pages.values())).wait_for_timeout(25)  # Playwright hands over the pages' messages meanwhile


def _changed(db: Path, code: str) -> tuple[float, int]:
    """The class's view in the store: when it last changed (the server's clock, epoch seconds) and its version."""
    with sqlite3.connect(db, timeout=10) as con:
        changed, version = con.execute("SELECT changed, version FROM classes WHERE code = ?", (code,)).fetchone()
    return float(changed or 0.0), int(version)


def _published(page, db: Path, code: str, before: int, until: float) -> float:
    """The teacher's moment: when the teacher's run made its view the class's (the store's `changed`, written in the
    run's last lines, just before this server's followers are woken)."""
    while time.time() < until:
        changed, version = _changed(db, code)
        if version > before:
            return changed
        page.wait_for_timeout(25)
    raise AssertionError("the teacher's run never published its view")


def _delivered(wire: Wire, t0: float, seen: float) -> float | None:
    """When the whole run this follower's page drew had all reached it: the last run's end before the page showed
    the view, from the teacher's moment (the rest of the lag is the browser drawing)."""
    ends = [t for t in wire.ends if t <= seen + 0.05]
    return ends[-1] - t0 if ends else None


def _undrawn(base: str, code: str, n: int) -> None:
    """n more followers that draw nothing (bench/load_class.py's Follower: Streamlit's protocol, the heartbeat, each
    page the class shows), in a thread of their own until the server stops: the server serves four followers
    while Chromium draws fewer pages on this machine's two cores, as a room's own devices would."""
    if n <= 0:
        return
    import asyncio
    import secrets
    import threading

    sys.path.insert(0, str(ROOT / "bench"))
    from load_class import Follower

    url = base.replace("http://", "ws://") + "/_stcore/stream"
    flock = [Follower(url, code, secrets.token_hex(8), i) for i in range(n)]

    async def follow() -> None:
        deadline = time.monotonic() + 3600  # the server's end closes their sockets first
        await asyncio.gather(*(f.run(deadline) for f in flock))

    threading.Thread(target=asyncio.run, args=(follow(),), daemon=True).start()


TIMELINE = ["devtools.timeline", "toplevel", "blink.user_timing"]
SYNC = "attnviz-sync:"  # each traced page marks "SYNC<name>:<its Date.now()>": its renderer, and its clock to epoch


def _busy(trace: bytes, name: str | None, windows: list[tuple[float, float]]) -> list[float]:
    """Seconds of CPU the main thread of page `name` (the renderer that made its mark) used in each window (epoch
    seconds, from, to); with name None, every thread of every Chromium process (the browser's, the compositor's,
    each renderer's raster workers). A thread's outermost top-level tasks count their thread time (`tdur`; the wall
    time where a task has none), a task across a window's edge in proportion. Not the tasks' wall time: with five
    pages on two cores a task waits for a core in the middle of its run, and that wait is not drawing."""
    import json
    from collections import defaultdict

    events = json.loads(trace)
    events = events["traceEvents"] if isinstance(events, dict) else events
    mark = next(e for e in events if str(e.get("name", "")).startswith(f"{SYNC}{name or ''}"))
    shift = int(mark["name"].rsplit(":", 1)[1]) / 1000 - mark["ts"] / 1e6  # epoch seconds = ts / 1e6 + shift
    main = {
        (e["pid"], e["tid"])
        for e in events
        if e.get("ph") == "M" and e.get("pid") == mark["pid"] and e.get("args", {}).get("name") == "CrRendererMain"
    }
    threads: dict[tuple[int, int], list[tuple[float, float, float]]] = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and "toplevel" in e.get("cat", "") and (name is None or (e["pid"], e["tid"]) in main):
            threads[e["pid"], e["tid"]].append(
                (e["ts"] / 1e6 + shift, e.get("dur", 0) / 1e6, e.get("tdur", e.get("dur", 0)) / 1e6)
            )
    outer: list[tuple[float, float, float]] = []
    for tasks in threads.values():
        end = float("-inf")
        for start, wall, cpu in sorted(tasks):
            if start >= end:  # not inside the task before it (a top-level event nested in another)
                outer.append((start, wall, cpu))
                end = start + wall
    return [
        sum(cpu * (max(0.0, min(a + w, hi) - max(a, lo)) / w if w else float(lo <= a < hi)) for a, w, cpu in outer)
        for lo, hi in windows
    ]


def _timeline(data: bytes, pages: list[str], rows: list[dict], wait: float) -> None:
    """Each change's drawing cost from the trace, from the teacher's moment until the last follower showed the
    change (or `wait`): the CPU each drawn page's main thread used, and all of Chromium's (every process and
    thread); kept in each row as "busy" (the pages' and "chromium"), and said."""
    spans = [(r["t0"], r["t0"] + max((v for v in r["lags"].values() if v is not None), default=wait)) for r in rows]
    busy = {name: _busy(data, name, spans) for name in pages} | {"chromium": _busy(data, None, spans)}
    for i, r in enumerate(rows):
        r["busy"] = {name: b[i] for name, b in busy.items()}
        each = ", ".join(f"{name} {b:.2f}" for name, b in r["busy"].items() if name != "chromium")
        span = spans[i][1] - spans[i][0]
        r["cores"] = r["busy"]["chromium"] / span if span else 0.0
        print(f"  {r['what']}: Chromium used {r['busy']['chromium']:.2f} s of CPU in its {span:.2f} s "
              f"({r['cores']:.2f} cores); "
              f"the pages' main threads {each}", file=sys.stderr, flush=True)  # fmt: skip


def _run(
    base: str,
    browser,
    db: Path,
    wait: float,
    trace: Path | None = None,
    drawn: int = 4,
    timeline: Path | None = None,
) -> dict:
    teacher = browser.new_page(viewport={"width": 1280, "height": 800})
    teacher.goto(f"{base}/classroom?{BERT}")
    teacher.get_by_role("button", name="Start a class").click()
    teacher.wait_for_function("() => new URL(location.href).searchParams.get('teacher')", timeout=60_000)
    params = teacher.evaluate("() => Object.fromEntries(new URL(location.href).searchParams)")
    code, secret = params["class"], params["teacher"]
    laptops = [browser.new_page(viewport={"width": 1280, "height": 800}) for _ in range(min(drawn, 3))]
    phone_context = browser.new_context(
        viewport={"width": 390, "height": 844}, user_agent=PHONE_AGENT, is_mobile=True, has_touch=True
    )
    phone = phone_context.new_page() if drawn >= 4 else None
    followers = {f"laptop {i + 1}": pg for i, pg in enumerate(laptops)} | ({"phone": phone} if phone else {})
    _undrawn(base, code, 4 - len(followers))
    wires = {name: Wire(pg) for name, pg in followers.items()}
    for pg in followers.values():
        pg.goto(f"{base}/?class={code}")
        pg.get_by_text("Follow the teacher").first.wait_for(state="attached", timeout=60_000)
        pg.evaluate(WATCH_JS, [["/classroom"], None])
    joined = _seen(followers, time.time() + 120)  # every student on the join screen, as the teacher left it
    assert all(v is not None for v in joined.values()), joined
    time.sleep(2.0)  # the room reads the join screen
    drawn_pages = {"teacher": teacher, **followers}
    if timeline:
        browser.start_tracing(categories=TIMELINE)
        for name, pg in drawn_pages.items():
            pg.evaluate(f"() => performance.mark('{SYNC}{name}:' + Date.now())")
    rows = []
    for what, address, needles, title in CHANGES:
        sep = "&" if "?" in address else "?"
        for pg in followers.values():
            pg.evaluate(WATCH_JS, [list(needles), title])
        before = _changed(db, code)[1]
        start = time.time()
        teacher.goto(f"{base}/{address}{sep}class={code}&teacher={secret}")
        t0 = _published(teacher, db, code, before, start + 60)
        seen = _seen(followers, t0 + wait)
        lags = {name: v - t0 if v is not None else None for name, v in seen.items()}
        named = {name: pg.evaluate("() => window.__url") for name, pg in followers.items()}
        url = {name: v / 1000 - t0 for name, v in named.items() if v is not None}
        sent = {name: _delivered(wires[name], t0, v) for name, v in seen.items() if v is not None}
        rows.append({"what": what, "t0": t0, "teacher_s": t0 - start, "lags": lags, "url": url, "sent": sent})
        for name, w in wires.items():
            w.mark(f"{what}: the teacher's page holds it", t0)
            w.mark(f"{what}: this page {'never' if lags[name] is None else f'after {lags[name]:.2f} s'}")
        shown = ", ".join(f"{n} {v:.2f}" if v is not None else f"{n} never" for n, v in lags.items())
        for name in (n for n, v in lags.items() if v is None):  # what a follower left behind shows instead
            print(f"  {name} never showed it: {followers[name].evaluate(LEFT_JS)}", file=sys.stderr, flush=True)
        for name, v in lags.items():  # a slow one: what held it back (a run on, elements left over, no title yet)
            if v is None or v > SLOW:
                steps = followers[name].evaluate("() => window.__steps")
                said = "; ".join(f"{t / 1000 - t0:.2f} s {step}" for t, step in steps)
                print(f"  {name}, since its address took it: {said}", file=sys.stderr, flush=True)
        print(f"  {what}: teacher {t0 - start:.2f} s; {shown}", file=sys.stderr, flush=True)
        time.sleep(1.0)  # the room looks at it
    if timeline:
        data = browser.stop_tracing()
        timeline.write_bytes(data)
        _timeline(data, list(drawn_pages), rows, wait)
    undo = _exploring(base, teacher, phone, code, secret) if phone else None
    for name, w in wires.items() if trace else ():
        (trace / f"{name.replace(' ', '')}.log").write_text("\n".join(w.lines()) + "\n")
    for pg in [teacher, *followers.values()]:
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
    phone = [r["lags"]["phone"] for r in rows if r["lags"].get("phone") is not None]
    first = max((v for v in rows[0]["lags"].values() if v is not None), default=float("nan"))
    again = max((v for v in rows[4]["lags"].values() if v is not None), default=float("nan"))
    u = got["undo"] or {"rejoin_s": None, "banner": "-", "kept": "-"}
    rejoin = f"{u['rejoin_s']:.2f} s" if u["rejoin_s"] is not None else "never" if got["undo"] else "–"
    phone_spread = " / ".join(_spread(phone).split(" / ")[1:]) if phone else "–"
    undo = ("yes" if u["banner"] and u["kept"] else "NO") if got["undo"] else "–"
    sent = [v for r in rows for v in r["sent"].values() if v is not None]
    return (
        f"| {run} | {_spread(lags)} | {_spread(sent)} | {_spread([v for r in rows for v in r['url'].values()])} | "
        f"{sum(v > 2 for v in lags)} of {len(lags) + never} | {never} | {first:.2f} s | {again:.2f} s | "
        f"{phone_spread} | {undo} ({u['banner']}, {u['kept']}) | {rejoin} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the servers' logs (their folder is printed)")
    parser.add_argument("--trace", type=Path, help="write each follower's websocket messages into this folder")
    parser.add_argument(
        "--drawn",
        type=int,
        default=4,
        choices=range(1, 5),
        help="how many of the four followers Chromium draws (laptops first, then the phone); the others follow "
        "through Streamlit's protocol and draw nothing (a room's devices each draw their own page)",
    )
    parser.add_argument("--timeline", type=Path, help="record Chromium's timeline of every drawn page into this folder")
    parser.add_argument("--wait", type=float, default=20.0, help="seconds after the teacher before 'never seen'")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    drawn = (
        "three laptop followers and a phone follower"
        if args.drawn == 4
        else (f"four followers, {args.drawn} drawn by Chromium (laptops), {4 - args.drawn} through the protocol alone")
    )
    print(f"# a class in Chromium: a teacher, {drawn}, {len(CHANGES)} changes\n")
    print("| run | drawn: p50 / p95 / max | its run delivered: p50 / p95 / max | address taken: p50 / p95 / max | "
          "drawn over 2 s | never | first change (from the join screen), max | after the Class page again, max | "
          "the phone: p95 / max | no silent undo (banner, kept 3 s) | Rejoin |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with sync_playwright() as p, tempfile.TemporaryDirectory(prefix="class-browser-") as scratch:
        tmp = tempfile.mkdtemp(prefix="class-browser-logs-") if args.keep else scratch
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        if args.keep:
            print(f"servers' logs: {tmp}", file=sys.stderr)
        for run in range(1, args.runs + 1):
            port = free_port()
            db = Path(tmp) / f"c{run}.db"
            proc = start_server(port, Path(tmp) / f"server{run}.log", {"ATTNVIZ_DB": str(db)})
            try:
                trace = args.trace / f"run{run}" if args.trace else None
                if trace:
                    trace.mkdir(parents=True, exist_ok=True)
                if args.timeline:
                    args.timeline.mkdir(parents=True, exist_ok=True)
                timeline = args.timeline / f"run{run}.json" if args.timeline else None
                got = _run(f"http://127.0.0.1:{port}", browser, db, args.wait, trace, args.drawn, timeline)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
            print(_summary(run, got), flush=True)
            busy = [r["busy"] for r in got["rows"] if "busy" in r]
            for name in busy[0] if busy else ():
                print(f"  run {run}: {name}: {_spread([b[name] for b in busy])} of CPU a change",
                      file=sys.stderr, flush=True)  # fmt: skip
            if busy:
                cores = " / ".join(_spread([r["cores"] for r in got["rows"]]).removesuffix(" s").split(" / "))
                print(f"  run {run}: Chromium kept {cores} cores busy through a change (p50 / p95 / max)",
                      file=sys.stderr, flush=True)  # fmt: skip
        browser.close()


if __name__ == "__main__":
    main()
