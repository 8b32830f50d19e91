"""AppTest of the Class page and the class seat: one voice per page, who may answer, whose answers, failures."""

import json
import time

import pytest
from apptest import APP, _ok
from conftest import SENTENCE
from streamlit.testing.v1 import AppTest

from attnviz.analysis import poll_answers
from attnviz.liveclass.database import FILE_CHECK_SECONDS
from attnviz.liveclass.store import Store
from attnviz.ui.room import reads as room_reads

VIEW = {
    "model": "default",
    "backend": "hf",
    "text": SENTENCE,
    "layer": 0,
    "head": 0,
    "query": 1,
    "key": 0,
    "kind": "self",
}


@pytest.fixture
def db(tmp_path, monkeypatch):
    from attnviz.ui.room import seat

    monkeypatch.setenv("ATTNVIZ_DB", str(tmp_path / "classes.db"))
    seat.store.cache_clear()  # the server's one store, opened again on this file
    yield Store(tmp_path / "classes.db")
    seat.store.cache_clear()


def _page(**params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = v
    return at.switch_page("app_pages/classroom.py").run()


def _poll(db, code, secret) -> int:
    return db.start_poll(code, secret, "head type", "What kind?", list(poll_answers.HEAD_TYPES), VIEW)


def _following(db, view: dict, sid: str):
    """A class showing `view`, and a student's page that follows it, after its first run: (at, code, secret)."""
    code, secret, _ = db.create_class()
    db.set_view(code, secret, view)
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"class": code, "sid": sid * 16})
    at.run()
    _ok(at)
    return at, code, secret


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_one_page_session_cycling_its_sid_and_class_stores_one_answer(db):
    code, secret, _ = db.create_class()
    a, b = "a" * 16, "b" * 16
    db.join(code, b)  # another student, following: if the page could take b's seat, b could answer
    at = _page(**{"class": code, "sid": a})
    _ok(at)
    poll = _poll(db, code, secret)
    at.run()
    at.radio(key=f"class.answer.{poll}").set_value("self").run()
    at.button(key=f"class.send.{poll}").click().run()
    _ok(at)
    for params in ({"class": "BAD"}, {"class": code, "sid": b}, {"class": "ZZZZZZ"}, {"class": code, "sid": b}):
        at.query_params.clear()
        at.query_params.update(params)
        at.run()
        _ok(at)
    assert at.session_state["class.student"] == a  # the page's first id, whatever the URL said since
    assert not [r for r in at.radio if r.key == f"class.answer.{poll}"]  # a has answered: no form
    assert db.count(poll) == 1 and db.answered(poll, b) is None


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_page_opened_after_the_question_cannot_answer_it(db):
    code, secret, _ = db.create_class()
    poll = _poll(db, code, secret)
    late = _page(**{"class": code, "sid": "c" * 16})
    _ok(late)
    assert any("asked before this page joined" in i.value for i in late.info)
    assert not [b for b in late.button if b.key == f"class.send.{poll}"]
    with pytest.raises(ValueError, match="asked before this page joined"):
        db.answer(poll, "c" * 16, "self")
    assert db.voters(poll) == 0 and db.count(poll) == 0


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_after_the_reveal_the_answers_with_names_are_the_teachers_only(db, bundled_hf):
    code, secret, _ = db.create_class()
    student = _page(**{"class": code, "sid": "d" * 16})
    poll = _poll(db, code, secret)
    db.join(code, "d" * 16, "Ada")
    db.answer(poll, "d" * 16, "self")
    db.reveal(code, secret, poll)
    student.run()
    _ok(student)
    labels = [d.proto.label for d in student.get("download_button")]
    assert labels and not any("CSV" in label for label in labels)  # the snapshot, not the names
    teacher = _page(**{"class": code, "teacher": secret})
    _ok(teacher)
    assert any("Answers (CSV)" in d.proto.label for d in teacher.get("download_button"))
    assert "Ada" in db.results_csv(code, secret, poll)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_class_database_that_fails_mid_class_is_the_apps_message_not_a_traceback(db):
    code, secret, _ = db.create_class()
    at = _page(**{"class": code, "sid": "e" * 16})
    _ok(at)
    db.path.write_bytes(b"this is not a database" * 500)  # the file is damaged while the class runs
    for wal in db.path.parent.glob("classes.db-*"):
        wal.unlink()
    time.sleep(FILE_CHECK_SECONDS + 0.1)  # a pooled connection checks its file at most once a second
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    said = " ".join(e.value for e in [*at.error, *at.sidebar.error, *at.sidebar.warning])
    assert "class" in said and ("database" in said or "could not" in said), said


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_locked_class_turns_new_pages_away_and_a_removed_student_is_out(db):

    code, secret, _ = db.create_class()
    inside = _page(**{"class": code, "sid": "f" * 16})
    _ok(inside)
    db.lock(code, secret, True)
    newcomer = _page(**{"class": code, "sid": "g" * 16})
    assert any("closed this class to new students" in w.value for w in newcomer.sidebar.warning)
    db.remove(code, secret, "f" * 16)  # from another server: this one sees it once its shared read is over
    time.sleep(room_reads.PULSE_SHARED + 0.02)
    inside.run()
    assert any("removed this page" in w.value for w in inside.sidebar.warning)
    assert "class.student" not in inside.session_state


