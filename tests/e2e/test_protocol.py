"""A hostile student through Streamlit's own websocket protocol, against a live `python -m attnviz serve`: one page
session that flips its URL between classes and student ids still has one voice; and a link naming a model never makes
an online server contact the hub."""

from __future__ import annotations

import asyncio
import time

import pytest
import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from attnviz.analysis import poll_answers
from attnviz.liveclass.store import Store
from harness.server import free_port, start_server

pytestmark = pytest.mark.slow  # a server, spoken to over its websocket

DONE = (ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_WITH_COMPILE_ERROR)


class Page:
    """One browser page's session on the server: reruns with a URL's query string and widget values."""

    def __init__(self, ws) -> None:
        self.ws, self.pages, self.page_hash = ws, {}, ""

    async def run(self, query: str, page: str = "", widgets: tuple = (), *, opened: str = "") -> list:
        """One rerun, as a browser sends it; the elements the run drew. `opened`: the page a link names by its path
        (as a browser's first message does, before it knows the pages' hashes)."""
        msg = BackMsg()
        msg.rerun_script.query_string = query
        msg.rerun_script.page_script_hash = self.pages.get(page, self.page_hash)
        msg.rerun_script.page_name = opened
        for wid, field, value in widgets:
            w = msg.rerun_script.widget_states.widgets.add()
            w.id = wid
            setattr(w, field, value)
        await self.ws.send(msg.SerializeToString())
        drawn = []
        while True:
            fwd = ForwardMsg()
            fwd.ParseFromString(await asyncio.wait_for(self.ws.recv(), timeout=120))
            kind = fwd.WhichOneof("type")
            if kind == "navigation":
                self.pages = {p.url_pathname or "heads": p.page_script_hash for p in fwd.navigation.app_pages}
                self.page_hash = fwd.navigation.page_script_hash
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                drawn.append(fwd.delta.new_element)
            elif kind == "script_finished" and fwd.script_finished in DONE:
                return drawn

    @staticmethod
    def find(drawn: list, which: str, label: str):
        return next(
            (getattr(e, which) for e in drawn if e.WhichOneof("type") == which and getattr(e, which).label == label),
            None,
        )


class FakeHub:
    """A port that answers every HTTP request with 404 and remembers what was asked: a hub that holds nothing."""

    def __init__(self) -> None:
        import http.server
        import threading

        asked = self.asked = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self):
                asked.append(f"{self.command} {self.path}")
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_HEAD = do_POST = _answer

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


HUB_LINKS = [  # every way a student could name a model: links to each page, and the Compare page's hub box
    "/?model=bigscience/bloom",
    "/?model=gpt2&backend=hf",
    "/inside?model=bert-base-uncased",
    "/overview?model=t5-small",
    "/pronouns?model=distilbert-base-uncased",
    "/compare?source=hub&hub=Helsinki-NLP/opus-mt-en-de",
    "/compare?source=hub&hub=facebook/bart-large",
]


async def _opened(port: int, link: str) -> list:
    """The elements a page's first run draws for a link (a path and a query string), as a browser opening it asks."""
    path, _, query = link.partition("?")
    url = f"ws://127.0.0.1:{port}/_stcore/stream"
    async with websockets.connect(url, subprotocols=["streamlit"], max_size=64 * 2**20) as ws:
        return await Page(ws).run(query, opened=path.strip("/"))


def _alerts(port: int, link: str) -> list[str]:
    """The texts of the alerts a link's page draws, after checking it drew no traceback."""
    drawn = asyncio.run(_opened(port, link))
    assert not [e for e in drawn if e.WhichOneof("type") == "exception"], link
    return [e.alert.body for e in drawn if e.WhichOneof("type") == "alert"]


