"""A class in Chromium: a teacher and three students following, polling, revealing and surviving a restart, on one
server. Over two servers and one PostgreSQL: test_browser_class_replicas.py (a file of its own, so that the two lone
tests run beside each other: tests/gate.py). The join screen, one page on a shared server: test_browser_pages.py."""

from __future__ import annotations

import pytest
from browsing import (
    SLOW_BROWSER,
    _answer,
    _ask,
    _bars,
    _reveal,
    _start_class,
    _students,
    _teacher,
    _teacher_shows_a_head,
    _wait_for_view,
)

from harness.server import free_port, start_server

pytestmark = SLOW_BROWSER


@pytest.mark.alone  # at a room's pace: the rest of the suite paused, the other class test beside it (tests/gate.py)
def test_a_class_led_live_teacher_and_three_students_poll_reveal_and_restart(browser, tmp_path):
    """A teacher starts a class; three students follow it (each within 10 s; how fast is bench/class_browser.py's
    question); they answer a poll; the reveal counts them; the server restarts and the class and answers are still
    there; a student's browser cannot lead."""
    from attnviz.liveclass.store import Store

    db = tmp_path / "classes.db"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_server(port, tmp_path / "server1.log", {"ATTNVIZ_DB": str(db)})
    pages = []
    try:
        teacher = _teacher(browser)
        pages.append(teacher)
        code, secret = _start_class(teacher, base)
        assert Store(db).is_teacher(code, secret)

        students = _students(browser, base, code)
        pages += students

        # the teacher changes the view through the URL's own state, then through a widget
        waits = _teacher_shows_a_head(teacher, base, code, secret, students, 2, 4, (tmp_path / "server1.log",))
        main = teacher.locator("[data-testid=stMain]")
        main.locator("[data-testid=stButtonGroup]").get_by_text("Layer", exact=True).click()
        _wait_for_view(teacher, ("view=Layer",))
        waits += [_wait_for_view(s, ("view=Layer",)) for s in students]
        # Every student took each view. How fast is bench/load.py --class's question (a timed assertion here would
        # measure the machine running the test suite): print the waits, each counted from the previous student.
        print("follow waits (s):", [round(w, 2) for w in waits])

        # a poll: the teacher goes to the Class page (the students follow), asks what kind of head this is
        main = _ask(teacher, base, code, secret, 2)
        for pg, choice in zip(students, ("broad", "broad", "self"), strict=True):
            _answer(pg, choice)
        main.get_by_text("answered 3 of 3").wait_for(timeout=10_000)
        class_bars = _reveal(teacher, main)
        for pg in students:
            pg.get_by_text("The model:").wait_for(timeout=10_000)
            assert pg.get_by_role("button", name="Answers (CSV)").count() == 0  # the names are the teacher's
        assert teacher.get_by_role("button", name="Answers (CSV)").count() == 1

        # the server restarts: the class, the view and the answers are still there
        proc.terminate()
        proc.wait(timeout=30)
        proc = start_server(port, tmp_path / "server2.log", {"ATTNVIZ_DB": str(db)})
        teacher.goto(f"{base}/classroom?class={code}&teacher={secret}")
        main.get_by_text("The model:").wait_for(timeout=60_000)
        assert dict(zip(*_bars(teacher)[0].values(), strict=True)) == class_bars
        students[0].reload()
        students[0].get_by_text("Your answer: broad").wait_for(timeout=60_000)

        # a student's browser sends the teacher's commands without the secret: nothing changes
        before = Store(db).get(code)
        intruder = students[1]
        intruder.goto(f"{base}/?class={code}&teacher=not-the-secret&view=Head&layer=6&head=1")
        intruder.get_by_text("That teacher link's secret is not this class's").wait_for(timeout=30_000)
        intruder.goto(f"{base}/classroom?class={code}&sid=x{'1' * 15}")
        intruder.locator("[data-testid=stMain]").get_by_text("The model:").wait_for(timeout=30_000)
        assert intruder.locator("[data-testid=stMain]").get_by_role("button", name="Ask").count() == 0
        assert intruder.locator("[data-testid=stMain]").get_by_role("button", name="Reveal").count() == 0
        after = Store(db).get(code)
        assert (after.version, after.view) == (before.version, before.view)
        assert Store(db).current_poll(code).id == Store(db).current_poll(code).id
        for pg in pages:
            assert pg.locator("[data-testid=stException]").count() == 0
    finally:
        for pg in pages:
            pg.close()
        proc.terminate()
        proc.wait(timeout=30)