def test_a_visitors_clear_cache_clears_their_own_session_not_the_servers_caches():
    import streamlit as st
    from streamlit.runtime.app_session import AppSession

    from attnviz.ui import guards

    calls = []

    @st.cache_resource
    def loaded() -> int:
        calls.append(1)
        return len(calls)

    guards.install()
    loaded()

    class Session:  # what the handler touches of an AppSession
        class _session_state:  # noqa: N801
            cleared = False

            @classmethod
            def clear(cls):
                cls.cleared = True

    AppSession._handle_clear_cache_request(Session())
    assert Session._session_state.cleared and loaded() == 1 and calls == [1]  # still cached


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_following_student_gets_the_export_buttons_behind_one_switch(db):
    at, code, secret = _following(db, {"page": "", "params": {"view": "Head", "layer": "2", "head": "3"}}, "h")
    assert at.slider(key="heads.head").value == 3 and len(at.get("download_button")) == 0
    at.toggle(key="heads.export.head.open").set_value(True).run()
    assert [b.proto.label for b in at.get("download_button")] == ["PNG", "SVG", "CSV", "JSON"]
    at.toggle(key="class.follow_toggle").set_value(False).run()  # exploring alone: the buttons as for anyone
    assert len(at.get("download_button")) == 4
    teacher = AppTest.from_file(APP, default_timeout=120)
    teacher.query_params.update({"class": code, "teacher": secret, "view": "Head"})
    teacher.run()
    assert len(teacher.get("download_button")) == 4


def test_followers_on_one_server_share_one_read_of_the_class_per_pulse_window(db, monkeypatch):
    from attnviz.ui.room import seat

    code, secret, _ = db.create_class()
    shared = seat.store()
    reads = []
    moment = shared.moment
    monkeypatch.setattr(shared, "moment", lambda c: reads.append(c) or moment(c))
    monkeypatch.setattr(room_reads, "_moments", {})
    first = [seat.moment(code) for _ in range(50)]  # fifty heartbeats at once
    assert len(reads) == 1 and all(m == first[0] for m in first) and first[0].info.version == 0
    db.set_view(code, secret, {"page": "inside", "params": {}})
    time.sleep(room_reads.PULSE_SHARED + 0.02)
    assert seat.moment(code).info.version == 1 and len(reads) == 2  # a change is seen one window later
    assert seat.moment("ZZZZZZ") is None and seat.moment("ZZZZZZ") is None and "ZZZZZZ" not in room_reads._moments