def test_an_online_server_never_contacts_the_hub_unless_its_operator_allows_downloads(tmp_path):
    """Every way a student could name a model, opened as a browser opens a link (its path and query string, the
    first message a page sends): an online server that does not allow downloads says it does not offer the model and
    asks the hub nothing; the same server with downloads allowed does ask (so the test can see a request). In
    Chromium until 2026-11-27 (eight page loads, about 85 s of a full run with its two servers): what is at stake is
    what the server does with a link, not what a browser draws."""
    hub = FakeHub()
    online = {
        "HF_HUB_OFFLINE": None,
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(tmp_path / "hf"),
        "ATTNVIZ_MODELS": None,
        "ATTNVIZ_ALLOW_DOWNLOADS": None,
    }
    try:
        port = free_port()
        proc = start_server(port, tmp_path / "online.log", online)
        try:
            for link in HUB_LINKS:
                alerts = _alerts(port, link)
                assert any("does not offer" in a for a in alerts), (link, alerts)
            assert hub.asked == [], hub.asked
        finally:
            proc.terminate()
            proc.wait(10)
        port = free_port()
        proc = start_server(port, tmp_path / "downloads.log", {**online, "ATTNVIZ_ALLOW_DOWNLOADS": "1"})
        try:
            alerts = _alerts(port, "/?model=attnviz-test/no-such-model")
            assert any("could not be loaded" in a for a in alerts), alerts
            assert hub.asked, "with downloads allowed the server should have asked the hub"
        finally:
            proc.terminate()
            proc.wait(10)
    finally:
        hub.close()


@pytest.fixture(scope="module")
def one_server(tmp_path_factory):
    """One server for the module (each test makes its own classes in its database)."""
    folder = tmp_path_factory.mktemp("protocol")
    port, db = free_port(), folder / "classes.db"
    proc = start_server(port, folder / "server.log", {"ATTNVIZ_DB": str(db)})
    yield f"ws://127.0.0.1:{port}/_stcore/stream", Store(db), folder / "server.log"
    proc.terminate()
    proc.wait(30)


class LogSince:
    """The server's log from where it stood when a test began: what that test's sessions made it say."""

    def __init__(self, path) -> None:
        self.path, self.start = path, path.stat().st_size

    def read_text(self) -> str:
        with open(self.path, encoding="utf-8", errors="replace") as f:
            f.seek(self.start)
            return f.read()


@pytest.fixture
def server(one_server):
    url, db, log = one_server
    return url, db, LogSince(log)


def test_one_page_flipping_its_class_and_sid_answers_once(server):
    url, db, _ = server
    code, secret, _ = db.create_class()
    a, b, c = "a" * 16, "b" * 16, "c" * 16
    db.join(code, b)  # a classmate, following: the page must never take b's seat

    async def session() -> list[str]:
        async with websockets.connect(url, subprotocols=["streamlit"], max_size=64 * 2**20) as ws:
            page = Page(ws)
            await page.run(f"class={code}&sid={a}")
            await page.run(f"class={code}&sid={a}", "classroom")
            poll = db.start_poll(code, secret, "head type", "What kind?", list(poll_answers.HEAD_TYPES), {})
            sent = []
            for query in (
                f"class={code}&sid={a}",
                "class=BAD",
                f"class={code}&sid={b}",
                "class=ZZZZZZ",
                f"class={code}&sid={c}",
                f"class={code}&sid={b}",
            ):
                drawn = await page.run(query, "classroom")
                radio, send = page.find(drawn, "radio", "Your answer"), page.find(drawn, "button", "Send")
                if radio and send:  # the form is offered: answer, as a student would
                    await page.run(query, "classroom", ((radio.id, "string_value", "self"),))
                    await page.run(
                        query, "classroom", ((radio.id, "string_value", "self"), (send.id, "trigger_value", True))
                    )
                    sent.append(query)
            assert db.count(poll) == 1 and db.answered(poll, a) == "self" and db.answered(poll, b) is None
            return sent

    sent = asyncio.run(session())
    assert sent == [f"class={code}&sid={a}"]  # the form was offered once, to the page's own first id


