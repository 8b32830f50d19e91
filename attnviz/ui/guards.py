"""What one visitor's browser may not do to everyone on the server, and a page's run the server must not lose.

Streamlit answers a `clear_cache` message from any browser session by clearing every `st.cache_data` and
`st.cache_resource` of the server: one student's scripted websocket (or the "Clear cache" menu item) would drop
the loaded models and the scored benchmarks for the whole class. `install` makes that message clear the sender's
own session state only, which is all the menu item needs to mean for one person. The operator clears the server's
caches by restarting it.

A fragment's rerun (a follower's heartbeat tick, a widget inside a fragment) that reaches a session in the moment
between its script runner's last line and the delivery of that runner's last messages makes Streamlit 1.67 start a
new runner, and the session then ignores the old runner's undelivered events: the run's last elements and its end
never reach the browser (a page half drawn, or blank after a page switch; Streamlit's own comment in
`AppSession.request_rerun` describes it, for a removed fragment only). Under a class's load this is what left a
student's page blank or seconds behind. `install` makes such a request wait (a few milliseconds, polled) until the
old runner has shut down and its messages are out; a request that finds no runner, or a running one, goes at once.

A fragment's rerun also carries the page its browser was on when its timer fired. When a run has switched the session
to another page (a follower taking the teacher's page) and a heartbeat from the page before was already on its way,
Streamlit 1.67 runs that fragment on the old page: the browser, told the page changed back, clears the new page's
elements and the fragment draws only itself, leaving the main area blank under the new page's URL (a full
`make test` saw it: a student's URL took the teacher's head, the page stayed blank). `install` drops such a request;
the browser's timer asks again, from the page it now shows, within a tick. A browser that never got the switch (the
run's messages lost on the way) would ask from the old page for ever, every request dropped: the page stays where it
was under the new address, and nothing it shows changes again. So when a browser is still asking from a page its
session left LEFT_GRACE seconds after its first such request, `install` draws the session's own page again for it,
whole (at most once per LEFT_GRACE), and says so in the log. The same for a browser whose heartbeat names a fragment
its session no longer has, while no run is in progress (a whole run that drew a new heartbeat never reached it):
Streamlit 1.67 drops such a request without a word, so that browser too would never change again.

A browser sends every widget's value with each request, its timer's too, as its page holds them. A page busy drawing
(a slow phone, a loaded machine) has not yet applied the values a run set on the server, and its timer's request
brings back the ones from before: a full `make test` saw a follower take the teacher's Layer view, a heartbeat sent
meanwhile carry its picker's old "Head", and the next whole run take that for the student's own change ("exploring on
your own") and draw a head nobody chose. A timer's request is never a visitor's change (a change sends its own
request, with its values), so `install` drops the values it carries: such a run keeps those the session holds. And
where a request is already waiting to run (a click's, a student's answer picked), the timer's goes no further: Streamlit
merges a request that waits with the next one, the newer one's values winning, and the timer's empty values took the
waiting click's with them (a full `make test` saw a student's picked answer lost this way, the Send button left
disabled under a radio button that showed the choice). The waiting run goes; the timer asks again within a tick.

Every run's first message (a heartbeat's too) carries the server's theme, which Streamlit 1.67 reads afresh from its
whole configuration six times a run, on the server's one event loop: a tenth of the server's time under a class's
load (py-spy). The theme is fixed while a server runs (`attnviz serve` watches no files), so `install` reads each
section once and copies it into every later message.
"""

from __future__ import annotations

import logging
from urllib.parse import urlencode

from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.runtime import app_session
from streamlit.runtime.app_session import AppSession, AppSessionState
from streamlit.runtime.scriptrunner_utils.script_requests import ScriptRequestType

_INSTALLED = "_attnviz_clear_cache_guarded"
CLEARED_OWN = "a visitor's clear_cache cleared their own session only; the server's caches stay"
WAIT_STEP = 0.005  # seconds between looks at a finishing runner
WAIT_MOST = 2.0  # then the request goes through as Streamlit would take it
LEFT_GRACE = 1.5  # seconds a browser may keep asking from a page its session left before that page is drawn for it
LEFT = "_attnviz_left_since"  # on a session: (the page its browser still asks from, since when: the loop's clock)
REDRAWN_LEFT = "a browser kept asking from a page its session had left; its session's page drawn again"
REDRAWN_GONE = "a browser kept asking for a fragment its session no longer has; its session's page drawn again"
_request_rerun = AppSession.request_rerun  # Streamlit's own
_populate_theme = app_session._populate_theme_msg  # Streamlit's own
_themes: dict[str, bytes] = {}  # {config section: the theme message Streamlit made of it, serialised}


def _clear_own_session(session: AppSession) -> None:
    """A visitor's clear_cache: their own session state, not the server's caches."""
    session._session_state.clear()
    logging.getLogger("attnviz").warning(CLEARED_OWN)


def finishing(session: AppSession) -> bool:
    """Whether the session's script runner has run its last line but has not shut down yet (its last messages may
    still be on their way to the browser): a rerun request now would start a second runner."""
    runner = session._scriptrunner
    return runner is not None and runner._requests._state == ScriptRequestType.STOP


def waiting(session: AppSession) -> bool:
    """Whether a rerun request is waiting for the session's script runner (it will merge with the next one)."""
    runner = session._scriptrunner
    return runner is not None and runner._requests._state == ScriptRequestType.RERUN


