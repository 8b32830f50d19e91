"""bench/load.py --memory: 30 users with different 512-token texts; the server's memory stays bounded."""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import websockets  # noqa: E402
from load_common import SUBJECTS, Stats, pct, rss_mb, run_page, sample_memory, warm_up  # noqa: E402

from harness.server import free_port, start_server  # noqa: E402

MEMORY_BOUND_MB = 2048  # 30 students with different 512-token texts must fit in this (issue: 2 GB)


def long_text(user: int, n: int) -> str:
    """A text of well over 512 tokens, different for every (user, n)."""
    return " ".join(f"{random.Random(user * 1000 + n).choice(SUBJECTS)} wrote note {user}.{n}.{i}" for i in range(120))


async def memory_user(url: str, user: int, rounds: int, stats: Stats) -> None:
    """Send a new 512-token text, then twice more with a layer moved (the result must stay or be recomputed)."""
    try:
        async with websockets.connect(url, subprotocols=["streamlit"], max_size=64 * 2**20) as ws:
            pages, text_id = await run_page(ws, None, None, None, stats, record=False)
            for n in range(rounds):
                await run_page(ws, text_id, long_text(user, n), pages.get("heads"), stats, record=True)
                for _ in range(2):
                    await run_page(ws, text_id, long_text(user, n), pages.get("heads"), stats, record=True)
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
