"""What a Chromium page and its Streamlit server said to each other, one line per websocket message.

A page that ends on the wrong view or blank (bench/class_browser.py, tests/e2e/test_browser_class.py) leaves a race
behind; the page's own DOM only shows the result. `Wire(page)` keeps the last messages both ways, decoded from
Streamlit's protobufs (ForwardMsg from the server, BackMsg from the browser) into a short line each: which run sent it
(its script run id and fragment), what it is (a delta's element and path, a run's end, the page's new address, a
rerun the browser asked for), and when. `lines()` gives them, oldest first; `ends` the moments whole runs' ends
arrived. The times are this process's clock when Playwright handed the message over: as exact as the caller keeps
Playwright busy (a wait of 25 ms, not time.sleep, lets it deliver).
"""

from __future__ import annotations

import collections
import time

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

KEEP = 4000  # messages kept per page (the last ones: what led up to the end)
ENDED = "script_finished FINISHED_SUCCESSFULLY"  # a whole run's end, as `forward` writes it
START = time.time()  # every page's times count from here, so that two pages' lines compare


def _short(run_id: str) -> str:
    return run_id[-6:] if run_id else "-"


def forward(raw: bytes) -> str:
    """One ForwardMsg (server to browser) as a line."""
    msg = ForwardMsg()
    try:
        msg.ParseFromString(raw)
    except Exception as err:  # noqa: BLE001 - a frame that is not a ForwardMsg is shown, not fatal
        return f"<unparsed {len(raw)} bytes: {err}>"
    kind = msg.WhichOneof("type")
    run = msg.metadata.run
    frags = f" frag {','.join(f[-6:] for f in run.fragment_ids)}" if run.fragment_ids else ""
    who = f"run {_short(run.script_run_id)}{frags}"
    what = kind or "?"
    if kind == "delta":
        delta = msg.delta
        part = delta.WhichOneof("type")
        if part == "new_element":
            part = f"element {delta.new_element.WhichOneof('type')}"
        elif part == "add_block":
            part = "block"
        if delta.fragment_id:
            part += f" (frag {delta.fragment_id[-6:]})"
        what = f"delta {part} at {list(msg.metadata.delta_path)}"
    elif kind == "script_finished":
        what = f"script_finished {ForwardMsg.ScriptFinishedStatus.Name(msg.script_finished)}"
    elif kind == "page_info_changed":
        what = f"page_info ?{msg.page_info_changed.query_string[:160]}"
    elif kind == "new_session":
        new = msg.new_session
        what = f"new_session page {new.page_script_hash[-6:]} session {new.initialize.session_id[-6:]}"
    elif kind == "session_status_changed":
        what = f"status running={msg.session_status_changed.script_is_running}"
    elif kind == "auto_rerun":
        what = f"auto_rerun every {msg.auto_rerun.interval} s frag {msg.auto_rerun.fragment_id[-6:]}"
    elif kind == "ref_hash":
        what = f"ref_hash {msg.ref_hash[:8]} at {list(msg.metadata.delta_path)}"
    return f"{who}: {what}"


def back(raw: bytes) -> str:
    """One BackMsg (browser to server) as a line."""
    msg = BackMsg()
    try:
        msg.ParseFromString(raw)
    except Exception as err:  # noqa: BLE001
        return f"<unparsed {len(raw)} bytes: {err}>"
    kind = msg.WhichOneof("type")
    if kind == "rerun_script":
        r = msg.rerun_script
        frag = f" frag {r.fragment_id[-6:]}" if r.fragment_id else ""
        auto = " auto" if r.is_auto_rerun else ""
        return f"rerun{frag}{auto} page {r.page_script_hash[-6:]} ?{r.query_string[:160]}"
    return kind or "?"


class Wire:
    """The last KEEP messages of a page's websockets, decoded, with the time each arrived or left."""

    def __init__(self, page) -> None:
        self.log: collections.deque[str] = collections.deque(maxlen=KEEP)
        self.start = START
        self.ends: list[float] = []  # when each whole run's successful end reached the page (epoch seconds)
        page.on("websocket", self._socket)

    def _socket(self, ws) -> None:
        self.log.append(f"{time.time() - self.start:8.3f} socket open {ws.url}")
        ws.on("framereceived", lambda data: self._frame("<-", data, forward))
        ws.on("framesent", lambda data: self._frame("->", data, back))
        ws.on("close", lambda _ws: self.log.append(f"{time.time() - self.start:8.3f} socket closed"))

    def _frame(self, way: str, data, decode) -> None:
        if isinstance(data, str):
            line = f"text {data[:80]!r}"
        else:
            line = decode(bytes(data))
        now = time.time()
        if line.endswith(ENDED) and " frag " not in line:
            self.ends.append(now)
        self.log.append(f"{now - self.start:8.3f} {way} {line}")

    def mark(self, text: str, at: float | None = None) -> None:
        """A line of the caller's own (a change the teacher made), at `at` (epoch seconds) or now."""
        self.log.append(f"{(at or time.time()) - self.start:8.3f} == {text}")

    def lines(self, last: int = KEEP) -> list[str]:
        """The last messages, oldest first (the first line says when 0.000 was, in epoch seconds)."""
        return [f"   0.000 == the clock's zero: {self.start:.3f}", *sorted(self.log, key=_when)[-last:]]


def _when(line: str) -> float:
    return float(line.split(maxsplit=1)[0])