def test_a_visitors_clear_cache_message_clears_their_session_not_the_servers_caches(server):
    from attnviz.ui.guards import CLEARED_OWN

    url, _, log = server

    async def session() -> None:
        async with websockets.connect(url, subprotocols=["streamlit"], max_size=64 * 2**20) as ws:
            page = Page(ws)
            await page.run("")
            msg = BackMsg()
            msg.clear_cache = True  # what Streamlit's "Clear cache" menu item sends; any script can send it
            await ws.send(msg.SerializeToString())
            drawn = await page.run("")  # the server still answers, its model still loaded
            assert page.find(drawn, "text_input", "Text") is not None

    asyncio.run(session())
    said = log.read_text()
    assert CLEARED_OWN in said and "Traceback" not in said


def test_a_heartbeat_keeps_its_interval_and_redraws_a_page_that_never_got_its_runs_end(server):
    """Streamlit drops the rest of a finished run's messages when a heartbeat's request lands before they were sent
    (attnviz/ui/room/seat.py, _redraw_if_lost): the page is left drawn halfway, and with no heartbeat if the interval
    was in the part lost. Here the browser's side of that: a heartbeat whose URL still has an older `drawn`."""
    from attnviz.ui.room import seat

    url, db, log = server
    code, secret, _ = db.create_class()
    db.set_view(code, secret, {"page": "", "params": {"view": "Head", "layer": "2"}})

    def messages(ws):
        return _received(ws, lambda end: True)

    async def beat(ws, query: str, fragment: str) -> list:
        msg = BackMsg()
        msg.rerun_script.query_string, msg.rerun_script.fragment_id = query, fragment
        msg.rerun_script.is_auto_rerun = True
        await ws.send(msg.SerializeToString())
        return await messages(ws)

    async def session() -> None:
        async with websockets.connect(url, subprotocols=["streamlit"], max_size=64 * 2**20) as ws:
            query = f"class={code}&sid={'e' * 16}"
            await ws.send(BackMsg(rerun_script={"query_string": query}).SerializeToString())
            whole = await messages(ws)
            armed = [m.auto_rerun for m in whole if m.WhichOneof("type") == "auto_rerun"]
            urls = [m.page_info_changed.query_string for m in whole if m.WhichOneof("type") == "page_info_changed"]
            assert len(armed) == 1 and f"{seat.DRAWN}=1.None.0" in urls[-1]  # the run's end, in the URL
            fragment = armed[0].fragment_id
            got = await beat(ws, urls[-1], fragment)  # a page that has it: a heartbeat, which sets its interval again
            runs = [list(m.metadata.run.fragment_ids) for m in got if m.WhichOneof("type") == "new_session"]
            assert runs == [[fragment]] and got[-1].script_finished == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
            assert [m.auto_rerun.fragment_id for m in got if m.WhichOneof("type") == "auto_rerun"] == [fragment]
            got = await beat(ws, query, fragment)  # the run's end never arrived, but it only just ended: wait
            assert got[-1].script_finished == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
            await asyncio.sleep(seat.DRAWN_GRACE + 0.2)
            got = await beat(ws, query, fragment)  # still not: the whole page is drawn again
            got += await messages(ws)
            runs = [list(m.metadata.run.fragment_ids) for m in got if m.WhichOneof("type") == "new_session"]
            assert runs == [[fragment], []] and got[-1].script_finished == ForwardMsg.FINISHED_SUCCESSFULLY

    asyncio.run(session())
    assert "missed the end of its run; drawn again" in log.read_text()


