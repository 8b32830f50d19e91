"""bench/load.py --admission: short sentences while long texts and a benchmark run, heavy work admitted."""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import websockets  # noqa: E402
from load_class import teacher_opens  # noqa: E402
from load_common import SUBJECTS, Stats, pct, protocol_user, rss_mb, sample_memory, warm_up  # noqa: E402
from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: E402

from harness.server import ARGS, CHROMIUM, free_port, start_server  # noqa: E402

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
