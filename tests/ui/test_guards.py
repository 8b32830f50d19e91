"""The server's guards: a fragment's rerun that reaches a session whose runner is finishing waits for it to shut
down (Streamlit would start a second runner and drop the first one's undelivered messages). The clear_cache guard is
tested over the websocket in e2e/test_protocol.py; the class's browser tests and bench/load.py --class run this one
under load."""

import asyncio
from types import SimpleNamespace

import pytest
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.runtime.app_session import AppSession, AppSessionState
from streamlit.runtime.scriptrunner_utils.script_requests import RerunData, ScriptRequests

from attnviz.ui import guards


def _session(loop, requests):
    return SimpleNamespace(
        _scriptrunner=SimpleNamespace(_requests=requests), _event_loop=loop, _client_state=ClientState()
    )


def test_install_guards_rerun_requests_and_clear_cache_once():
    guards.install()
    guards.install()
    assert AppSession.request_rerun is guards._fragment_rerun_after_the_run
    assert AppSession._handle_clear_cache_request is guards._clear_own_session


def test_a_fragments_rerun_waits_while_the_runner_finishes_and_a_whole_pages_does_not(monkeypatch):
    taken = []
    loop = asyncio.new_event_loop()
    monkeypatch.setattr(guards, "_request_rerun", lambda session, state: taken.append((state, loop.time())))
    requests = ScriptRequests()
    requests.request_rerun(RerunData())
    requests.on_scriptrunner_ready()  # the runner takes that run
    assert requests.on_scriptrunner_ready().type.name == "STOP"  # its last line ran, nothing waits: it stops
    session = _session(loop, requests)
    assert guards.finishing(session)
    tick = ClientState(fragment_id="heartbeat", is_auto_rerun=True)
    page = ClientState(page_script_hash="abc")

    async def scenario():
        start = loop.time()
        guards._fragment_rerun_after_the_run(session, page)  # a whole page's rerun: at once, as Streamlit has it
        guards._fragment_rerun_after_the_run(session, tick)
        assert [s for s, _ in taken] == [page]
        await asyncio.sleep(0.05)
        assert len(taken) == 1  # still finishing: the tick waits
        session._scriptrunner = None  # the runner shut down (its SHUTDOWN event was handled)
        await asyncio.sleep(0.05)
        assert [s for s, _ in taken] == [page, tick] and taken[1][1] - start >= 0.05

    loop.run_until_complete(scenario())
    loop.close()


def test_a_runner_that_never_shuts_down_does_not_hold_a_request_for_ever(monkeypatch):
    taken = []
    monkeypatch.setattr(guards, "_request_rerun", lambda session, state: taken.append(state))
    monkeypatch.setattr(guards, "WAIT_MOST", 0.05)
    requests = ScriptRequests()
    requests.request_stop()
    loop = asyncio.new_event_loop()
    session = _session(loop, requests)
    tick = ClientState(fragment_id="heartbeat", is_auto_rerun=True)
    guards._fragment_rerun_after_the_run(session, tick)

    async def released() -> None:  # the request goes through once WAIT_MOST has passed: waited for, not slept
        while not taken:
            await asyncio.sleep(0.01)

    loop.run_until_complete(asyncio.wait_for(released(), timeout=5))
    loop.close()
    assert taken == [tick]


def test_a_fragments_rerun_from_a_page_the_session_has_left_is_dropped(monkeypatch):
    """A heartbeat sent from the Class page reaches a session whose run has just switched it to the Heads page: run,
    it would tell the browser the page is the Class page again and blank the Heads page. Dropped; a tick from the
    page the session is on, and a whole page's rerun from anywhere, go through."""
    taken = []
    monkeypatch.setattr(guards, "_request_rerun", lambda session, state: taken.append(state))
    requests = ScriptRequests()
    loop = asyncio.new_event_loop()
    session = _session(loop, requests)
    session._client_state = ClientState(page_script_hash="heads")  # the session's latest run is on Heads
    old_tick = ClientState(fragment_id="heartbeat", is_auto_rerun=True, page_script_hash="classroom")
    tick = ClientState(fragment_id="heartbeat", is_auto_rerun=True, page_script_hash="heads")
    back = ClientState(page_script_hash="classroom")  # the student clicks the Class page: a whole run
    for state in (old_tick, tick, back):
        guards._fragment_rerun_after_the_run(session, state)
    loop.close()
    assert taken == [tick, back]
    assert guards.left_page(session, old_tick) and not guards.left_page(session, tick)
    session._client_state = ClientState()  # no run yet: nothing to compare with
    assert not guards.left_page(session, old_tick)