def test_a_browser_that_missed_its_page_switch_gets_the_page_its_session_is_on(server):
    """A following student's run switches the session from the Class page to the teacher's head; a browser that never
    got that run (its messages lost) keeps sending its heartbeat from the Class page. The guard drops those (they
    would blank the new page), so without a way back nothing on that page would change again: a student whose address
    took the teacher's head and whose page never showed it. The server draws the session's own page whole for it."""
    from attnviz.ui import guards

    url, db, log = server
    code, secret, _ = db.create_class()
    db.set_view(code, secret, {"page": "classroom", "params": {}})

    def whole(ws):  # the messages up to the end of the next whole page's run
        return _received(ws, lambda end: end == ForwardMsg.FINISHED_SUCCESSFULLY)

    def pages(got: list) -> list[tuple[str, bool]]:
        return [
            (m.new_session.page_script_hash, bool(m.metadata.run.fragment_ids))
            for m in got
            if m.WhichOneof("type") == "new_session"
        ]

    async def session() -> None:
        async with websockets.connect(url, subprotocols=["streamlit"], max_size=64 * 2**20) as ws:
            query = f"class={code}&sid={'d' * 16}"
            await ws.send(BackMsg(rerun_script={"query_string": query}).SerializeToString())
            got = await whole(ws)  # the student link: the session takes the teacher's view, the Class page
            classroom = pages(got)[-1][0]
            fragment = next(m.auto_rerun.fragment_id for m in got if m.WhichOneof("type") == "auto_rerun")
            db.set_view(code, secret, {"page": "", "params": {"view": "Head", "layer": "3", "head": "2"}})
            tick = BackMsg()  # the heartbeat of the Class page, as this browser keeps sending it
            tick.rerun_script.query_string, tick.rerun_script.page_script_hash = query, classroom
            tick.rerun_script.fragment_id, tick.rerun_script.is_auto_rerun = fragment, True
            ticking = asyncio.create_task(_tick_every(ws, tick, 0.4))
            try:
                got = await whole(ws)  # a heartbeat sees the new view; the run switches the session to Heads
                heads = pages(got)[-1][0]
                assert heads != classroom and pages(got)[-1][1] is False
                # This browser never got that run: its heartbeat still comes from the Class page, dropped at first.
                start = time.monotonic()
                got = await whole(ws)
            finally:
                ticking.cancel()
            assert pages(got) == [(heads, False)]  # the session's page, drawn whole for it
            assert guards.LEFT_GRACE <= time.monotonic() - start < guards.LEFT_GRACE + 10
            said = [m.page_info_changed.query_string for m in got if m.WhichOneof("type") == "page_info_changed"]
            assert said and all("layer=3" in u and "head=2" in u for u in said), said

    asyncio.run(session())
    assert guards.REDRAWN_LEFT in log.read_text()


