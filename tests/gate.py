"""A test marked `alone` runs with the rest of the suite paused: every other worker finishes the test it is in, then
waits until the lone test is done.

Why: a class test plays a room. A teacher's page and three students' pages, each a Chromium page, follow one server,
and each step waits for what a room would see within seconds. In a room every device has its own processor. In
`make test` the four pytest-xdist workers share this machine's two cores: beside three other workers' servers,
Chromium pages and wheel installs, a student's page took more than 10 s of wall time to follow the teacher, and a
teacher's results chart more than 30 s, though nothing was wrong (the fresh clones of a1393e4, 94a7cbd and 8ccda06,
docs/testing.md). A bound on those waits measured the machine the suite runs on, not the class.

How: two lock files (flock) in a folder this run's workers share (ENV). Every test passes through `gate` (shared,
at once let go) and holds `room` shared while it runs (setup, call and teardown: a module's server starts and stops
inside its first and last test). A lone test takes `gate` exclusive, so no test starts after it asks, then `room`
exclusive, so it waits for the tests already running. Without xdist the locks are one process's and cost nothing.
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
    """Hold the room for one test: exclusive if `alone`, else shared (after passing the gate)."""
    where = Path(os.environ[ENV])
    with open(where / "gate", "a+") as gate, open(where / "room", "a+") as room:
        if alone:
            fcntl.flock(gate, fcntl.LOCK_EX)  # no other test starts from here on
            fcntl.flock(room, fcntl.LOCK_EX)  # the tests already running end
        else:
            fcntl.flock(gate, fcntl.LOCK_SH)  # waits while a lone test has asked or runs
            fcntl.flock(room, fcntl.LOCK_SH)
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(room, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)