def test_runs_that_need_a_class_at_once_wait_for_one_read_and_a_forget_is_never_served_an_older_one(db, monkeypatch):
    import threading
    import types

    from attnviz.ui.room import seat

    code, secret, _ = db.create_class()
    shared = seat.store()
    reads, release = [], threading.Event()
    moment = shared.moment

    def slow(c):  # a read that takes as long as the test says
        reads.append(c)
        release.wait(5)
        return moment(c)

    waiting = []

    class Flight(threading.Event):  # a read in flight that counts the runs waiting for it
        def wait(self, timeout=None):
            waiting.append(1)
            return super().wait(timeout)

    monkeypatch.setattr(shared, "moment", slow)
    monkeypatch.setattr(room_reads, "_moments", {})
    monkeypatch.setattr(room_reads, "_reads", {})
    monkeypatch.setattr(room_reads, "threading", types.SimpleNamespace(Event=Flight))  # its reads' events only
    # "At once" exactly: every run's clock reads the same instant. On a loaded machine twenty threads took more than
    # PULSE_SHARED to start, and the later ones rightly made reads of their own (6 reads in one full run).
    instant = time.monotonic()
    monkeypatch.setattr(room_reads, "time", types.SimpleNamespace(monotonic=lambda: instant))
    got = []
    woken = [threading.Thread(target=lambda: got.append(seat.moment(code))) for _ in range(20)]  # a change's runs
    for t in woken:
        t.start()
    deadline = time.monotonic() + 10
    while (not reads or len(waiting) < 19) and time.monotonic() < deadline:  # the other nineteen wait for that read
        time.sleep(0.001)
    assert len(waiting) == 19, waiting  # none made its own read
    release.set()
    for t in woken:
        t.join(5)
    assert len(reads) == 1 and len(got) == 20 and {m.info.version for m in got} == {0}
    # A change made while a read is in flight: the runs it wakes (after forget) read afresh and see it.
    release.clear()
    monkeypatch.setattr(room_reads, "_moments", {})
    before = threading.Thread(target=seat.moment, args=(code,))  # a heartbeat, reading before the change
    before.start()
    while len(reads) < 2:
        time.sleep(0.001)
    db.set_view(code, secret, {"page": "inside", "params": {}})
    seat.forget(code)
    release.set()
    assert seat.moment(code).info.version == 1 and len(reads) == 3
    before.join(5)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_followers_whole_run_reads_its_class_once(db, monkeypatch):
    from attnviz.ui.room import seat

    at, code, secret = _following(db, {"page": "", "params": {"view": "Head", "layer": "2", "head": "3"}}, "r")
    shared = seat.store()
    reads = []
    moment = shared.moment
    monkeypatch.setattr(shared, "moment", lambda c: reads.append(c) or moment(c))
    monkeypatch.setattr(
        room_reads, "PULSE_SHARED", 0.0
    )  # no shared read: every read the run asks for reaches the store
    db.set_view(code, secret, {"page": "", "params": {"view": "Head", "layer": "4", "head": "1"}})
    at.run()
    _ok(at)
    # the seat, follow, the class panel and the heartbeat drawn in the run: one read among them (they made four)
    assert reads == [code] and at.session_state["class.version"] == 2


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_students_whole_run_ends_by_writing_what_it_drew_into_the_url_even_when_its_page_ended_early(db):
    from attnviz.ui.room import seat

    at, code, secret = _following(db, {"page": "", "params": {"view": "Head", "layer": "2", "head": "3"}}, "d")
    drawn, when = at.session_state["class.drawn"]
    assert drawn == "1.None.0" and abs(time.time() - when) < 60 and at.query_params[seat.DRAWN] == "1.None.0"
    poll = _poll(db, code, secret)
    time.sleep(room_reads.PULSE_SHARED + 0.02)  # the server's shared read of the class sees it
    at.run()
    assert at.session_state["class.drawn"][0] == f"1.{poll}.0" and at.query_params[seat.DRAWN] == f"1.{poll}.0"
    db.set_view(code, secret, {"page": "", "params": {"text": " "}})  # an empty text: the page says so and halts
    time.sleep(room_reads.PULSE_SHARED + 0.02)
    at.run()
    assert [w.value for w in at.warning] == ["The text is empty\\: type a sentence to see its attention\\."]
    assert at.session_state["class.version"] == 2 and at.query_params[seat.DRAWN] == f"2.{poll}.0"  # the frame ran on
    assert any("Following the teacher · view 2" in c.value for c in at.sidebar.caption)  # and its heartbeat is drawn
    teacher = AppTest.from_file(APP, default_timeout=120)
    teacher.query_params.update({"class": code, "teacher": secret})
    teacher.run()
    assert seat.DRAWN not in teacher.query_params and "class.drawn" not in teacher.session_state


