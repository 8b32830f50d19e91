"""bench/load.py --class: a class led live, its followers, the teacher's changes and a poll."""

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
from load_common import pct, profile_shares, start_profile, warm_up  # noqa: E402
from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: E402

from attnviz.analysis.head_stats import LABELS as HEAD_TYPES  # noqa: E402
from attnviz.ui.room.seat import TICK_SECONDS as TICK  # noqa: E402
from harness.server import free_port, start_server  # noqa: E402


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
