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
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


from load_admission import admission_run  # noqa: E402
from load_class import class_run  # noqa: E402
from load_common import Stats, pct, profile_shares, protocol_user, sample_memory, sentence, start_profile, warm_up  # noqa: E402
from load_memory import memory_run  # noqa: E402

from harness.server import ARGS, CHROMIUM, free_port, start_server  # noqa: E402


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
    engine.run(engine.encode(long_text)), engine.run(engine.encode(short_text))  # warm

    def timed(text: str) -> float:
        start = time.perf_counter()
        engine.run(engine.encode(text))
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
