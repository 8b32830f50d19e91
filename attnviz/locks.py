"""One process at a time: an exclusive lock on a file, held for a block (fcntl's flock, released by the system when the
process dies, so a crash leaves nothing to clean up). A corpus run's folder (corpus/run.py) and a bundled model's
conversion (engines/bundles.py) are each done by one process while another waits, then reads what the first wrote."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def one_at_a_time(path: Path) -> Iterator[bool]:
    """Hold the lock on `path` (created if absent) for the block; another process entering waits here. Yields whether
    it locked: not where the file cannot be opened for writing (a read-only folder) or there is no fcntl (Windows)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on Linux or macOS
        yield False
        return
    try:
        handle = open(path, "a")  # noqa: SIM115  (closed below, after the block)
    except OSError:
        yield False
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
