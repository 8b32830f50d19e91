"""Benchmark: a classroom at once. N users on one `python -m attnviz serve` server, typing and moving between pages.

- N protocol users (default 30) speak Streamlit's own websocket protocol: each sends a rerun
  message (a BackMsg built with streamlit's protobuf classes) carrying its widget values: a new
  sentence in the "Text" box and a page to show, every few seconds, for the whole duration.
  On 2 cores, 30 Chromium pages would measure the browser rather than the server.
- A handful of real browser contexts (Playwright + Chromium) type beside them.

Reported: p50 and p95 of the time from sending a rerun to the run's end (script_finished), the
errors (exceptions or error messages the app drew, failed runs, dropped connections), and the
server's resident memory over time. Targets on a 2-core machine: 0 errors, p95 <= 5 s, memory growth
after warm-up <= 10%. Usage: python bench/load.py [--users 30] [--browsers 3] [--seconds 120]

`--profile`: py-spy (requirements-dev.txt) samples the server during the load, every thread that is not idle, 50
times a second; each sample is put in the first of these its stack reaches, from the innermost frame out: the
serialisation (JSON, protobuf, plotly's to_json, Arrow for tables), the forward pass and tokenising (torch,
transformers, attnviz.engines), figure building (attnviz.figures, plotly, numpy), Streamlit's own work (the rest of
streamlit, tornado, asyncio), attnviz's pages and analysis; threads blocked in a wait are counted apart.

`--class`: a class led live instead: 30 followers (protocol users that also run the page's heartbeat as Streamlit's
frontend does: every whole-page run clears its interval and the run's auto_rerun starts it again) and a teacher,
whose page is open before they join, who opens a new view (the teacher link with ?view=Head&layer=..&head=..) every
10 s, plus up to one heartbeat at random, for 2 minutes, then the Class page and a poll that every follower answers
through the page's own widgets.
Reported: the time from the teacher's view reaching the store to each follower's page showing it (p50, p95, and each
change's p95; target p95 <= 1 s for 30 followers, 3 s for more), and answers sent, confirmed and stored (0 lost).

`--admission`: 30 protocol users type short sentences on the default model while 3 others each paste a different
4,000-token text into SmolLM2 (the Heads page) and one Chromium page uploads a 2,000-case benchmark, all at once, on
a server with the default settings. Reported: the short requests' p50/p95 (target p95 <= 2 s), errors (target 0),
the server's peak resident memory (target <= 4 GB), and when each heavy request finished (heavy work waits its turn).

`--memory`: instead, 30 protocol users each send a different 512-token text (then move its layer
slider twice), all at once, for several rounds; the server's resident memory is sampled every
second and must stay under MEMORY_BOUND_MB (the result memo's budget, ATTNVIZ_CACHE_MB, bounds it).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import websockets  # noqa: E402
from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: E402

from attnviz.analysis.head_stats import LABELS as HEAD_TYPES  # noqa: E402
from attnviz.ui.seat import TICK_SECONDS as TICK  # noqa: E402
from harness.server import ARGS, CHROMIUM, free_port, start_server  # noqa: E402

SUBJECTS = ["The teacher", "A student", "The robot", "My neighbour", "The old dog", "A tired pilot", "The river"]
VERBS = ["noticed", "followed", "ignored", "painted", "answered", "carried", "described"]
OBJECTS = ["the bright map", "a quiet song", "the broken clock", "every question", "the small boat"]
PAGES = ("heads", "inside", "compare", "overview")  # the pronoun page's lesson is one cached case


def sentence(rng: random.Random, user: int, n: int) -> str:
    return f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} ({user}.{n})."


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def sample_memory(pid: int, start: float, memory: list, every: float) -> threading.Event:
    """Append (seconds since `start`, the server's RSS in MB) to `memory` every `every` seconds, in a thread,
    until the returned event is set."""
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            memory.append((time.monotonic() - start, rss_mb(pid)))
            stop.wait(every)

    threading.Thread(target=sample, daemon=True).start()
    return stop


class Stats:
    def __init__(self) -> None:
        self.times: list[float] = []
        self.browser_times: list[float] = []
        self.errors: list[str] = []


async def protocol_user(url: str, user: int, deadline: float, stats: Stats, seed: int) -> None:
    rng = random.Random(seed + user)
    try:
        async with websockets.connect(url, subprotocols=["streamlit"], max_size=64 * 2**20) as ws:
            pages, text_id = await _run(ws, None, None, None, stats, record=False)
            n = 0
            while time.monotonic() < deadline:
                await asyncio.sleep(rng.uniform(2.0, 5.0))
                n += 1
                page = rng.choice(PAGES)
                _, _ = await _run(ws, text_id, sentence(rng, user, n), pages.get(page), stats, record=True)
    except (OSError, websockets.ConnectionClosed) as err:
        stats.errors.append(f"user {user}: connection: {err}")


async def _run(ws, text_id, text, page_hash, stats: Stats, record: bool):
    """Send one rerun and read until the run finishes; return (pages by url path, the Text widget's id)."""
    msg = BackMsg()
    msg.rerun_script.query_string = ""
    if page_hash:
        msg.rerun_script.page_script_hash = page_hash
    if text_id is not None:
        w = msg.rerun_script.widget_states.widgets.add()
        w.id, w.string_value = text_id, text
    start = time.perf_counter()
    await ws.send(msg.SerializeToString())
    pages, found_id = {}, text_id
    while True:
        fwd = ForwardMsg()
        fwd.ParseFromString(await asyncio.wait_for(ws.recv(), timeout=120))
        kind = fwd.WhichOneof("type")
        if kind == "navigation":
            pages = {p.url_pathname or "heads": p.page_script_hash for p in fwd.navigation.app_pages}
        elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
            el = fwd.delta.new_element
            which = el.WhichOneof("type")
            if which == "text_input" and el.text_input.label == "Text":
                found_id = el.text_input.id
            elif which == "exception":
                stats.errors.append(f"exception: {el.exception.message[:200]}")
            elif which == "alert" and el.alert.format == el.alert.ERROR:
                stats.errors.append(f"error message: {el.alert.body[:200]}")
        elif kind == "script_finished":
            if fwd.script_finished == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                stats.errors.append("compile error")
            if fwd.script_finished in (ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_WITH_COMPILE_ERROR):
                break
    if record:
        stats.times.append(time.perf_counter() - start)
    return pages, found_id


async def warm_up(url: str) -> None:
    stats = Stats()
    async with websockets.connect(url, subprotocols=["streamlit"], max_size=64 * 2**20) as ws:
        pages, text_id = await _run(ws, None, None, None, stats, record=False)
        for page in PAGES:
            await _run(ws, text_id, f"Warming up the {page} page.", pages.get(page), stats, record=False)
    if stats.errors:
        raise RuntimeError(f"the warm-up failed: {stats.errors}")


def browser_users(base: str, count: int, deadline: float, stats: Stats) -> None:
    """A few real Chromium contexts typing beside the protocol users (one thread, one browser)."""
    from playwright.sync_api import sync_playwright

    drawn = (
        "(old) => { const el = document.querySelector('.js-plotly-plot'); return el && el.data && "
        "el.data[0].x.join('|') !== old; }"
    )
    labels = "() => document.querySelector('.js-plotly-plot').data[0].x.join('|')"
    rng = random.Random(7)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pages = []
        for _ in range(count):
            page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
            page.goto(base)
            page.wait_for_function(drawn, arg="", timeout=120_000)
            pages.append(page)
        n = 0
        while time.monotonic() < deadline:
            for i, page in enumerate(pages):
                n += 1
                try:
                    old = page.evaluate(labels)
                    box = page.get_by_label("Text", exact=True)
                    box.fill(sentence(rng, 1000 + i, n))
                    start = time.perf_counter()
                    box.press("Enter")
                    page.wait_for_function(drawn, arg=old, timeout=60_000, polling=20)
                    stats.browser_times.append(time.perf_counter() - start)
                except Exception as err:  # a timeout or a crashed page is an error of the run, not of the bench
                    stats.errors.append(f"browser {i}: {type(err).__name__}: {str(err)[:120]}")
            time.sleep(rng.uniform(1.0, 3.0))
        browser.close()


def stall_check(repeats: int = 5) -> tuple[float, float, float]:
    """Medians: a 512-token request alone, a short one alone, and the short one sent while the long one runs.

    One shared engine and its lock: the short request should wait at most the long one's compute.
    """
    from attnviz.engines import registry

    engine = registry.load("default", "hf", "cpu")
    long_text, short_text = " ".join(["word"] * 600), "A short sentence typed meanwhile."
    engine.run(long_text), engine.run(short_text)  # warm

    def timed(text: str) -> float:
        start = time.perf_counter()
        engine.run(text)
        return time.perf_counter() - start

    alone_long = statistics.median(timed(long_text) for _ in range(repeats))
    alone_short = statistics.median(timed(short_text) for _ in range(repeats))
    during = []
    for _ in range(repeats):
        worker = threading.Thread(target=engine.run, args=(long_text,))
        worker.start()
        time.sleep(0.005)  # the long request has the engine
        during.append(timed(short_text))
        worker.join()
    return alone_long, alone_short, statistics.median(during)


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) >= 2 else float("nan")


MEMORY_BOUND_MB = 2048  # 30 students with different 512-token texts must fit in this (issue: 2 GB)


def long_text(user: int, n: int) -> str:
    """A text of well over 512 tokens, different for every (user, n)."""
    return " ".join(f"{random.Random(user * 1000 + n).choice(SUBJECTS)} wrote note {user}.{n}.{i}" for i in range(120))


async def memory_user(url: str, user: int, rounds: int, stats: Stats) -> None:
    """Send a new 512-token text, then twice more with a layer moved (the result must stay or be recomputed)."""
    try:
        async with websockets.connect(url, subprotocols=["streamlit"], max_size=64 * 2**20) as ws:
            pages, text_id = await _run(ws, None, None, None, stats, record=False)
            for n in range(rounds):
                await _run(ws, text_id, long_text(user, n), pages.get("heads"), stats, record=True)
                for _ in range(2):
                    await _run(ws, text_id, long_text(user, n), pages.get("heads"), stats, record=True)
    except (OSError, websockets.ConnectionClosed) as err:
        stats.errors.append(f"user {user}: connection: {err}")


def memory_run(users: int, rounds: int) -> None:
    """30 users, each a different 512-token text at the same time; the server's memory sampled every second."""
    port = free_port()
    server = start_server(port, Path(tempfile.mkdtemp()) / "streamlit.log")
    stats, memory = Stats(), []
    try:
        asyncio.run(warm_up(f"ws://127.0.0.1:{port}/_stcore/stream"))
        baseline = rss_mb(server.pid)
        stop = sample_memory(server.pid, time.monotonic(), memory, 1)

        async def everyone() -> None:
            url = f"ws://127.0.0.1:{port}/_stcore/stream"
            await asyncio.gather(*(memory_user(url, u, rounds, stats) for u in range(users)))

        asyncio.run(everyone())
        time.sleep(2)
        stop.set()
    finally:
        server.terminate()
        server.wait(10)
    peak = max(m for _, m in memory)
    print("| measure | value | target |\n|---|---:|---|")
    print(f"| users / rounds (each a different 512-token text per round) | {users} / {rounds} | - |")
    print(f"| runs completed | {len(stats.times)} | {users * rounds * 3} |")
    print(f"| time to finished run, p50 / p95 | {pct(stats.times, 50):.2f} / {pct(stats.times, 95):.2f} s | - |")
    print(f"| errors | {len(stats.errors)} | 0 |")
    end, bound = memory[-1][1], MEMORY_BOUND_MB
    print(f"| server memory: warm / peak / end | {baseline:.0f} / {peak:.0f} / {end:.0f} MB | peak <= {bound} MB |")
    print(
        "\nmemory over time (s, MB): " + ", ".join(f"{t:.0f}:{m:.0f}" for t, m in memory[:: max(1, len(memory) // 30)])
    )
    for e in stats.errors[:20]:
        print("error:", e)


ADMISSION_RSS_MB = 4096  # the bound on the server's peak with the default settings


def heavy_text(user: int, tokens: int = 4000) -> str:
    """A different text of about `tokens` SmolLM2 tokens for each user (about 14 tokens a sentence)."""
    rng = random.Random(9000 + user)
    words = ["river", "lamp", "garden", "window", "letter", "road", "winter", "station", "market", "song"]
    said = (f"{rng.choice(SUBJECTS)} saw the {rng.choice(words)} on day {user}.{i}." for i in range(tokens // 14))
    return " ".join(said)


async def heavy_user(url: str, user: int, stats: Stats, done: dict) -> None:
    """Paste a 4,000-token text into SmolLM2 on the Heads page (through the URL's own state) and wait for the maps."""
    import urllib.parse

    query = urllib.parse.urlencode({"model": "smollm2", "backend": "hf", "text": heavy_text(user)})
    start = time.perf_counter()
    try:
        async with websockets.connect(url, subprotocols=["streamlit"], max_size=64 * 2**20) as ws:
            msg = BackMsg()
            msg.rerun_script.query_string = query
            await ws.send(msg.SerializeToString())
            said = []
            while True:
                fwd = ForwardMsg()
                fwd.ParseFromString(await asyncio.wait_for(ws.recv(), timeout=900))
                kind = fwd.WhichOneof("type")
                if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                    el = fwd.delta.new_element
                    which = el.WhichOneof("type")
                    if which == "exception":
                        stats.errors.append(f"heavy {user}: exception: {el.exception.message[:200]}")
                    elif which == "alert":
                        said.append(el.alert.body[:120])
                elif kind == "script_finished" and fwd.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY:
                    break
        done[f"long text {user}"] = (time.perf_counter() - start, [m for m in said if "turn" in m or "busy" in m][:2])
    except (OSError, websockets.ConnectionClosed, TimeoutError) as err:
        stats.errors.append(f"heavy {user}: {type(err).__name__}: {err}")


def benchmark_user(base: str, cases: int, stats: Stats, done: dict) -> None:
    """A Chromium page uploads a benchmark of `cases` cases on the Pronoun page and waits for its scores."""
    import json as json_module

    from playwright.sync_api import sync_playwright

    from attnviz.analysis.pronoun_cases import LESSON

    path = Path(tempfile.mkdtemp()) / "cases.jsonl"
    rows = [LESSON[i % len(LESSON)] for i in range(cases)]
    path.write_text(
        "\n".join(
            json_module.dumps(
                {"text": c.text, "pronoun": c.pronoun, "candidates": list(c.candidates), "answer": c.answer}
            )
            for c in rows
        )
    )
    start = time.perf_counter()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            page.goto(f"{base}pronouns")
            page.get_by_role("tab", name="Benchmark").click()
            page.locator("[data-testid=stMain] [data-testid=stFileUploaderDropzoneInput]").set_input_files(str(path))
            limit = page.get_by_label("Cases to score", exact=False)  # "(at most 2,000 a run)" follows
            limit.fill(str(cases))
            limit.press("Enter")
            page.wait_for_timeout(1500)
            start = time.perf_counter()
            page.get_by_role("button", name="Run the benchmark").click()
            page.get_by_text(f"{cases} cases scored").wait_for(timeout=900_000)
            done["benchmark"] = (time.perf_counter() - start, [])
            browser.close()
    except Exception as err:  # a timeout or a crashed page is an error of the run
        stats.errors.append(f"benchmark: {type(err).__name__}: {str(err)[:200]}")


def admission_run(users: int, heavy: int, cases: int, seconds: float) -> None:
    """Short sentences from `users` protocol users while `heavy` users paste different 4,000-token texts into
    SmolLM2 and one Chromium page runs a `cases`-case benchmark, all at once, on a server with the defaults."""
    port = free_port()
    server = start_server(port, Path(tempfile.mkdtemp()) / "streamlit.log")
    url, base = f"ws://127.0.0.1:{port}/_stcore/stream", f"http://127.0.0.1:{port}/"
    stats, memory, done = Stats(), [], {}
    try:
        asyncio.run(warm_up(url))

        asyncio.run(teacher_opens(url, "model=smollm2&backend=hf&text=Warm+up."))  # SmolLM2 loaded, as in class
        baseline = rss_mb(server.pid)
        start = time.monotonic()
        deadline = start + seconds
        stop = sample_memory(server.pid, start, memory, 1)
        bench = threading.Thread(target=benchmark_user, args=(base, cases, stats, done))
        bench.start()

        async def everyone() -> None:
            await asyncio.gather(
                *(protocol_user(url, u, deadline, stats, 0) for u in range(users)),
                *(heavy_user(url, u, stats, done) for u in range(heavy)),
            )

        asyncio.run(everyone())
        bench.join()
        time.sleep(2)
        stop.set()
    finally:
        server.terminate()
        server.wait(10)
    peak = max(m for _, m in memory)
    print("| measure | value | target |\n|---|---:|---|")
    print(
        f"| short users / long texts (4,000 tokens, SmolLM2) / benchmark cases / seconds | {users} / {heavy} / "
        f"{cases:,} / {seconds:.0f} | - |"
    )
    print(f"| short requests completed | {len(stats.times)} | - |")
    print(
        f"| short requests: time to finished run, p50 / p95 | {pct(stats.times, 50):.2f} / "
        f"{pct(stats.times, 95):.2f} s | p95 <= 2 s |"
    )
    print(f"| errors | {len(stats.errors)} | 0 |")
    print(f"| server memory: warm / peak | {baseline:.0f} / {peak:.0f} MB | peak <= {ADMISSION_RSS_MB} MB |")
    for what, (secs, said) in sorted(done.items()):
        print(f"| {what}: finished after | {secs:.1f} s{' (told: ' + '; '.join(said) + ')' if said else ''} | - |")
    print(
        "\nmemory over time (s, MB): " + ", ".join(f"{t:.0f}:{m:.0f}" for t, m in memory[:: max(1, len(memory) // 30)])
    )
    for e in stats.errors[:20]:
        print("error:", e)


WAITING = ("Condition.wait", "select (", "Event.wait", "Queue.get", "_worker (", "sleep (", "acquire (", ".poll (")
PROFILE_PARTS = (  # (part, how the file of a frame "function (file:line)" starts), tried on the innermost frame first
    ("serialisation", ("json/", "plotly/io/_json", "google/protobuf", "pyarrow/", "pandas/", "streamlit/proto")),
    ("forward pass and tokenising", ("torch/", "attnviz/engines/", "transformers/", "tokenizers/", "attnviz/lazy")),
    ("figure building", ("attnviz/figures/", "plotly/", "_plotly_utils/", "numpy/")),
    ("Streamlit's own work", ("streamlit/", "tornado/", "asyncio/", "websockets/")),
    ("attnviz pages and analysis", ("attnviz/",)),
)


def start_profile(pid: int, seconds: float, out: Path) -> subprocess.Popen | None:
    """py-spy recording the server for `seconds` (raw collapsed stacks), or None where py-spy is missing."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        print("--profile: py-spy is not installed (pip install -r requirements-dev.txt)", file=sys.stderr)
        return None
    cmd = [
        spy,
        "record",
        "--pid",
        str(pid),
        "--duration",
        str(int(seconds)),
        "--rate",
        "50",
        "--format",
        "raw",
        "--output",
        str(out),
        "--nonblocking",
    ]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def profile_shares(raw: Path) -> tuple[int, dict[str, float]]:
    """Samples in a py-spy raw file, and each part's share of them (see PROFILE_PARTS)."""
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = stack.split(";")[1:]  # the first is the thread
        if frames and any(w in frames[-1] for w in WAITING):  # a thread blocked in Python that py-spy counted busy
            counts["waiting (blocked threads py-spy did not call idle)"] += int(n)
            continue
        part = "other"
        for frame in reversed(frames):  # innermost first
            path = frame[frame.rfind("(") + 1 :]
            part = next((name for name, keys in PROFILE_PARTS if path.startswith(keys)), "")
            if part:
                break
        counts[part or "other"] += int(n)
    total = sum(counts.values())
    return total, {k: v / total for k, v in counts.most_common()} if total else {}


class Follower:
    """A student's browser, as the Streamlit protocol sees it: reruns, the heartbeat fragment, a poll answer."""

    def __init__(self, url: str, code: str, sid: str, index: int) -> None:
        self.url, self.index = url, index
        self.query = f"class={code}&sid={sid}"
        self.seen: dict[int, float] = {}  # view version -> when this page had drawn it whole (time.time())
        self.drawing: int | None = None  # a version whose whole run has begun drawing
        self.whole = False  # whether the run being received is a whole page's (not the heartbeat's alone)
        self.whole_done = False  # whether the last whole page's run that began has finished (its end received)
        self.pages: dict[str, str] = {}
        self.fragment: tuple[str, float] | None = None
        self.timer: asyncio.Task | None = None  # the heartbeat's interval, as the browser keeps it
        self.timer_key: tuple[str, float] | None = None  # the (fragment id, interval) it was started for
        self.radio: tuple[str, list[str]] | None = None
        self.send_id: str | None = None
        self.form_fragment = ""  # the fragment the poll's form is drawn in ("" when in the whole page)
        self.answered = self.confirmed = False
        self.kept: list = []  # widget values this page holds (the browser sends them with every rerun)
        self.quiet_until = 0.0
        self.last_kinds: list[str] = []
        self.page_hash = ""
        self.errors: list[str] = []
        # A page between a whole run's start and that run's end is half drawn (or blank, after a page switch): when
        # the first whole run began since the page was last whole, and how long each such wait lasted.
        self.half_since: float | None = None
        self.waits: list[float] = []
        self.whole_runs = self.whole_finished = 0  # whole page's runs begun, and finished (not cut short by a rerun)

    async def run(self, deadline: float) -> None:
        try:
            async with websockets.connect(self.url, subprotocols=["streamlit"], max_size=64 * 2**20) as ws:
                await self._send(ws)
                await self._read(ws, deadline)
        except (OSError, websockets.ConnectionClosed) as err:
            self.errors.append(f"follower {self.index}: connection: {err}")
        finally:
            self._stop_timer()
            if self.half_since is not None:  # a run whose end never came: half drawn until the test's end
                self.waits.append(time.time() - self.half_since)

    async def _send(self, ws, fragment: str = "", widgets: list | None = None, timer: bool = True) -> None:
        """A rerun, as the browser asks it: the whole page, or one fragment (its timer, or a widget drawn in it)."""
        msg = BackMsg()
        msg.rerun_script.query_string = self.query
        msg.rerun_script.page_script_hash = self.page_hash
        if fragment:
            msg.rerun_script.fragment_id, msg.rerun_script.is_auto_rerun = fragment, timer
        for wid, field, value in self.kept + (widgets or []):
            w = msg.rerun_script.widget_states.widgets.add()
            w.id = wid
            setattr(w, field, value)
        await ws.send(msg.SerializeToString())
        self.last_kinds.append(f"> rerun {'whole page' if not fragment else 'heartbeat' if timer else 'fragment'}")

    async def _beat(self, ws, interval: float, deadline: float) -> None:
        """What the browser does for a fragment with run_every: ask the server to rerun it, every interval."""
        while time.monotonic() < deadline:
            await asyncio.sleep(interval)
            if self.fragment and time.monotonic() >= self.quiet_until:
                await self._send(ws, self.fragment[0])

    def last_run(self) -> int:
        """Where the last whole page's run begins in the trace."""
        starts = [i for i, k in enumerate(self.last_kinds) if k == "new_session whole page"]
        return starts[-1] if starts else 0

    @staticmethod
    def _describe(fwd, kind: str) -> str:
        """One received message, as the trace of a follower that got stuck shows it."""
        if kind == "delta":
            which = fwd.delta.new_element.WhichOneof("type")
            said = f" {fwd.delta.new_element.markdown.body[-12:]!r}" if which == "markdown" else ""
            said = f" {fwd.delta.new_element.alert.body[:40]!r}" if which == "alert" else said
            return f"delta:{which}{said}" + (" (fragment)" if fwd.delta.fragment_id else "")
        if kind == "new_session":
            return f"new_session {'fragment' if fwd.metadata.run.fragment_ids else 'whole page'}"
        if kind == "script_finished":
            return f"script_finished {ForwardMsg.ScriptFinishedStatus.Name(fwd.script_finished)}"
        return kind

    def _stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.timer_key = None

    async def _read(self, ws, deadline: float) -> None:
        import re

        while time.monotonic() < deadline:
            try:
                raw = await asyncio.wait_for(ws.recv(), timeout=max(0.1, deadline - time.monotonic()))
            except TimeoutError:
                return
            fwd = ForwardMsg()
            fwd.ParseFromString(raw)
            kind = fwd.WhichOneof("type")
            self.last_kinds.append(self._describe(fwd, kind))
            if kind == "new_session":
                self.whole = not fwd.metadata.run.fragment_ids
                self.whole_runs += self.whole
                self.whole_done = self.whole_done and not self.whole
                if self.whole and self.half_since is None:
                    self.half_since = time.time()
            if kind == "new_session" and fwd.new_session.page_script_hash:
                self.page_hash = fwd.new_session.page_script_hash  # the page this session shows now
            if kind == "new_session" and not fwd.metadata.run.fragment_ids:
                self._stop_timer()  # as Streamlit's frontend does: a whole page's run clears every interval
                self.last_kinds.append("(interval cleared)")
            if kind == "auto_rerun":
                key = (fwd.auto_rerun.fragment_id, fwd.auto_rerun.interval)
                if self.timer_key != key:  # a new interval starts from now; the same one keeps its phase
                    self._stop_timer()
                    self.timer, self.timer_key = asyncio.create_task(self._beat(ws, key[1], deadline)), key
                    self.last_kinds.append("(interval started)")
                self.fragment = (fwd.auto_rerun.fragment_id, fwd.auto_rerun.interval)
            elif kind == "page_info_changed":
                self.query = fwd.page_info_changed.query_string
            elif kind == "navigation":
                self.pages = {p.url_pathname or "heads": p.page_script_hash for p in fwd.navigation.app_pages}
                self.page_hash = fwd.navigation.page_script_hash
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                el = fwd.delta.new_element
                which = el.WhichOneof("type")
                if which == "markdown":
                    found = re.search(r"· view (\d+)", el.markdown.body)
                    if found and fwd.delta.fragment_id and self.fragment:  # the heartbeat as the page has it now
                        self.fragment = (fwd.delta.fragment_id, self.fragment[1])
                    if found and int(found.group(1)) not in self.seen:
                        self.drawing = int(found.group(1))  # seen once its run, and the last whole run, finished
                elif which == "alert" and "Waiting for the teacher" in el.alert.body:
                    self.confirmed = True  # the page says the answer was kept
                elif which == "radio" and el.radio.label == "Your answer":
                    self.radio = (el.radio.id, list(el.radio.options))
                    self.form_fragment = fwd.delta.fragment_id
                elif which == "button" and el.button.label == "Send":
                    self.send_id = el.button.id
                elif which == "exception":
                    self.errors.append(f"exception: {el.exception.message[:200]}")
            elif kind == "script_finished":
                # Streamlit's message queue may carry a whole run's heartbeat caption over into the heartbeat's run
                # just after it (one element, the later wins), so the caption may come in either; a page counts as
                # drawn once the whole run that took the view has finished too (its end can be lost: seat.py).
                self.whole_done = self.whole_done or (
                    self.whole and fwd.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY
                )
                self.whole_finished += self.whole and fwd.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY
                if self.whole_done and self.half_since is not None:
                    self.waits.append(time.time() - self.half_since)
                    self.half_since = None
                if self.drawing is not None and self.whole_done:
                    self.seen.setdefault(self.drawing, time.time())  # the whole page, sidebar and main area, drawn
                if fwd.script_finished == ForwardMsg.FINISHED_EARLY_FOR_RERUN or self.whole_done:
                    self.drawing = None
            if kind == "script_finished" and self.radio and self.send_id and not self.answered:
                self.answered = True  # the poll's form is drawn: pick an answer, then press Send (two reruns)
                self.page_hash = self.pages.get("classroom", self.page_hash)  # the page the form is on
                choice = self.radio[1][self.index % len(self.radio[1])]
                self.quiet_until = time.monotonic() + 3  # as a person would, between a click and the next
                self.kept = [(self.radio[0], "string_value", choice)]  # a radio sends its formatted option
                # A widget drawn in a fragment reruns that fragment alone (the browser sends its id), else the page.
                await self._send(ws, self.form_fragment, timer=False)
                await asyncio.sleep(0.5)
                await self._send(ws, self.form_fragment, widgets=[(self.send_id, "trigger_value", True)], timer=False)


async def teacher_opens(url: str, query: str, page_hash: str = "") -> None:
    """The teacher opens a link (a new session): its run ends after the view is stored."""
    async with websockets.connect(url, subprotocols=["streamlit"], max_size=64 * 2**20) as ws:
        msg = BackMsg()
        msg.rerun_script.query_string = query
        msg.rerun_script.page_script_hash = page_hash
        await ws.send(msg.SerializeToString())
        while True:
            fwd = ForwardMsg()
            fwd.ParseFromString(await asyncio.wait_for(ws.recv(), timeout=120))
            if fwd.WhichOneof("type") == "script_finished" and fwd.script_finished in (
                ForwardMsg.FINISHED_SUCCESSFULLY,
                ForwardMsg.FINISHED_WITH_COMPILE_ERROR,
            ):
                return


def class_run(
    followers: int,
    seconds: float,
    every: float,
    database: str = "sqlite",
    replicas: int = 1,
    profile: bool = False,
    seed: int = 0,
) -> None:
    """A class led live: followers, a teacher changing the view every `every` seconds (plus up to one heartbeat,
    at random: a teacher's click is not timed to the students' heartbeats), then a poll. `replicas` servers share
    one database (SQLite file, or a PostgreSQL server the benchmark starts with its default settings); the teacher
    is on the first, the followers are dealt round the replicas."""
    import secrets as _secrets

    from attnviz.liveclass.store import Store
    from harness import pgserver

    folder = Path(tempfile.mkdtemp())
    postgres = pgserver.Server(fast=False) if database == "postgresql" else None
    target = postgres.create() if postgres else str(folder / "classes.db")
    ports = [free_port() for _ in range(replicas)]
    servers = [start_server(port, folder / f"streamlit{i}.log", {"ATTNVIZ_DB": target}) for i, port in enumerate(ports)]
    urls = [f"ws://127.0.0.1:{port}/_stcore/stream" for port in ports]
    url = urls[0]  # the teacher's
    db = Store(target)
    rng = random.Random(seed)
    code, secret, _ = db.create_class()
    changes: dict[int, float] = {}
    try:
        for each in urls:
            asyncio.run(warm_up(each))
        # The teacher's page is open before the students join, as in a lesson (its link and QR code are on it): its
        # run publishes the class's first view, so the followers know from the start that their teacher leads from
        # this server (their heartbeat is then the net, seat.NET_SECONDS). Not a timed change: nobody follows yet.
        asyncio.run(teacher_opens(url, f"class={code}&teacher={secret}"))
        flock = [Follower(urls[i % replicas], code, _secrets.token_hex(8), i) for i in range(followers)]
        raw = folder / "profile.txt"
        spy = start_profile(servers[0].pid, seconds - 10, raw) if profile else None

        async def lesson() -> int:
            deadline = time.monotonic() + seconds
            tasks = [asyncio.create_task(f.run(deadline + 15)) for f in flock]
            await asyncio.sleep(5)  # everyone in
            views = [(layer, head) for layer in range(1, 7) for head in (1, 5, 9, 12)]
            n = 0
            while time.monotonic() < deadline - 25:
                layer, head = views[n % len(views)]
                await teacher_opens(url, f"class={code}&teacher={secret}&view=Head&layer={layer}&head={head}")
                info = await asyncio.to_thread(db.get, code)  # off the loop: a follower's message is timed on arrival
                changes.setdefault(info.version, info.changed)
                n += 1
                await asyncio.sleep(every + rng.uniform(0, TICK))
            pages = flock[0].pages
            await teacher_opens(url, f"class={code}&teacher={secret}", pages.get("classroom", ""))
            info = await asyncio.to_thread(db.get, code)
            changes.setdefault(info.version, info.changed)
            poll = await asyncio.to_thread(
                db.start_poll,
                code,
                secret,
                "head type",
                "What kind of head is this?",
                list(HEAD_TYPES),
                {"model": "default", "backend": "hf", "text": "x", "layer": 0, "head": 0, "query": 0, "key": 0},
            )
            await asyncio.gather(*tasks)
            return poll

        poll_id = asyncio.run(lesson())
        if spy:
            spy.wait(60)
    finally:
        for server in servers:
            server.terminate()
            server.wait(10)
    lags = [f.seen[v] - t for f in flock for v, t in changes.items() if v in f.seen]
    missed = sum(1 for f in flock for v in changes if v not in f.seen)
    sent, confirmed, stored = sum(f.answered for f in flock), sum(f.confirmed for f in flock), db.count(poll_id)
    errors = [e for f in flock for e in f.errors]
    no_form = sum(1 for f in flock if f.radio is None or f.send_id is None)
    for f in flock:
        if f.radio is None or f.send_id is None:
            print(
                f"follower {f.index} never drew the poll's form: {sorted(f.seen)[-3:]}, radio {f.radio is not None}, "
                f"send {f.send_id is not None}, fragment {f.fragment}, "
                f"its last whole run and after {f.last_kinds[f.last_run() :][:40]} ... {f.last_kinds[-6:]}"
            )
    print("| measure | value | target |\n|---|---:|---|")
    print(f"| database / replicas | {db.describe() if postgres else 'SQLite'} / {replicas} | - |")
    print(f"| followers / seconds / view changes | {followers} / {seconds:.0f} / {len(changes)} | - |")
    target = "p95 <= 1 s, max <= 3 s" if followers <= 30 else "p95 <= 3 s"
    print(
        f"| a change reaching a follower, p50 / p95 / max | {pct(lags, 50):.2f} / {pct(lags, 95):.2f} / "
        f"{max(lags):.2f} s | {target} |"
    )
    per_change = [[f.seen[v] - t for f in flock if v in f.seen] for v, t in sorted(changes.items())]
    print(
        "| each change's p95, in order (the last takes the class to the Class page) | "
        + " / ".join(f"{pct(each, 95):.2f}" for each in per_change)
        + " s | - |"
    )
    print(f"| (follower, change) pairs never seen | {missed} of {followers * len(changes)} | 0 |")
    waits = [w for f in flock for w in f.waits]
    over = sum(w > 2 for w in waits)
    print(
        f"| a page half drawn or blank (a whole run's start to its end), p95 / max; waits over 2 s | "
        f"{pct(waits, 95):.2f} / {max(waits):.2f} s; {over} of {len(waits)} | max <= 2 s |"
    )
    begun, finished = sum(f.whole_runs for f in flock), sum(f.whole_finished for f in flock)
    print(
        f"| a follower's whole page's runs, begun / finished, per (follower, change) | "
        f"{begun / (followers * len(changes)):.2f} / {finished / (followers * len(changes)):.2f} | - |"
    )
    print(f"| answers sent / confirmed on the page / stored | {sent} / {confirmed} / {stored} | 0 lost |")
    print(f"| followers whose page had not drawn the poll's form by the end | {no_form} | - |")
    print(f"| errors | {len(errors)} | 0 |")
    for e in errors[:10]:
        print("error:", e)
    if profile and raw.exists():
        total, shares = profile_shares(raw)
        print(f"\nprofile of the teacher's server (py-spy, {total:,} samples of busy threads; raw stacks: {raw}):")
        for part, share in shares.items():
            print(f"- {part}: {share:.0%}")
    db.close()
    if postgres:
        postgres.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=30)
    parser.add_argument("--browsers", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true", help="sample the server with py-spy during the load")
    parser.add_argument("--memory", action="store_true", help="the memory run: 30 users, different 512-token texts")
    parser.add_argument("--rounds", type=int, default=3, help="with --memory: texts per user")
    parser.add_argument("--class", dest="klass", action="store_true", help="a class led live: followers and a poll")
    parser.add_argument("--every", type=float, default=10.0, help="with --class: seconds between the teacher's views")
    parser.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite", help="with --class: the store")
    parser.add_argument("--replicas", type=int, default=1, help="with --class: servers sharing the store")
    parser.add_argument(
        "--admission",
        action="store_true",
        help="short sentences while 3 long texts and a 2,000-case benchmark run (heavy work admitted)",
    )
    parser.add_argument("--heavy", type=int, default=3, help="with --admission: users pasting 4,000-token texts")
    parser.add_argument("--cases", type=int, default=2000, help="with --admission: the benchmark's cases")
    args = parser.parse_args()
    if args.admission:
        admission_run(args.users, args.heavy, args.cases, args.seconds)
        return
    if args.klass:
        class_run(args.users, args.seconds, args.every, args.db, args.replicas, args.profile, args.seed)
        return
    if args.memory:
        memory_run(args.users, args.rounds)
        return
    long_ms, short_ms, during_ms = (1e3 * x for x in stall_check())
    print(
        f"one engine, shared: a 512-token request takes {long_ms:.0f} ms alone; a short one {short_ms:.0f} ms alone "
        f"and {during_ms:.0f} ms when sent while the long one runs (at most {long_ms + short_ms:.0f} expected)\n"
    )
    port = free_port()
    server = start_server(port, Path(tempfile.mkdtemp()) / "streamlit.log")
    stats, memory = Stats(), []
    try:
        # warm-up: every page once, so every model is loaded and the memory baseline is the warm server
        asyncio.run(warm_up(f"ws://127.0.0.1:{port}/_stcore/stream"))
        start = time.monotonic()
        deadline = start + args.seconds
        sampler_stop = sample_memory(server.pid, start, memory, 5)
        raw = Path(tempfile.mkdtemp()) / "profile.txt"
        spy = start_profile(server.pid, args.seconds - 5, raw) if args.profile else None
        browsers = threading.Thread(
            target=browser_users, args=(f"http://127.0.0.1:{port}/", args.browsers, deadline, stats)
        )
        if args.browsers:
            browsers.start()

        async def everyone() -> None:
            url = f"ws://127.0.0.1:{port}/_stcore/stream"
            await asyncio.gather(*(protocol_user(url, u, deadline, stats, args.seed) for u in range(args.users)))

        asyncio.run(everyone())
        if args.browsers:
            browsers.join()
        sampler_stop.set()
        if spy:
            spy.wait(60)
    finally:
        server.terminate()
        server.wait(10)
    first = next((m for t, m in memory if t >= 10), memory[0][1])  # after the first 10 s of load
    peak, last = max(m for _, m in memory), memory[-1][1]
    print("| measure | value | target |\n|---|---:|---|")
    print(f"| protocol users / browser contexts / seconds | {args.users} / {args.browsers} / {args.seconds:.0f} | - |")
    print(f"| runs completed (protocol) | {len(stats.times)} | - |")
    print(f"| time to finished run, p50 | {pct(stats.times, 50):.2f} s | - |")
    print(f"| time to finished run, p95 | {pct(stats.times, 95):.2f} s | <= 5 s |")
    print(
        f"| browser: Enter to heatmaps drawn, p50 / p95 (n={len(stats.browser_times)}) | "
        f"{pct(stats.browser_times, 50):.2f} / {pct(stats.browser_times, 95):.2f} s | - |"
    )
    print(f"| errors | {len(stats.errors)} | 0 |")
    print(f"| server memory after 10 s of load / peak / at the end | {first:.0f} / {peak:.0f} / {last:.0f} MB | - |")
    print(f"| memory growth after warm-up (end vs 10 s) | {100 * (last - first) / first:+.1f}% | <= 10% |")
    print("\nmemory over time (s, MB): " + ", ".join(f"{t:.0f}:{m:.0f}" for t, m in memory))
    if spy and raw.exists():
        total, shares = profile_shares(raw)
        print(f"\nprofile of the server under load (py-spy, {total:,} samples of busy threads; raw stacks: {raw}):")
        for part, share in shares.items():
            print(f"- {part}: {share:.0%}")
    for e in stats.errors[:20]:
        print("error:", e)


if __name__ == "__main__":
    main()