def test_a_heartbeat_redraws_a_page_that_never_got_its_runs_end_after_a_grace_at_most_twice(db, monkeypatch):
    import streamlit as st

    from attnviz.ui.room import seat

    code, secret, _ = db.create_class()
    db.set_view(code, secret, {"page": "", "params": {}})
    seat.store().join(code, "c" * 16)
    asked, beats = [], []
    monkeypatch.setattr(st, "rerun", lambda scope="app": asked.append(scope))
    monkeypatch.setattr(st, "caption", lambda *a, **k: None)
    monkeypatch.setattr(st, "session_state", {})
    monkeypatch.setattr(st, "query_params", {})
    monkeypatch.setattr(room_reads, "_moments", {})
    monkeypatch.setattr(seat, "fragment_run", lambda: True)  # the browser's timer, not a whole run's own call
    monkeypatch.setattr(seat, "_keep_beating", lambda: beats.append(1))
    version = db.get(code).version
    st.session_state.update(
        {
            "class.code": code,
            "class.student": "c" * 16,
            "class.version": version,
            "class.page": "",
            "class.poll_mark": None,
            "class.seen_at": time.time(),
        }
    )
    st.session_state["class.drawn"] = ("1.None.0", time.time() - 10)
    st.query_params[seat.DRAWN] = "1.None.0"
    seat._beat()
    assert asked == [] and beats == [1]  # the browser has the run's end: a heartbeat is one read
    st.query_params[seat.DRAWN] = "0.None.0"  # it does not: the run's end never reached it
    st.session_state["class.drawn"] = ("1.None.0", time.time())
    seat._beat()
    assert asked == []  # not yet: a heartbeat sent before the end arrived may still be on its way
    st.session_state["class.drawn"] = ("1.None.0", time.time() - seat.DRAWN_GRACE - 0.1)
    for _ in range(4):
        seat._beat()
    assert asked == ["app"] * seat.REDRAWS and len(beats) == 6  # bounded; the interval is set again every beat
    st.session_state["class.drawn"] = ("2.None.0", time.time() - seat.DRAWN_GRACE - 0.1)  # a later run, also lost
    seat._beat()
    assert asked == ["app"] * (seat.REDRAWS + 1)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_follower_run_on_another_page_than_the_teachers_goes_back_to_it_though_the_view_is_taken(db):

    at, _, _ = _following(db, {"page": "inside", "params": {}}, "f")
    assert at.session_state["class.version"] == 1 and at.session_state["class.page"] == "inside"
    # A heartbeat sent before the switch reached the browser carries the old page: the session runs there again.
    time.sleep(room_reads.PULSE_SHARED + 0.02)
    at.switch_page("app_pages/heads.py").run()
    _ok(at)
    assert at.session_state["class.version"] == 1 and at.session_state["class.page"] == "inside"


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_followers_class_page_marks_the_poll_it_read_itself_not_the_servers_older_shared_read(db, monkeypatch):
    from attnviz.ui.room import seat

    at, code, secret = _following(db, {"page": seat.CLASS_PAGE, "params": {}}, "g")
    assert at.session_state["class.poll_mark"] is None and at.session_state["class.drawn"][0] == "1.None.0"
    monkeypatch.setattr(room_reads, "PULSE_SHARED", 60.0)  # the shared read stays the one from before the question
    poll = _poll(db, code, secret)
    assert seat.moment(code).poll is None
    at.run()  # the teacher moved to the Class page and asked at once: this run sees the question itself
    _ok(at)
    assert [r.key for r in at.radio] == [f"class.answer.{poll}"]
    # What it drew is what it marks: the next heartbeat, on a fresh shared read, finds nothing new to draw.
    assert at.session_state["class.poll_mark"] == [poll, False] and at.query_params[seat.DRAWN] == f"1.{poll}.0"


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_which_head_poll_asks_and_answers_in_the_teachers_mode_and_reveals_the_answered_heads_map(
    db, tiny_llama_dir, monkeypatch
):
    """The poll takes the zero/mean choice the teacher made, the reveal computes the grid in that mode (not zero
    always), and the map shown is the head the model answered, not the head the teacher showed last."""
    import json

    from attnviz.engines import registry
    from attnviz.interventions import ablation

    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(tiny_llama_dir.parent))
    folder = str(tiny_llama_dir)
    text = "When Anna and Peter went to the market, Peter handed the basket to"
    code, secret, _ = db.create_class()
    db.set_view(code, secret, {"page": "heads", "params": {"layer": "1", "head": "1"}})  # the teacher showed L1H1
    teacher = _page(**{"class": code, "teacher": secret, "model": folder, "text": text})
    _ok(teacher)
    teacher.radio(key="class.form").set_value("which head").run()
    teacher.radio(key="class.mode").set_value("mean").run()
    teacher.button(key="class.ask").click().run()
    _ok(teacher)
    poll = db.current_poll(code)
    assert poll.view["mode"] == "mean" and "mean ablation" in poll.question
    db.reveal(code, secret, poll.id)
    teacher.run()
    _ok(teacher)
    engine = registry.load(folder, "hf", "cpu")
    means = ablation.reference_means(engine, range(engine.n_layers), text)
    grid, _ = ablation.importance(engine, text, "mean", means=means)
    zero, _ = ablation.importance(engine, text, "zero")
    _, right = poll_answers.which_head(grid)
    assert poll_answers.which_head(zero)[1] != right  # on this text the two modes answer differently: the test can fail
    assert any(f"The model: **{right}**" in m.value for m in teacher.markdown)
    layer, head = (int(x) for x in right[1:].split("H"))
    titles = [json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "") for c in teacher.get("plotly_chart")]
    assert any(t.startswith(f"Layer {layer}, head {head}") for t in titles)
    assert not any(t.startswith("Layer 1, head 1") for t in titles) or right == "L1H1"


