"""A class over replicas in Chromium: the teacher on one server, three students on another, one PostgreSQL between
them (the class on one server: test_browser_class.py)."""

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
)

from harness.server import free_port, start_server

pytestmark = SLOW_BROWSER


@pytest.mark.alone  # at a room's pace: the rest of the suite paused, the other class test beside it (tests/gate.py)
def test_a_class_over_two_servers_and_one_postgresql_follow_poll_reveal_and_restart(browser, tmp_path, postgres):
    """Replicas: the teacher on one server, three students on another, one PostgreSQL between them. The students
    follow, answer and see the reveal; the students' server restarts mid-class and nothing is lost."""
    from attnviz.liveclass.store import Store

    db = postgres.create()
    ports = [free_port(), free_port()]
    teacher_base, student_base = (f"http://127.0.0.1:{p}" for p in ports)
    env = {"ATTNVIZ_DB": db}
    procs = [start_server(p, tmp_path / f"server{i}.log", env) for i, p in enumerate(ports)]
    store, pages = Store(db), []
    try:
        teacher = _teacher(browser)
        pages.append(teacher)
        code, secret = _start_class(teacher, teacher_base)
        assert store.is_teacher(code, secret)  # the class is in PostgreSQL

        students = _students(browser, student_base, code)
        pages += students
        logs = (tmp_path / "server0.log", tmp_path / "server1.log")
        waits = _teacher_shows_a_head(teacher, teacher_base, code, secret, students, 3, 2, logs)
        print("follow waits across servers (s):", [round(w, 2) for w in waits])

        main = _ask(teacher, teacher_base, code, secret, 3)
        for pg, choice in zip(students[:2], ("broad", "self"), strict=True):
            _answer(pg, choice)
        main.get_by_text("answered 2 of 3").wait_for(timeout=10_000)

        # the students' server restarts mid-poll: their answers are kept, the third student still answers
        procs[1].terminate()
        procs[1].wait(timeout=30)
        procs[1] = start_server(ports[1], tmp_path / "server1-again.log", env)
        for pg in students:
            pg.reload()
        students[0].get_by_text("Your answer: broad").wait_for(timeout=60_000)
        _answer(students[2], "broad", timeout=60_000)
        main.get_by_text("answered 3 of 3").wait_for(timeout=10_000)

        class_bars = _reveal(teacher, main)
        for pg in students:
            pg.get_by_text("The model:").wait_for(timeout=15_000)
            assert dict(zip(*_bars(pg)[0].values(), strict=True)) == class_bars
        poll = store.current_poll(code)
        assert poll.revealed and store.results(poll.id) == {"broad": 2, "self": 1}
        for pg in pages:
            assert pg.locator("[data-testid=stException]").count() == 0
    finally:
        for pg in pages:
            pg.close()
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
        store.close()
