"""Admission for heavy work: one server-wide budget, so that no one page can cost the others their turn.

Heavy work is what takes seconds to minutes and memory beyond a typed sentence's: a long text's first pass, a
generation, a benchmark, a live measurement, the knock-out and patching grids. Each asks for a ticket before it
starts, with an estimate of the memory it will add:

- at most `slots` run at once; the others wait in line, first come first served, and are told their place;
- the estimates of the work running together stay within `bound` bytes: a request whose own estimate is over the
  bound is refused at once, with a message; one that would fit alone waits until enough is free;
- one page (an owner: a browser session) has at most one heavy request running or waiting: a second is refused;
- at most `queue` wait at once: the next is refused ("the server is busy"), never left waiting for minutes.

The short path (a typed sentence on a loaded model) never asks: it never waits behind heavy work here.
A ticket is given back however the work ends: finished, failed, or stopped because its page was left (the
waiting callback is where a page's run learns that it was left, and raises).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

Waiting = Callable[[int, int], None]  # (place in line, 1-based; how many wait): called while a request waits


class Refused(RuntimeError):
    """Heavy work that will not be admitted; the message says why, in words for the person who asked."""


@dataclass
class _Ticket:
    owner: str
    what: str
    estimate: int
    started: float | None = None
    arrived: float = field(default_factory=time.monotonic)


class Admission:
    """The server's budget for heavy work (see the module's docstring). Thread-safe."""

    def __init__(self, slots: int, bound: int, queue: int) -> None:
        if slots < 1 or bound < 1 or queue < 0:
            raise ValueError("heavy work needs at least one slot, a positive bound and a queue of 0 or more")
        self.slots, self.bound, self.queue = slots, bound, queue
        self._cond = threading.Condition()
        self._running: list[_Ticket] = []
        self._waiting: list[_Ticket] = []

    def status(self) -> dict:
        """What runs and waits now: counts, bytes estimated in use, and each running job's name."""
        with self._cond:
            return {
                "running": [t.what for t in self._running],
                "waiting": len(self._waiting),
                "used": sum(t.estimate for t in self._running),
            }

    def _fits(self, ticket: _Ticket) -> bool:
        used = sum(t.estimate for t in self._running)
        return bool(
            self._waiting
            and self._waiting[0] is ticket
            and len(self._running) < self.slots
            and used + ticket.estimate <= self.bound
        )

    @contextmanager
    def admitted(
        self, owner: str, what: str, estimate: int, waiting: Waiting | None = None, every: float = 0.5
    ) -> Iterator[None]:
        """Run the block once this heavy request is admitted; Refused if it cannot be."""
        mb = estimate / 2**20
        if estimate > self.bound:
            raise Refused(
                f"{what} would need about {mb:,.0f} MB, more than this server gives heavy work "
                f"({self.bound / 2**20:,.0f} MB, ATTNVIZ_HEAVY_MB): shorten it, or ask the person running the server."
            )
        ticket = _Ticket(owner, what, max(0, int(estimate)))
        with self._cond:
            mine = [t.what for t in self._running + self._waiting if t.owner == owner]
            if mine:
                raise Refused(
                    f"This page already has heavy work under way ({mine[0]}): one at a time per page. Wait for it "
                    "to finish, then ask again."
                )
            if len(self._waiting) >= self.queue and not (not self._waiting and len(self._running) < self.slots):
                raise Refused(
                    f"The server is busy: {len(self._running)} heavy request(s) run and {len(self._waiting)} wait. "
                    "Try again in a minute; typed sentences on the loaded models still work meanwhile."
                )
            self._waiting.append(ticket)
        try:
            while True:
                with self._cond:
                    if self._fits(ticket):
                        self._waiting.remove(ticket)
                        ticket.started = time.monotonic()
                        self._running.append(ticket)
                        break
                    place, count = self._waiting.index(ticket) + 1, len(self._waiting)
                if waiting is not None:
                    waiting(place, count)  # a page's run may raise here: it was left, or asked to run again
                with self._cond:
                    if not self._fits(ticket):
                        self._cond.wait(every)
        except BaseException:
            with self._cond:
                if ticket in self._waiting:
                    self._waiting.remove(ticket)
                self._cond.notify_all()
            raise
        try:
            yield
        finally:
            with self._cond:
                self._running.remove(ticket)
                self._cond.notify_all()