def _teacher(db, **params) -> tuple[AppTest, str, str]:
    code, secret, _ = db.create_class()
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"class": code, "teacher": secret, **params})
    at.run()
    _ok(at)
    return at, code, secret


def _follows(at: AppTest) -> bool:
    return "class.following" not in at.session_state or at.session_state["class.following"]


def _asked_about(at: AppTest) -> str:
    return next(h.value for h in at.subheader if h.value.startswith("Ask the class about"))


def test_the_poll_asks_about_the_last_head_the_teacher_showed_not_a_layer_another_page_named(db):
    """Heads, one head (layer 4, head 2); then the Model overview, whose rollout slider names a layer of its own;
    then the Class page: the question is about layer 4, head 2, shown on the Heads page."""
    at, code, _ = _teacher(db, view="Head", layer="4", head="2")
    assert db.get(code).view["lesson"]["layer"] == "4" and db.get(code).view["lesson"]["head"] == "2"
    at.switch_page("app_pages/overview.py").run()
    _ok(at)
    assert db.get(code).view["page"] == "overview"
    at.slider(key="ov.layer").set_value(6).run()  # the rollout up to layer 6: no head is shown
    _ok(at)
    at.switch_page("app_pages/classroom.py").run()
    _ok(at)
    assert _asked_about(at) == "Ask the class about layer 4, head 2"
    assert any("on the Heads page" in c.value for c in at.caption)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_layer_shown_whole_keeps_the_head_the_lesson_had_and_a_fresh_class_says_none_was_shown(db):
    code, secret, _ = db.create_class()
    at = _page(**{"class": code, "teacher": secret})  # the Class page first: no head shown yet
    assert _asked_about(at) == "Ask the class about layer 1, head 1"
    assert any("No head shown yet" in c.value for c in at.caption)
    at, code, _ = _teacher(db, view="Head", layer="2", head="5")
    assert (db.get(code).view["lesson"]["layer"], db.get(code).view["lesson"]["head"]) == ("2", "5")
    at.session_state["heads.view"] = "Layer"  # the segmented control, as a click sets it
    at.run()
    at.slider(key="heads.layer").set_value(3).run()  # every head of layer 3
    _ok(at)
    assert db.get(code).view["params"]["view"] == "Layer"
    at.switch_page("app_pages/classroom.py").run()
    assert _asked_about(at) == "Ask the class about layer 3, head 5"


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_following_student_who_moves_a_slider_stops_following_and_is_told_so(db):

    view = {
        "page": "",
        "params": {"view": "Head", "layer": "2", "head": "3", "model": "default", "backend": "hf", "text": SENTENCE},
    }
    at, code, _ = _following(db, view, "h")
    assert at.slider(key="heads.layer").value == 2 and _follows(at)
    at.slider(key="heads.layer").set_value(5).run()
    _ok(at)
    assert not _follows(at)
    assert db.students(code) == (1, 0)  # the teacher's count of who follows says so too
    assert any("You changed the view (layer)" in w.value for w in at.sidebar.warning)
    assert at.toggle(key="class.follow_toggle").value is False
    time.sleep(room_reads.PULSE_SHARED + 0.02)
    at.run()
    assert at.slider(key="heads.layer").value == 5  # their own view: not taken back by the next run
    at.toggle(key="class.follow_toggle").set_value(True).run()  # rejoin: the teacher's view at once
    _ok(at)
    assert _follows(at) and at.slider(key="heads.layer").value == 2
    assert not any("You changed the view" in w.value for w in at.sidebar.warning)


