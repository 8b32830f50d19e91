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
go. Another lone test may then join it (the two class tests, in two files, run at once: about 70 s, against 100 s one
after the other, the machine's two cores each about half busy with one, 2026-11-30), but no test that is not alone:
one finds `lone` held after taking `room`, lets `room` go and waits until no lone test runs. Without xdist the locks
are one process's and cost nothing.
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


# Two lone tests run beside each other only from two workers: xdist's loadfile gives a worker a further file whenever
# it has two tests or fewer to run, so the worker given one lone test's file was often given the other's too, and ran
# them one after the other. The workers write the files with a lone test here as they collect (pytest_collection_
# modifyitems); the controller, which collects nothing, reads them when it schedules.
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


def apart(config, log):
    """xdist's loadfile scheduling, except that a worker with a lone test still to run is not given another lone test's
    file while a worker without one may take it (so two lone tests run beside each other, not one after the other).
    A worker is asked again each time it ends a test, so the file is given to it after its lone test at the latest."""
    from xdist.scheduler import LoadFileScheduling

    class Apart(LoadFileScheduling):
        def _reschedule(self, node) -> None:
            lone = lone_files()
            mine = self.assigned_work.get(node, {})
            waiting = any(scope in lone and not all(done.values()) for scope, done in mine.items())
            if waiting and self.workqueue and next(iter(self.workqueue)) in lone:
                return
            super()._reschedule(node)

    return Apart(config, log)
