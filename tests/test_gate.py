"""tests/gate.py: a test marked `alone` waits for the tests already running, and no test that is not alone starts until
it is done; lone tests run beside each other."""

from __future__ import annotations

import fcntl
import threading
import time

import gate


def test_a_lone_test_waits_for_the_running_ones_and_holds_back_the_next(monkeypatch, tmp_path):
    monkeypatch.setenv(gate.ENV, str(tmp_path))
    events: list[str] = []
    running, asked = threading.Event(), threading.Event()

    def worker(name: str, alone: bool, hold: float, before: threading.Event | None = None) -> None:
        if before is not None:
            before.wait(5)
        with gate.held(alone):
            events.append(f"{name} starts")
            if name == "first":
                running.set()
            time.sleep(hold)
            events.append(f"{name} ends")

    first = threading.Thread(target=worker, args=("first", False, 0.6))
    lone = threading.Thread(target=worker, args=("lone", True, 0.4, running))
    later = threading.Thread(target=worker, args=("later", False, 0.0, asked))
    first.start(), lone.start()
    running.wait(5)
    _until_held(tmp_path / "gate")  # the lone test has asked: it holds the gate and waits on the room
    asked.set()
    later.start()
    for t in (first, lone, later):
        t.join(10)
    assert events == ["first starts", "first ends", "lone starts", "lone ends", "later starts", "later ends"]


def _until_held(path, seconds: float = 10.0) -> None:
    """Wait until another open file holds `path` exclusively (a shared lock of ours is refused)."""
    end = time.monotonic() + seconds
    with open(path, "a+") as f:
        while time.monotonic() < end:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return
            fcntl.flock(f, fcntl.LOCK_UN)
            time.sleep(0.01)
    raise AssertionError(f"nothing took {path} exclusively in {seconds} s")


def test_tests_that_are_not_alone_run_side_by_side(monkeypatch, tmp_path):
    monkeypatch.setenv(gate.ENV, str(tmp_path))
    inside = threading.Barrier(3, timeout=5)  # all three in the room at once, or BrokenBarrierError

    def worker() -> None:
        with gate.held(False):
            inside.wait()

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not inside.broken


def test_lone_tests_run_side_by_side_and_the_others_wait_for_both(monkeypatch, tmp_path):
    """The second lone test joins the first (both in the room at once), a test that is not alone and comes while they
    run starts after both have ended, and one that was running when they asked ends before either starts."""
    monkeypatch.setenv(gate.ENV, str(tmp_path))
    events: list[str] = []
    together = threading.Barrier(2, timeout=5)  # both lone tests inside at once, or BrokenBarrierError
    running, inside = threading.Event(), threading.Event()

    def lone(name: str) -> None:
        running.wait(5)
        with gate.held(True):
            events.append(f"{name} starts")
            together.wait()
            inside.set()
            time.sleep(0.3)
            events.append(f"{name} ends")

    def other(name: str, hold: float, before: threading.Event | None = None) -> None:
        if before is not None:
            before.wait(5)
        with gate.held(False):
            events.append(f"{name} starts")
            if name == "first":
                running.set()
            time.sleep(hold)
            events.append(f"{name} ends")

    threads = [
        threading.Thread(target=other, args=("first", 0.4)),
        threading.Thread(target=lone, args=("lone 1",)),
        threading.Thread(target=lone, args=("lone 2",)),
        threading.Thread(target=other, args=("later", 0.0, inside)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not together.broken
    assert events[:2] == ["first starts", "first ends"]
    assert sorted(events[2:4]) == ["lone 1 starts", "lone 2 starts"]
    assert sorted(events[4:6]) == ["lone 1 ends", "lone 2 ends"]
    assert events[6:] == ["later starts", "later ends"]
