"""The project's own tools as `make test` runs them."""

from __future__ import annotations

import tomllib

from conftest import ROOT


def test_mypy_runs_in_one_process_not_its_parallel_mode():
    """mypy 2.4's parallel mode gives each worker 3 s to start, and on a busy machine (make lint runs beside the
    suite) it failed "INTERNAL ERROR ... Failed to establish connection with worker": CI's fresh clone of d696a8d,
    with num_workers = 1, which is the parallel mode with one worker, not one process. Only 0 turns it off."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config.get("num_workers", 0) == 0
