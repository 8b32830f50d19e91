"""A test marked `alone` runs with the rest of the suite paused: every other worker finishes the test it is in, then
waits until the lone test is done. Lone tests may run beside each other.

Why: a class test plays a room. A teacher's page and three students' pages, each a Chromium page, follow one server,
and each step waits for what a room would see within seconds. In a room every device has its own processor. In
`make test` the four pytest-xdist workers share this machine's two cores: beside three other workers' servers,
Chromium pages and wheel installs, a student's page took more than 10 s of wall time to follow the teacher, and a
teacher's results chart more than 30 s, though nothing was wrong (the fresh clones of a1393e4, 94a7cbd and 8ccda06,
docs/testing.md). A bound on those waits measured the machine the suite runs on, not the class.

How: three lock files (flock) in a folder this run's workers share (ENV). Every test passes through `gate` (shared,
at once let go) and holds `room` shared while it runs (setup, call and teardown: a module's server starts and stops
inside its first and last test). A lone test takes `gate` exclusive, so no test starts after it asks, then `room`
exclusive, so it waits for the tests already running; then it holds `lone` shared while it runs and lets the other two
go. Another lone test may then join it (the two class tests, a file each, run at once at the start of the run, as
`lone_first` below schedules them: about 70 s, against 100 s one after the other, when each kept one of the two cores
busy and the other idle, 2026-11-30), but no test that is not alone: one finds `lone` held after taking `room`, lets
`room` go and waits until no lone test runs. Without xdist the locks are one process's and cost nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

MARK = "alone"
ENV = "ATTNVIZ_TEST_GATE"  # the folder of this run's lock files (tests/conftest.py makes it; the workers inherit it)


@contextlib.contextmanager
def held(alone: bool) -> Iterator[None]:
    """Hold the room for one test: with lone tests only if `alone`, else with tests that are not alone."""
    where = Path(os.environ[ENV])
    with open(where / "gate", "a+") as gate, open(where / "room", "a+") as room, open(where / "lone", "a+") as lone:
        if alone:
            fcntl.flock(gate, fcntl.LOCK_EX)  # no other test starts from here on
            fcntl.flock(room, fcntl.LOCK_EX)  # the tests already running end
            fcntl.flock(lone, fcntl.LOCK_SH)  # lone tests run: another may join, no test that is not alone
            fcntl.flock(room, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)
            try:
                yield
            finally:
                fcntl.flock(lone, fcntl.LOCK_UN)
            return
        while True:
            fcntl.flock(gate, fcntl.LOCK_SH)  # waits while a lone test asks
            fcntl.flock(room, fcntl.LOCK_SH)
            fcntl.flock(gate, fcntl.LOCK_UN)
            try:
                fcntl.flock(lone, fcntl.LOCK_EX | fcntl.LOCK_NB)  # refused while a lone test runs
            except BlockingIOError:
                fcntl.flock(room, fcntl.LOCK_UN)  # a lone test joining them is not kept waiting
                fcntl.flock(lone, fcntl.LOCK_EX)  # until no lone test runs, then ask again
                fcntl.flock(lone, fcntl.LOCK_UN)
                continue
            fcntl.flock(lone, fcntl.LOCK_UN)  # none runs, and none starts while this test holds the room
            break
        try:
            yield
        finally:
            fcntl.flock(room, fcntl.LOCK_UN)


# Two lone tests run beside each other only from two workers at once. At the end of a run (their files were last) they
# did not: the worker given the second still had tests of another file before it, which waited while the first lone
# test ran (2026-11-30). So their files go first, each to a worker of its own, and no other file goes to any worker
# until the lone tests have ended (`lone_first`): they run at the start, beside each other, the other workers idle
# (make lint runs then, at nice 19). The workers write the files with a lone test here as they collect
# (pytest_collection_modifyitems); xdist's controller, which collects nothing, reads them when it schedules.
LONE_FILES = "lone-files"


def note_lone_files(files: set[str]) -> None:
    """Say which files (their node ids' part before "::") have a test marked `alone`: each worker writes the same."""
    where = Path(os.environ[ENV])
    part = where / f"{LONE_FILES}.{os.getpid()}"
    part.write_text("".join(f"{f}\n" for f in sorted(files)))
    part.replace(where / LONE_FILES)


def lone_files() -> set[str]:
    """The files with a lone test, as the workers collected them (none before they have)."""
    path = Path(os.environ[ENV]) / LONE_FILES
    return set(path.read_text().split()) if path.exists() else set()


def lone_first(config, log):
    """xdist's loadfile scheduling, except that while a lone test is left (queued or running), a worker with none of
    them is given only a file with one: a lone file goes to a worker each, first in line (a worker's crash puts its file
    back in the queue: first again), and the other workers wait. A worker with a lone test to run is given files as
    loadfile gives them (a worker runs a test once it knows the next, so it needs one behind its lone test; those wait
    at the gate for the other lone test). When the last lone test ends, every worker is asked again, twice, as xdist's
    first round does: at least two files, or one of three tests or more."""
    from xdist.scheduler import LoadFileScheduling

    class LoneFirst(LoadFileScheduling):
        lone: set[str] | None = None

        def _lone_left(self) -> bool:
            if self.lone is None:
                self.lone = lone_files()  # first asked in schedule(), when every worker has collected
            queued = [scope for scope in self.workqueue if scope in self.lone]
            for scope in reversed(queued):
                self.workqueue.move_to_end(scope, last=False)
            return bool(queued) or any(self._lone_pending(work) for work in self.assigned_work.values())

        def _lone_pending(self, work: dict[str, dict[str, bool]]) -> bool:
            return any(scope in (self.lone or ()) and not all(done.values()) for scope, done in work.items())

        def _held_back(self, node) -> bool:
            """Whether `node` waits: a lone test is left, none is the node's, and the next file in line has none."""
            return (
                bool(self.workqueue)
                and self._lone_left()
                and not self._lone_pending(self.assigned_work.get(node, {}))
                and next(iter(self.workqueue)) not in (self.lone or ())
            )

        def _assign_work_unit(self, node) -> None:
            if not self._held_back(node):
                super()._assign_work_unit(node)

        def _reschedule(self, node) -> None:
            if not self._held_back(node):
                super()._reschedule(node)

        def mark_test_complete(self, node, item_index: int, duration: float = 0) -> None:
            before = self._lone_left()
            super().mark_test_complete(node, item_index, duration)
            if before and not self._lone_left():  # the last lone test ended: the waiting workers are asked too,
                for other in self.nodes:  # twice, as xdist's first round asks each (its #277): a worker given one
                    self._reschedule(other)  # file of one test cannot run it (it knows no next), and waited until
                    self._reschedule(other)  # the run's end (the wheel's test, 44 s at one core after the rest)

    return LoneFirst(config, log)