@pytest.mark.slow  # two pages' runs
def test_a_phone_students_class_page_has_no_text_box_and_the_teachers_has(db, monkeypatch):
    """A phone's Text box stands in the main area of the pages that read the text; a student's Class page shows the
    teacher's polls, and a text typed there would only leave following: none there. The teacher's page keeps it."""
    from attnviz.ui import controls

    monkeypatch.setattr(controls, "on_phone", lambda: True)
    view = {"page": "classroom", "params": {"model": "default", "backend": "hf", "text": SENTENCE}}
    student, code, secret = _following(db, view, "p")
    assert not [t for t in student.main.text_input if t.key == "phone.text"]
    teacher = _page(**{"class": code, "teacher": secret})
    _ok(teacher)
    assert [t for t in teacher.main.text_input if t.key == "phone.text"]


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_student_exploring_alone_is_told_so_in_the_main_area_and_rejoins_from_there(db):
    """A phone folds the sidebar, where the follow switch and its warning are: leaving is said in the main area too,
    above the page, with a Rejoin button that brings the teacher's view back at once."""
    from attnviz.ui.room.panel import EXPLORING

    view = {
        "page": "",
        "params": {"view": "Head", "layer": "2", "head": "3", "model": "default", "backend": "hf", "text": SENTENCE},
    }
    at, code, _ = _following(db, view, "m")
    main = [i.value for i in at.main.info]
    assert EXPLORING not in main and not any(b.key == "class.rejoin" for b in at.main.button)  # following: nothing
    at.slider(key="heads.layer").set_value(5).run()
    _ok(at)
    assert not _follows(at) and EXPLORING in [i.value for i in at.main.info]
    at.button(key="class.rejoin").click().run()
    _ok(at)
    assert _follows(at) and at.slider(key="heads.layer").value == 2 and at.toggle(key="class.follow_toggle").value
    assert EXPLORING not in [i.value for i in at.main.info] and db.students(code) == (1, 1)


def test_a_following_student_who_picks_another_model_stops_following_but_a_palette_is_their_own(db):
    view = {
        "page": "",
        "params": {
            "view": "Layer",
            "layer": "1",
            "model": "default",
            "backend": "hf",
            "text": SENTENCE,
            "palette": "viridis",
        },
    }
    at, code, _ = _following(db, view, "k")
    at.sidebar.selectbox(key="sb.palette").set_value(
        next(p for p in at.sidebar.selectbox(key="sb.palette").options if p != "viridis")
    ).run()
    _ok(at)
    assert _follows(at)  # how it looks is the student's own
    at.sidebar.selectbox(key="sb.choice").set_value("scratch").run()
    assert not _follows(at)
    assert any("You changed the view (model)" in w.value for w in at.sidebar.warning)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_the_teachers_projector_mode_is_their_screen_not_pushed_to_students(db):
    """A teacher at the front of the room in projector mode: the class's view carries no projector mode, so a phone
    student's page is not drawn at projector sizes; a student who turns it on for their own screen keeps it."""
    at, code, secret = _teacher(db, view="Head", layer="3", head="2", projector="true")
    assert at.sidebar.toggle(key="sb.projector").value is True  # the teacher's own screen
    view = db.get(code).view
    assert "projector" not in view["params"] and view["params"]["layer"] == "3"
    student = AppTest.from_file(APP, default_timeout=120)
    student.query_params.update({"class": code, "sid": "p" * 16})
    student.run()
    _ok(student)
    assert student.sidebar.toggle(key="sb.projector").value is False and _follows(student)
    assert student.slider(key="heads.layer").value == 3
    student.sidebar.toggle(key="sb.projector").set_value(True).run()  # their own screen: still following
    _ok(student)
    assert _follows(student)
    db.set_view(code, secret, {**view, "params": {**view["params"], "layer": "4"}})  # the teacher moves on
    time.sleep(room_reads.PULSE_SHARED + 0.02)
    student.run()
    _ok(student)
    assert student.slider(key="heads.layer").value == 4 and student.sidebar.toggle(key="sb.projector").value is True


