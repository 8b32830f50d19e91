"""tests/gate.py: a test marked `alone` waits for the tests already running, and no test that is not alone starts until
it is done; lone tests run beside each other."""

from __future__ import annotations

import fcntl
import threading
import time
from types import SimpleNamespace

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


class _Worker:
    """What xdist's scheduler asks of a worker: the tests it is sent (indices in its collection), and its shutdown."""

    def __init__(self, name: str) -> None:
        self.name, self.sent, self.shutting_down = name, [], False
        self.gateway = SimpleNamespace(id=name)  # named in the scheduler's comparison of the collections

    def send_runtest_some(self, indices) -> None:
        self.sent += list(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def test_lone_files_go_first_a_worker_each_and_the_other_workers_wait_for_both(monkeypatch, tmp_path):
    """gate.lone_first with four workers: each lone file to a worker of its own at once, a file behind each (a worker
    runs a test once it knows the next), nothing to the two others until both lone tests have ended; then two files
    each, as xdist's own first round gives (a file of one test alone is a test its worker cannot run), every test sent
    exactly once, and every worker shut down (no worker left waiting for a next test)."""
    monkeypatch.setenv(gate.ENV, str(tmp_path))
    lone = ["t/test_class.py", "t/test_class_replicas.py"]
    gate.note_lone_files(set(lone))
    # test_c.py holds one test, as test_package.py does: the first file a waiting worker is given once the lone tests
    # end. Given it alone, that worker waited for a next test until the run's end (the wheel's test ran last, 44 s
    # at one core, the fresh clone of e61d44f).
    files = {n: 1 if n == "c" else 3 for n in "abcde"}
    collection = [f"{f}::test" for f in lone] + [f"t/test_{n}.py::test_{i}" for n, k in files.items() for i in range(k)]
    config = SimpleNamespace(getvalue=lambda name: ["4*popen"], option=SimpleNamespace(loadscopereorder=False))
    sched = gate.lone_first(config, None)
    workers = [_Worker(f"gw{i}") for i in range(4)]
    for w in workers:
        sched.add_node(w)
        sched.add_node_collection(w, collection)
    sched.schedule()
    firsts = {w.name: collection[w.sent[0]] for w in workers if w.sent}
    assert sorted(firsts.values()) == sorted(f"{f}::test" for f in lone)  # two workers, a lone file each, first
    assert all(len(w.sent) > 1 for w in workers if w.sent)  # and a file behind it
    idle = [w for w in workers if not w.sent]
    assert len(idle) == 2

    done: list[str] = []
    for step in range(100):  # each worker that may run a test (it knows the next, or it is shutting down) runs one
        for w in workers:
            pending = [i for i in w.sent if collection[i] not in done]
            if pending and (len(pending) > 1 or w.shutting_down):
                done.append(collection[pending[0]])
                sched.mark_test_complete(w, pending[0])
                for v in workers:  # no worker holds one test it cannot run (it knows no next) while files wait
                    stuck = len([i for i in v.sent if collection[i] not in done]) == 1 and not v.shutting_down
                    assert not (stuck and sched.workqueue), (step, v.name, list(sched.workqueue))
        if not all(f"{f}::test" in done for f in lone):
            assert all(not w.sent for w in idle), step  # nothing for the idle workers while a lone test is left
        if len(done) == len(collection):
            break
    assert sorted(done) == sorted(collection)  # each test once, none left waiting
    assert all(w.shutting_down for w in workers) and sched.tests_finished