def test_a_browser_still_asking_from_a_page_its_session_left_gets_the_sessions_page_drawn_whole(monkeypatch):
    """A browser that never received the run that switched its session to the Heads page keeps sending its heartbeat
    from the Class page; each is dropped (above), so nothing would ever change on it again. LEFT_GRACE after its first
    such tick, the session's own page is drawn whole for it (the session's page and URL state), once per grace."""
    import time

    taken = []
    monkeypatch.setattr(guards, "_request_rerun", lambda session, state: taken.append(state))
    monkeypatch.setattr(guards, "LEFT_GRACE", 0.05)
    loop = asyncio.new_event_loop()
    session = _session(loop, ScriptRequests())
    session._client_state = ClientState(page_script_hash="heads", query_string="old=1")
    session._client_state.widget_states.widgets.add(id="layer-slider", int_value=3)  # the session's own, last run's
    session._session_state = SimpleNamespace(query_params=SimpleNamespace(_query_params={"view": "Head", "layer": "3"}))
    old_tick = ClientState(
        fragment_id="heartbeat", is_auto_rerun=True, page_script_hash="classroom", query_string="class=ABC123"
    )
    old_tick.widget_states.widgets.add(id="question-radio", string_value="broad")
    guards._fragment_rerun_after_the_run(session, old_tick)
    guards._fragment_rerun_after_the_run(session, old_tick)
    assert taken == []  # its messages may still be on their way: dropped
    time.sleep(0.06)
    guards._fragment_rerun_after_the_run(session, old_tick)
    assert len(taken) == 1
    redraw = taken[0]
    assert (redraw.fragment_id, redraw.is_auto_rerun, redraw.page_script_hash) == ("", False, "heads")
    assert redraw.query_string == "view=Head&layer=3"  # the URL state its last run set
    assert [w.id for w in redraw.widget_states.widgets] == ["layer-slider"]  # not the Class page's widgets
    guards._fragment_rerun_after_the_run(session, old_tick)
    assert len(taken) == 1  # at most once per grace
    tick = ClientState(fragment_id="heartbeat", is_auto_rerun=True, page_script_hash="heads")
    guards._fragment_rerun_after_the_run(session, tick)  # the browser is on the session's page again
    assert taken[1:] == [tick] and not hasattr(session, guards.LEFT)
    loop.close()


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_the_theme_every_run_sends_is_read_from_the_config_once_and_equals_streamlits(monkeypatch):
    """Streamlit reads its whole configuration for the theme six times a run (a heartbeat's too); once guarded, each
    section is read once per server and every later message carries the same theme Streamlit would have made."""
    from streamlit import config
    from streamlit.proto.NewSession_pb2 import CustomThemeConfig
    from streamlit.runtime import app_session

    guards.install()
    monkeypatch.setattr(guards, "_themes", {})
    config.set_option("theme.primaryColor", "#336699")
    config.set_option("theme.base", "dark")
    try:
        reads = []
        real = config.get_options_for_section
        monkeypatch.setattr(config, "get_options_for_section", lambda s: reads.append(s) or real(s))
        mine = [CustomThemeConfig() for _ in range(3)]
        for msg in mine:
            app_session._populate_theme_msg(msg)
            app_session._populate_theme_msg(msg.light, "theme.light")
        theirs = CustomThemeConfig()
        guards._populate_theme(theirs)
        guards._populate_theme(theirs.light, "theme.light")
    finally:
        config.set_option("theme.primaryColor", None)
        config.set_option("theme.base", None)
    assert reads.count("theme") == 2 and reads.count("theme.light") == 2  # once guarded, once Streamlit's own
    assert all(m == theirs for m in mine) and theirs.primary_color == "#336699"
    assert not any(m.HasField("light") for m in mine) and not theirs.HasField("light")  # no [theme.light]: unset
    assert theirs.base == CustomThemeConfig.BaseTheme.DARK