def test_a_following_session_is_one_to_wake_and_one_exploring_alone_is_not(db):
    """The teacher's change wakes this server's following sessions at once (seat.wake; AppTest has no server to
    wake them in, the browser tests and bench/load.py --class do)."""
    from attnviz.ui.room import seat

    view = {
        "page": "",
        "params": {"view": "Head", "layer": "2", "head": "3", "model": "default", "backend": "hf", "text": SENTENCE},
    }
    at, code, _ = _following(db, view, "w")
    assert len(seat._awake[code]) == 1
    at.slider(key="heads.layer").set_value(4).run()  # the student explores alone now
    assert seat._awake[code] == set()
    assert seat.wake(code) == 0


def test_a_wake_reruns_the_whole_page_with_the_url_state_its_runs_set_last_not_the_browsers_older_one():
    """A heartbeat that saw the teacher's new view first has a run in progress with the new URL state; the session's
    saved client state still holds the browser's older URL until its runner ends. The wake's rerun preempts that run:
    with the older URL it would draw the old view under the new address bar, so it carries the session's own."""
    from types import SimpleNamespace

    from streamlit.proto.ClientState_pb2 import ClientState
    from streamlit.runtime.state.session_state import SessionState

    from attnviz.ui.room import seat

    browser = ClientState(query_string="class=ABCDEF&sid=s1&view=Layer&layer=1", page_script_hash="heads")
    browser.fragment_id, browser.is_auto_rerun = "heartbeat", True
    session_state = SessionState()
    session_state.query_params.populate_from_query_string("class=ABCDEF&sid=s1&view=Head&layer=2&head=4")
    state = seat.wake_state(SimpleNamespace(_client_state=browser, _session_state=session_state))
    assert state.query_string == "class=ABCDEF&sid=s1&view=Head&layer=2&head=4"
    assert (state.fragment_id, state.is_auto_rerun, state.page_script_hash) == ("", False, "heads")
    assert browser.fragment_id == "heartbeat"  # the session's own record is left as it was


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_follower_of_a_teacher_on_this_server_beats_slowly_and_of_one_on_another_replica_at_the_tick(db):
    """A view the teacher published from this server wakes its followers at once, so their heartbeat is only the net
    (seat.NET_SECONDS); a view published from another replica (or by no page) reaches them at the tick."""
    from attnviz.ui.room import seat

    _, code, secret = _teacher(db, view="Head", layer="2", head="3")
    view = db.get(code).view
    assert view["server"] == seat.SERVER
    assert seat.tick_seconds(db.moment(code)) == seat.NET_SECONDS > seat.TICK_SECONDS
    student = AppTest.from_file(APP, default_timeout=120)
    student.query_params.update({"class": code, "sid": "t" * 16})
    student.run()
    _ok(student)
    assert student.session_state["class.tick"] == seat.NET_SECONDS
    db.set_view(code, secret, {**view, "server": "another replica"})
    room_reads._moments.clear()
    assert seat.tick_seconds(db.moment(code)) == seat.TICK_SECONDS
    student.run()
    _ok(student)
    assert student.session_state["class.tick"] == seat.TICK_SECONDS
    assert seat.tick_seconds(None) == seat.TICK_SECONDS


def test_a_student_on_the_class_page_has_the_chart_library_loaded_before_the_first_map(db):
    """A student who joins while the teacher shows the join screen (the Class page) had drawn no chart, and their
    browser loaded plotly.js when the teacher's first map arrived (2 s of one follower's first change in Chromium,
    5-6 s for four on two cores). The student's Class page draws one empty chart and one empty table, hidden, so that
    their code loads there; the teacher's page, with charts of its own, has none."""
    from attnviz.ui.pages.classroom import WARM_CSS

    at, _, _ = _following(db, {"page": "classroom", "params": {}}, "w")
    warm = [c for c in at.get("plotly_chart") if c.proto.id and "class.warm" in c.proto.id]
    assert len(warm) == 1 and json.loads(warm[0].proto.spec)["data"] == []
    tables = [t for t in at.dataframe if t.value.empty]  # the table's code too (1.6 MB of it)
    assert len(tables) == 1 and tables[0].value.empty
    assert any(WARM_CSS in m.value for m in at.markdown)
    teacher = _page()
    teacher.button(key="class.start").click().run()
    _ok(teacher)
    assert not [c for c in teacher.get("plotly_chart") if c.proto.id and "class.warm" in c.proto.id]