def test_a_heartbeat_carrying_the_view_its_page_showed_before_the_teachers_leaves_the_student_following(server):
    """A browser sends every widget's value with each heartbeat, as its page holds it. Under load a heartbeat can
    leave before the page has applied the values of the run that took the teacher's new view: a full `make test`
    (2026-12-01) saw a student take the teacher's Layer view, then a heartbeat bring back the Head view it had shown
    before, and the next whole run call that the student's own change ("exploring on your own") and draw a head that
    nobody chose. A heartbeat's values never replace what the session's runs set, nor do a tap's on a page that has
    not yet received the run that took the view; a tap on the page as drawn is the student's change."""
    from attnviz.ui.room import reads, seat

    url, db, _ = server
    code, secret, _ = db.create_class()
    db.set_view(code, secret, {"page": "", "params": {"view": "Head", "layer": "2", "head": "4"}})
    student = "a1" * 8

    def whole(ws):
        return _received(ws, lambda end: end == ForwardMsg.FINISHED_SUCCESSFULLY)

    def urls(got: list) -> list[str]:
        return [m.page_info_changed.query_string for m in got if m.WhichOneof("type") == "page_info_changed"]

    def view_picker(got: list):
        return next(
            m.delta.new_element.button_group
            for m in got
            if m.WhichOneof("type") == "delta"
            and m.delta.new_element.WhichOneof("type") == "button_group"
            and m.delta.new_element.button_group.label == "View"
        )

    async def session() -> list[str]:
        async with websockets.connect(url, subprotocols=["streamlit"], max_size=64 * 2**20) as ws:
            query = f"class={code}&sid={student}"
            await ws.send(BackMsg(rerun_script={"query_string": query}).SerializeToString())
            got = await whole(ws)  # the teacher's head, taken
            picker = view_picker(got)
            page_hash = [m.navigation.page_script_hash for m in got if m.WhichOneof("type") == "navigation"][-1]
            assert "view=Head" in urls(got)[-1] and "head=4" in urls(got)[-1]
            shown = urls(got)[-1]  # the address the page had while it showed the head
            db.set_view(code, secret, {"page": "", "params": {"view": "Layer", "layer": "2"}})
            await asyncio.sleep(2 * reads.PULSE_SHARED)  # the server's shared read of the class, from before, expires
            # the wake of the teacher's run on this server: the whole page, with the values the session holds
            rerun = BackMsg()
            rerun.rerun_script.query_string, rerun.rerun_script.page_script_hash = shown, page_hash
            await ws.send(rerun.SerializeToString())
            got = await whole(ws)
            assert "view=Layer" in urls(got)[-1]
            fragment = next(m.auto_rerun.fragment_id for m in got if m.WhichOneof("type") == "auto_rerun")
            # a heartbeat from before the page applied that run: its URL without the run's end, its picker on Head
            await asyncio.sleep(seat.DRAWN_GRACE + 0.2)
            tick = BackMsg()
            tick.rerun_script.query_string, tick.rerun_script.page_script_hash = shown, page_hash
            tick.rerun_script.fragment_id, tick.rerun_script.is_auto_rerun = fragment, True
            stale = tick.rerun_script.widget_states.widgets.add()
            stale.id = picker.id
            stale.string_array_value.data.append("Head")
            await ws.send(tick.SerializeToString())
            got = await _received(ws, lambda end: True)  # the heartbeat: the run's end missed, the page drawn again
            got += await whole(ws)
            said = urls(got)
            assert said and all("view=Layer" in u and "head=" not in u for u in said), said
            assert db.students(code)[1] == 1  # still following the teacher

            def click(url: str, view: str) -> bytes:  # a whole page's request, as a tap on the page sends it
                msg = BackMsg()
                msg.rerun_script.query_string, msg.rerun_script.page_script_hash = url, page_hash
                mine = msg.rerun_script.widget_states.widgets.add()
                mine.id = picker.id
                mine.string_array_value.data.append(view)
                return msg.SerializeToString()

            # a tap on a page still drawing the run that took the view (its URL without that run's end): its values
            # are the page's before, not a choice; the teacher's view again
            await ws.send(click(shown, "Head"))
            said = urls(await whole(ws))
            assert said and all("view=Layer" in u and "head=" not in u for u in said), said
            assert db.students(code)[1] == 1
            # the student's own click on Overview, from the page as drawn: a change, so exploring alone
            await ws.send(click(said[-1], "Overview"))
            return urls(await whole(ws))

    said = asyncio.run(session())
    assert "view=Overview" in said[-1] and db.students(code)[1] == 0  # exploring alone now


async def _received(ws, last) -> list:
    """The server's messages up to the first run's end (its ScriptFinishedStatus) that `last` accepts."""
    out = []
    while True:
        fwd = ForwardMsg()
        fwd.ParseFromString(await asyncio.wait_for(ws.recv(), timeout=120))
        out.append(fwd)
        if fwd.WhichOneof("type") == "script_finished" and last(fwd.script_finished):
            return out


async def _tick_every(ws, tick, interval: float) -> None:
    """A browser's heartbeat timer: the same request every `interval` seconds."""
    while True:
        await asyncio.sleep(interval)
        await ws.send(tick.SerializeToString())


