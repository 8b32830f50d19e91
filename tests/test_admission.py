"""Admission for heavy work: slots, the memory bound, one request per page, a bounded line, tickets given back."""

import threading
import time

import pytest

from attnviz.admission import Admission, Refused

MB = 2**20


def _until(condition, timeout: float = 10.0) -> None:
    """Return once condition() holds (polled every 10 ms), or fail after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


def _hold(adm: Admission, owner: str, estimate: int, started: threading.Event, release: threading.Event, log: list):
    with adm.admitted(owner, owner, estimate):
        log.append(("start", owner))
        started.set()
        release.wait(10)
        log.append(("end", owner))


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_at_most_the_slots_run_at_once_and_the_line_is_first_come_first_served():
    adm = Admission(slots=1, bound=100 * MB, queue=4)
    log, release = [], threading.Event()
    first = threading.Event()
    threads = [threading.Thread(target=_hold, args=(adm, "p1", MB, first, release, log))]
    threads[0].start()
    first.wait(5)
    places = []
    for name in ("p2", "p3"):
        ev = threading.Event()
        t = threading.Thread(target=lambda n=name, e=ev: _wait_and_run(adm, n, e, release, log, places))
        t.start()
        threads.append(t)
        waiting = len(threads) - 1
        _until(lambda w=waiting: adm.status()["waiting"] == w)  # p2 is in line before p3 arrives
    assert adm.status()["running"] == ["p1"] and adm.status()["waiting"] == 2
    release.set()
    for t in threads:
        t.join(10)
    assert [e for e in log if e[0] == "start"] == [("start", "p1"), ("start", "p2"), ("start", "p3")]
    assert ("p2", 1) in places and ("p3", 2) in places  # each was told its place in line


def _wait_and_run(adm, owner, started, release, log, places):
    with adm.admitted(owner, owner, MB, lambda place, count: places.append((owner, place))):
        log.append(("start", owner))
        started.set()
        release.wait(10)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_estimates_together_stay_within_the_bound():
    adm = Admission(slots=3, bound=10 * MB, queue=4)
    release, log = threading.Event(), []
    a = threading.Event()
    t1 = threading.Thread(target=_hold, args=(adm, "big", 8 * MB, a, release, log))
    t1.start()
    a.wait(5)
    b = threading.Event()
    t2 = threading.Thread(target=_hold, args=(adm, "also-big", 5 * MB, b, release, log))
    t2.start()
    assert not b.wait(1.0)  # 8 + 5 > 10: it waits although a slot is free
    release.set()
    t1.join(5)
    t2.join(5)
    assert log.index(("end", "big")) < log.index(("start", "also-big"))


def test_over_the_bound_one_per_page_and_a_full_line_are_refused_with_messages():
    adm = Admission(slots=1, bound=10 * MB, queue=1)
    with pytest.raises(Refused, match="more than this server gives heavy work"), adm.admitted("p", "a text", 11 * MB):
        pass
    release, started = threading.Event(), threading.Event()
    t = threading.Thread(target=_hold, args=(adm, "p", MB, started, release, []))
    t.start()
    started.wait(5)
    with pytest.raises(Refused, match="one at a time per page"), adm.admitted("p", "another", MB):
        pass
    waiter = threading.Thread(target=_hold, args=(adm, "q", MB, threading.Event(), release, []))
    waiter.start()
    _until(lambda: adm.status()["waiting"] == 1)  # q is in line
    with pytest.raises(Refused, match="The server is busy"), adm.admitted("r", "a third", MB):
        pass
    release.set()
    t.join(5)
    waiter.join(5)
    assert adm.status() == {"running": [], "waiting": 0, "used": 0}


def test_a_ticket_is_given_back_when_the_work_fails_or_its_page_leaves_the_line():
    adm = Admission(slots=1, bound=10 * MB, queue=4)
    with pytest.raises(ZeroDivisionError), adm.admitted("p", "failing", MB):
        raise ZeroDivisionError
    assert adm.status()["running"] == []
    release, started = threading.Event(), threading.Event()
    t = threading.Thread(target=_hold, args=(adm, "busy", MB, started, release, []))
    t.start()
    started.wait(5)

    class Left(Exception):  # what a Streamlit run raises when its page is left
        pass

    def leave(place, count):
        raise Left

    with pytest.raises(Left), adm.admitted("leaver", "a benchmark", MB, leave):
        pass
    assert adm.status()["waiting"] == 0  # out of the line
    release.set()
    t.join(5)


def test_a_benchmark_stopped_mid_run_gives_its_ticket_back_and_keeps_nothing(bundled_hf):
    from attnviz import service
    from attnviz.analysis import pronoun_cases

    class Left(Exception):  # what Streamlit raises at a run's next update of its page once the page is left
        pass

    def progress(i: int) -> None:
        if i == 3:
            raise Left

    adm, key = Admission(1, 100 * MB, 2), ("stopped benchmark", id(progress))
    with pytest.raises(Left), adm.admitted("p", "a benchmark", MB):
        service.kept(
            key, lambda: service.pronoun_benchmark(bundled_hf, pronoun_cases.LESSON, "vote", progress), heavy=True
        )
    assert adm.status()["running"] == [] and service.cached_value(key) is None
