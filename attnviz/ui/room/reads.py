"""The server's one class store and its shared read of each class: what every follower's page asks, read once.

A class's followers on one server ask the same thing many times a second (a heartbeat, a whole run, the runs a
teacher's change wakes at once): `moment` reads it at most once per PULSE_SHARED seconds for all of them, one read
at a time, and a whole run asks once (`run_moment`). A change made on this server `forget`s the read, so the runs it
wakes read it afresh.
"""

from __future__ import annotations

import functools
import threading
import time

import streamlit as st

from attnviz.api import class_records, class_store

MOMENTS_KEPT = 256  # classes whose shared read a server keeps
RUN_READ = "class.run_read"  # (code, Moment): this whole run's read of its class, shared by the seat, follow and panel
PULSE_SHARED = 0.05  # seconds: one read of a class's pulse serves every heartbeat of it on this server in this window
READ_WAIT = 5.0  # seconds a run waits for another's read of its class before making its own


@functools.cache  # one per process (a plain cache: no session can clear it)
def store() -> class_store.Store:
    """The one store of this server (ATTNVIZ_DB)."""
    return class_store.Store()


_moments: dict[str, tuple[float, class_records.Moment]] = {}
_reads: dict[str, threading.Event] = {}  # a class's read in flight: a run that needs the class meanwhile waits for it
_moments_lock = threading.Lock()


def moment(code: str) -> class_records.Moment | None:
    """The class, its newest poll and its removed students (Store.moment), read at most once per PULSE_SHARED seconds
    for all its followers on this server: 250 heartbeats a second cost the database about 20 reads, and a change is
    seen at most 0.05 s later. One read at a time: the runs a teacher's change wakes at once wait for the first one's
    read instead of each making its own (30 followers made about 20). None when the class does not exist or has
    ended."""
    now = time.monotonic()
    with _moments_lock:
        hit = _moments.get(code)
        if hit is not None and now - hit[0] < PULSE_SHARED:
            return hit[1]
        flight = _reads.get(code)
        mine = flight is None
        if flight is None:
            flight = _reads[code] = threading.Event()
    if not mine:  # another run is reading it: its read began after this call's window did, so it serves this call
        flight.wait(READ_WAIT)
        with _moments_lock:
            hit = _moments.get(code)
        if hit is not None and hit[0] >= now - PULSE_SHARED:
            return hit[1]
        return store().moment(code)  # that read failed, found no class or was forgotten: this call's own
    value = None
    try:
        value = store().moment(code)  # stamped with the time before the read: never newer than it claims
    finally:
        with _moments_lock:
            current = _reads.get(code) is flight  # not forgotten while it read (a change made meanwhile is newer)
            if current:
                del _reads[code]
            if current and value is not None:  # no class: not kept (a script trying codes would fill the dict)
                _moments[code] = (now, value)
                if len(_moments) > MOMENTS_KEPT:  # classes that ended or moved on: the oldest half goes
                    for old in sorted(_moments, key=lambda c: _moments[c][0])[: MOMENTS_KEPT // 2]:
                        del _moments[old]
        flight.set()
    return value


def run_moment(code: str) -> class_records.Moment | None:
    """The class as this whole run read it first (`moment`, once): the seat, follow and the panel agree on one read,
    and a follower's run costs the server's shared read once, not three times. The heartbeat reads `moment` itself."""
    kept = st.session_state.get(RUN_READ)
    if kept is not None and kept[0] == code:
        return kept[1]
    now = moment(code)
    st.session_state[RUN_READ] = (code, now)
    return now


def forget(code: str) -> None:
    """Drop this server's shared read of a class, and any read in flight: the next heartbeat (or run) reads it
    afresh, after whatever change made the caller forget it."""
    with _moments_lock:
        _moments.pop(code, None)
        _reads.pop(code, None)