def test_a_students_answer_reruns_only_the_questions_part_of_the_page(server):
    """Picking an answer and pressing Send rerun the answer's fragment alone, as a browser asks (the widget's
    fragment id): a class answering at once costs no whole page's run each (bench/load.py --class)."""
    url, db, _ = server
    code, secret, _ = db.create_class()
    db.set_view(code, secret, {"page": "classroom", "params": {}})
    query = f"class={code}&sid={'f' * 16}"

    async def until(ws, done: tuple) -> list:
        out = []
        while True:
            fwd = ForwardMsg()
            fwd.ParseFromString(await asyncio.wait_for(ws.recv(), timeout=120))
            out.append(fwd)
            if fwd.WhichOneof("type") == "script_finished" and fwd.script_finished in done:
                return out

    async def send(ws, page_hash: str, fragment: str = "", widgets: tuple = ()) -> None:
        msg = BackMsg()
        msg.rerun_script.query_string, msg.rerun_script.page_script_hash = query, page_hash
        msg.rerun_script.fragment_id = fragment
        for wid, field, value in widgets:
            w = msg.rerun_script.widget_states.widgets.add()
            w.id = wid
            setattr(w, field, value)
        await ws.send(msg.SerializeToString())

    def element(got: list, which: str, label: str):
        return next(
            (
                m
                for m in got
                if m.WhichOneof("type") == "delta"
                and m.delta.WhichOneof("type") == "new_element"
                and m.delta.new_element.WhichOneof("type") == which
                and getattr(m.delta.new_element, which).label == label
            ),
            None,
        )

    async def session() -> None:
        async with websockets.connect(url, subprotocols=["streamlit"], max_size=64 * 2**20) as ws:
            await send(ws, "")
            got = await until(ws, DONE)  # the Heads page, switched to the teacher's Class page
            page_hash = [m.navigation.page_script_hash for m in got if m.WhichOneof("type") == "navigation"][-1]
            assert element(got, "radio", "Your answer") is None  # no question yet
            poll = db.start_poll(code, secret, "head type", "What kind?", list(poll_answers.HEAD_TYPES), {})
            await send(ws, page_hash)  # the whole page's run that the heartbeat would ask for
            got = await until(ws, DONE)
            radio, button = element(got, "radio", "Your answer"), element(got, "button", "Send")
            assert radio is not None and button is not None and radio.delta.fragment_id
            fragment, rid = radio.delta.fragment_id, radio.delta.new_element.radio.id
            assert button.delta.fragment_id == fragment
            alone = (ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY,)
            await send(ws, page_hash, fragment, ((rid, "string_value", "self"),))
            got = await until(ws, alone)
            sent = (button.delta.new_element.button.id, "trigger_value", True)
            await send(ws, page_hash, fragment, ((rid, "string_value", "self"), sent))
            got += await until(ws, alone)  # the answer stored, then the fragment drawn again: the answer kept
            runs = [list(m.metadata.run.fragment_ids) for m in got if m.WhichOneof("type") == "new_session"]
            assert runs and all(r == [fragment] for r in runs)  # never the whole page
            kept = [
                m.delta.new_element.alert.body
                for m in got
                if m.WhichOneof("type") == "delta" and m.delta.new_element.WhichOneof("type") == "alert"
            ]
            assert any("Your answer: **self**" in k and "Waiting for the teacher" in k for k in kept)
            assert db.answered(poll, "f" * 16) == "self" and db.count(poll) == 1

    asyncio.run(session())


class _Socket:
    """What harness.wire.Wire asks of Playwright's websocket and page: event handlers by name."""

    url = "ws://test/_stcore/stream"

    def __init__(self) -> None:
        self.handlers: dict = {}

    def on(self, event: str, handler) -> None:
        self.handlers[event] = handler


