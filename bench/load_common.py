"""What bench/load.py's modes share: the users' sentences, a protocol user, the warm-up, percentiles, the
server's memory, py-spy's profile and its parts."""

from __future__ import annotations

import asyncio
import collections
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import websockets  # noqa: E402
from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: E402

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
            pages, text_id = await run_page(ws, None, None, None, stats, record=False)
            n = 0
            while time.monotonic() < deadline:
                await asyncio.sleep(rng.uniform(2.0, 5.0))
                n += 1
                page = rng.choice(PAGES)
                _, _ = await run_page(ws, text_id, sentence(rng, user, n), pages.get(page), stats, record=True)
    except (OSError, websockets.ConnectionClosed) as err:
        stats.errors.append(f"user {user}: connection: {err}")


async def run_page(ws, text_id, text, page_hash, stats: Stats, record: bool):
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
        pages, text_id = await run_page(ws, None, None, None, stats, record=False)
        for page in PAGES:
            await run_page(ws, text_id, f"Warming up the {page} page.", pages.get(page), stats, record=False)
    if stats.errors:
        raise RuntimeError(f"the warm-up failed: {stats.errors}")


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) >= 2 else float("nan")


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