def test_a_browser_still_asking_for_a_fragment_its_session_no_longer_has_gets_the_page_drawn_whole(monkeypatch):
    """Streamlit 1.67 drops, without a word, a fragment's rerun whose fragment a later whole run removed. A browser that
    never received that run keeps its old heartbeat's timer: every tick would be dropped and its page would never
    change again (a full `make test` saw a student stay on the Head view 10 s after the teacher took Layer, the server
    logging "The fragment with id ... does not exist anymore"). Dropped at first, as Streamlit would; LEFT_GRACE
    after the first, the session's page is drawn whole; a tick for a fragment it has goes through."""
    import time

    taken = []
    monkeypatch.setattr(guards, "_request_rerun", lambda session, state: taken.append(state))
    monkeypatch.setattr(guards, "LEFT_GRACE", 0.05)
    loop = asyncio.new_event_loop()
    session = _session(loop, ScriptRequests())
    session.has_fragment = lambda fragment_id: fragment_id == "new-heartbeat"
    session._state = AppSessionState.APP_IS_RUNNING  # a whole run in progress registers its fragments as it draws
    old = ClientState(fragment_id="old-heartbeat", is_auto_rerun=True, page_script_hash="heads")
    assert not guards.gone(session, old)
    session._state = AppSessionState.APP_NOT_RUNNING
    session._client_state = ClientState(page_script_hash="heads")
    session._session_state = SimpleNamespace(query_params=SimpleNamespace(_query_params={"view": "Layer"}))
    old = ClientState(fragment_id="old-heartbeat", is_auto_rerun=True, page_script_hash="heads")
    guards._fragment_rerun_after_the_run(session, old)
    assert taken == []
    time.sleep(0.06)
    guards._fragment_rerun_after_the_run(session, old)
    assert len(taken) == 1 and taken[0].fragment_id == "" and taken[0].query_string == "view=Layer"
    tick = ClientState(fragment_id="new-heartbeat", is_auto_rerun=True, page_script_hash="heads")
    guards._fragment_rerun_after_the_run(session, tick)
    assert taken[1:] == [tick]
    loop.close()


def test_a_timers_request_goes_without_the_widget_values_and_a_visitors_change_keeps_them(monkeypatch):
    """A heartbeat's widget values can be older than the session's (guards' docstring); a click's are the change."""
    taken = []
    monkeypatch.setattr(guards, "_request_rerun", lambda session, state: taken.append(state))
    session = _session(asyncio.new_event_loop(), ScriptRequests())  # idle: nothing finishing
    session._scriptrunner = None
    tick = ClientState(fragment_id="heartbeat", is_auto_rerun=True, query_string="class=ABC123")
    tick.widget_states.widgets.add(id="view", string_array_value={"data": ["Head"]})
    click = ClientState(query_string="class=ABC123")
    click.widget_states.widgets.add(id="view", string_array_value={"data": ["Layer"]})
    guards._fragment_rerun_after_the_run(session, tick)
    guards._fragment_rerun_after_the_run(session, click)
    assert [len(s.widget_states.widgets) for s in taken] == [0, 1]
    assert taken[0].fragment_id == "heartbeat" and taken[0].is_auto_rerun and taken[0].query_string == "class=ABC123"
    assert taken[1].widget_states.widgets[0].string_array_value.data == ["Layer"]
    assert len(tick.widget_states.widgets) == 1  # the browser's message itself is left as it came
    session._event_loop.close()


def test_a_timers_request_while_a_click_waits_to_run_leaves_the_clicks_values(monkeypatch):
    """Streamlit merges a request that waits for the runner with the next one, the next one's widget values winning: a
    heartbeat's request without values, merged after a student's picked answer, dropped the answer (the Send button
    stayed disabled under the radio button that showed it: a full `make test`, 2026-12-02). Here the runner's own
    queue (ScriptRequests) takes both requests as Streamlit's request_rerun would hand them over."""
    requests = ScriptRequests()
    requests.request_rerun(RerunData())
    requests.on_scriptrunner_ready()  # a run in progress: the next request waits

    def streamlit(session, state):  # Streamlit's request_rerun, as far as the runner's queue goes
        data = RerunData(
            query_string=state.query_string,
            widget_states=state.widget_states,
            fragment_id=state.fragment_id or None,
            is_auto_rerun=state.is_auto_rerun,
        )
        assert requests.request_rerun(data)

    monkeypatch.setattr(guards, "_request_rerun", streamlit)
    session = _session(asyncio.new_event_loop(), requests)
    click = ClientState(fragment_id="answering")
    click.widget_states.widgets.add(id="answer", string_value="broad")
    tick = ClientState(fragment_id="heartbeat", is_auto_rerun=True)
    tick.widget_states.widgets.add(id="answer", string_value="")  # the page's values when its timer fired
    guards._fragment_rerun_after_the_run(session, click)
    assert guards.waiting(session)
    guards._fragment_rerun_after_the_run(session, tick)
    waits = requests._rerun_data
    assert [(w.id, w.string_value) for w in waits.widget_states.widgets] == [("answer", "broad")]
    assert waits.fragment_id_queue == ["answering"]  # the tick went no further; its timer asks again
    assert requests.on_scriptrunner_ready().type.name == "RERUN"  # the click's run goes
    guards._fragment_rerun_after_the_run(session, tick)  # nothing waits now: the tick goes, without values
    assert requests._rerun_data.fragment_id_queue == ["heartbeat"] and not requests._rerun_data.widget_states.widgets
    session._event_loop.close()