def test_the_wire_decodes_a_runs_end_a_fragments_end_and_a_rerun():
    """harness/wire.py, which a class test's failure prints and class_browser times the teacher by: a whole run's
    end is counted in `ends`, a fragment's is not; each message reads as its run, its kind and what it carries."""
    from harness import wire

    page, ws = _Socket(), _Socket()
    trace = wire.Wire(page)
    page.handlers["websocket"](ws)
    whole = ForwardMsg()
    whole.metadata.run.script_run_id = "run-abc123"
    whole.script_finished = ForwardMsg.FINISHED_SUCCESSFULLY
    beat = ForwardMsg()
    beat.metadata.run.script_run_id = "run-def456"
    beat.metadata.run.fragment_ids.append("frag-987654")
    beat.script_finished = ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
    address = ForwardMsg()
    address.page_info_changed.query_string = "class=ABC123&drawn=2.None.0"
    asked = BackMsg()
    asked.rerun_script.fragment_id, asked.rerun_script.is_auto_rerun = "frag-987654", True
    asked.rerun_script.query_string, asked.rerun_script.page_script_hash = "class=ABC123", "page-6b07c2"
    for msg in (whole, beat, address):
        ws.handlers["framereceived"](msg.SerializeToString())
    ws.handlers["framesent"](asked.SerializeToString())
    ws.handlers["framereceived"](b"\xff\xff not a message")
    said = [line.split(maxsplit=1)[1] for line in trace.lines()[1:]]
    assert said[0] == f"socket open {ws.url}"
    assert said[1:5] == [
        "<- run abc123: script_finished FINISHED_SUCCESSFULLY",
        "<- run def456 frag 987654: script_finished FINISHED_FRAGMENT_RUN_SUCCESSFULLY",
        "<- run -: page_info ?class=ABC123&drawn=2.None.0",
        "-> rerun frag 987654 auto page 6b07c2 ?class=ABC123",
    ]
    assert said[5].startswith("<- <unparsed 16 bytes")
    assert len(trace.ends) == 1  # the whole run's end only


def test_the_class_bench_counts_a_page_s_main_thread_once_and_only_in_its_window():
    """bench/class_browser.py --timeline: a page's main thread (its renderer, by the page's own mark), the CPU of its
    outermost top-level tasks, clipped to each change's window; another renderer's left out, or counted with None."""
    import json
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "bench"))
    import class_browser

    epoch_ms = 1_800_000_000_000  # the page's Date.now() at the mark, whose trace clock reads 5 s (5e6 us)

    def task(pid, start, dur, cat="toplevel"):  # start and dur in seconds after the mark
        return {"ph": "X", "pid": pid, "tid": 1, "cat": cat, "name": "RunTask", "ts": 5e6 + start * 1e6,
                "dur": dur * 1e6}  # fmt: skip

    events = [
        {"ph": "M", "pid": 7, "tid": 1, "name": "thread_name", "args": {"name": "CrRendererMain"}},
        {"ph": "M", "pid": 8, "tid": 1, "name": "thread_name", "args": {"name": "CrRendererMain"}},
        {"ph": "R", "pid": 7, "tid": 1, "cat": "blink.user_timing", "name": f"{class_browser.SYNC}laptop 1:{epoch_ms}",
         "ts": 5e6},
        task(7, 1.0, 0.2),
        task(7, 1.05, 0.1),  # inside the one before (a top-level event nested in another): counted once
        task(7, 1.9, 0.2),  # half in the first window
        task(7, 1.5, 0.1, cat="devtools.timeline"),  # not a top-level task
        task(8, 1.0, 1.0),  # another page's renderer
    ]  # fmt: skip
    t = epoch_ms / 1000
    windows = [(t + 0.9, t + 2.0), (t + 3, t + 4)]
    trace = json.dumps({"traceEvents": events}).encode()
    assert class_browser._busy(trace, "laptop 1", windows) == pytest.approx([0.3, 0.0])
    assert class_browser._busy(trace, None, windows) == pytest.approx([1.3, 0.0])  # every thread: the other too
    slow = [{**e, "tdur": e["dur"] / 4} if e.get("ph") == "X" else e for e in events]  # a quarter of it on a core
    trace = json.dumps({"traceEvents": slow}).encode()
    assert class_browser._busy(trace, "laptop 1", windows) == pytest.approx([0.075, 0.0])
