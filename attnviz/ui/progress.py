"""A progress bar that says what is happening and about how long is left: for long texts, whose pass takes seconds.

The work comes in phases (the model's forward pass, then the statistics), each reporting (done, total) as its
layers finish; each phase has a share of the bar, and the time left is extrapolated from the time so far.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import streamlit as st


class TimedProgress:
    """st.progress with phases and an estimate of the time left."""

    def __init__(self, phases: dict[str, float]) -> None:
        total = sum(phases.values())
        self.shares = {name: share / total for name, share in phases.items()}  # name -> fraction of the bar
        self.start = time.monotonic()
        self.bar = st.progress(0.0, text="Starting…")

    def phase(self, name: str) -> Callable[[int, int], None]:
        """The callback for one phase: its (done, total) moves the bar through that phase's share."""
        names = list(self.shares)
        before = sum(self.shares[n] for n in names[: names.index(name)])

        def report(done: int, total: int) -> None:
            frac = min(1.0, before + self.shares[name] * done / max(1, total))
            elapsed = time.monotonic() - self.start
            left = elapsed * (1 - frac) / frac if frac > 0.02 else None
            when = f" · about {left:.0f} s left" if left is not None and left >= 1 else ""
            self.bar.progress(frac, text=f"{name}: {done} of {total} layers{when}")

        return report

    def done(self) -> None:
        """Remove the bar."""
        self.bar.empty()