def left_page(session: AppSession, client_state) -> bool:
    """Whether a fragment's rerun was asked for on a page the session has since left: the session's latest run
    (Streamlit notes each run's page when it starts) is on another page than the one the browser sent."""
    now, asked = session._client_state.page_script_hash, client_state.page_script_hash
    return bool(now) and bool(asked) and asked != now


def gone(session: AppSession, client_state) -> bool:
    """Whether a fragment's rerun names a fragment its session no longer has (a later whole run drew another): Streamlit
    1.67 drops such a request without a word, so a browser whose timer still holds that fragment (the whole run that
    replaced it never reached it) would never be drawn again."""
    has = getattr(session, "has_fragment", None)
    idle = getattr(session, "_state", None) == AppSessionState.APP_NOT_RUNNING  # a run in progress is still drawing
    return has is not None and idle and not has(client_state.fragment_id)  # its fragments: never a redraw then


def still_left(session: AppSession, asked: str) -> bool:
    """Whether the browser has asked from where its session left (`asked`: a page, or a fragment gone) for LEFT_GRACE
    seconds since its first such request (then the clock starts again: a redraw at most once per LEFT_GRACE)."""
    now = session._event_loop.time()
    since = getattr(session, LEFT, None)
    if since is None or since[0] != asked:
        setattr(session, LEFT, (asked, now))
        return False
    if now - since[1] < LEFT_GRACE:
        return False
    setattr(session, LEFT, (asked, now))
    return True


def whole_page(session: AppSession) -> ClientState:
    """The request that draws the session's own page whole, as its last run left it: its page, widget values and the
    URL state its runs have set last (a wake, seat.wake_state; a browser stuck on a page it should have left).

    Not the URL the session keeps with its page (`_client_state`), which it takes only at the end of its last script
    runner: a run in progress that has just taken the teacher's view has set a new URL state, and a rerun with the
    old one would preempt it and draw the old view under the new URL, for good (a full `make test` saw a follower's
    URL take a head while its page never showed it)."""
    state = ClientState()
    state.CopyFrom(session._client_state)
    state.fragment_id, state.is_auto_rerun = "", False  # the whole page, not a fragment
    try:
        now = dict(session._session_state.query_params._query_params)
    except (AttributeError, RuntimeError):  # another Streamlit's internals, or changed while read: the last run's
        return state
    state.query_string = urlencode(now, doseq=True)
    return state


def timer_request(client_state: ClientState) -> ClientState:
    """A timer's request without the widget values the browser sent with it (the module's docstring says why)."""
    out = ClientState()
    out.CopyFrom(client_state)
    out.ClearField("widget_states")
    return out


def _fragment_rerun_after_the_run(session: AppSession, client_state, waited: float = 0.0) -> None:
    """Streamlit's request_rerun, except for a fragment's rerun: dropped when it was asked for on a page the session
    has left (the session's page drawn whole for a browser that keeps asking from there), and held while the runner
    is finishing; a timer's request (any run_every fragment's) without the widget values it carries, and none at all
    while another waits to run (merged with it, its empty values would replace the waiting one's)."""
    if client_state is not None and client_state.is_auto_rerun:
        if waiting(session):
            logging.getLogger("attnviz").debug("a timer's request while another waits to run: dropped")
            return
        if len(client_state.widget_states.widgets):
            client_state = timer_request(client_state)
    if client_state is not None and client_state.fragment_id:
        left, lost = left_page(session, client_state), gone(session, client_state)
        if left or lost:
            asked = client_state.page_script_hash if left else f"fragment {client_state.fragment_id}"
            if still_left(session, asked):
                logging.getLogger("attnviz").warning(REDRAWN_LEFT if left else REDRAWN_GONE)
                _request_rerun(session, whole_page(session))
            else:
                logging.getLogger("attnviz").debug("a fragment rerun from a page or fragment the session left: dropped")
            return
        if hasattr(session, LEFT):
            delattr(session, LEFT)
        if waited < WAIT_MOST and finishing(session):
            loop = session._event_loop
            loop.call_later(WAIT_STEP, _fragment_rerun_after_the_run, session, client_state, waited + WAIT_STEP)
            return
    _request_rerun(session, client_state)


def _theme_read_once(msg, section: str = "theme") -> None:
    """Streamlit's theme message for a config section, made once per server and copied after that."""
    made = _themes.get(section)
    if made is None:
        fresh = type(msg)()
        _populate_theme(fresh, section)
        made = _themes[section] = fresh.SerializeToString()
    if made:  # an empty section leaves the message unset, as Streamlit does (merging b"" would mark it present)
        msg.MergeFromString(made)


def install() -> None:
    """Guard the server (once per process; later calls do nothing)."""
    if getattr(AppSession, _INSTALLED, False):
        return
    # Replacing two of Streamlit's methods is the point here (the module's docstring says why), so mypy is told so.
    AppSession._handle_clear_cache_request = _clear_own_session  # type: ignore[method-assign,assignment]
    AppSession.request_rerun = _fragment_rerun_after_the_run  # type: ignore[method-assign,assignment]
    app_session._populate_theme_msg = _theme_read_once
    setattr(AppSession, _INSTALLED, True)
