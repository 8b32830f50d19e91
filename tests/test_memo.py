"""The shared memo: bounded in bytes and age, one computation per key."""

import contextlib
import threading
import time

import numpy as np
import torch

from attnviz.memo import Memo, nbytes


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_bytes_are_counted_through_containers_and_dataclasses(bundled_hf):
    r = bundled_hf.run(bundled_hf.encode("Count my bytes."))["self"]
    assert nbytes(torch.zeros(10, dtype=torch.float32)) == 40 and nbytes(np.zeros(4, dtype=np.float64)) == 32
    assert r.weights.nbytes <= nbytes({"self": r}) < r.weights.nbytes + 20_000


def test_least_recently_used_entries_go_first_when_the_budget_is_full():
    memo = Memo(max_bytes=100, ttl_seconds=60)
    for key in "abc":
        memo.get(key, lambda: torch.zeros(10))  # 40 bytes each
    assert memo.size == (2, 80)  # "a" went
    calls = []
    memo.get("b", lambda: calls.append("b"))
    memo.get("a", lambda: calls.append("a") or torch.zeros(10))
    assert calls == ["a"] and memo.size == (2, 80)  # "b" was a hit; "a" came back and pushed out "c"


def test_an_entry_larger_than_the_budget_is_returned_but_not_kept():
    memo = Memo(max_bytes=100, ttl_seconds=60)
    assert memo.get("big", lambda: torch.zeros(100)).numel() == 100
    assert memo.size == (0, 0)


def test_old_entries_expire():
    clock = Clock()
    memo = Memo(max_bytes=1000, ttl_seconds=10, clock=clock)
    memo.get("a", lambda: torch.zeros(1))
    clock.now = 11
    calls = []
    memo.get("a", lambda: calls.append(1) or torch.zeros(1))
    assert calls == [1]


def test_errors_are_not_kept():
    memo = Memo(max_bytes=1000, ttl_seconds=10)
    for _ in range(2):
        with contextlib.suppress(ValueError):
            memo.get("bad", lambda: (_ for _ in ()).throw(ValueError("no")))
    assert memo.misses == 2 and memo.size == (0, 0)


def test_many_threads_asking_for_one_key_share_one_computation():
    memo = Memo(max_bytes=10_000, ttl_seconds=60)
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.2)
        return torch.ones(3)

    threads = [threading.Thread(target=memo.get, args=("k", slow)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1] and memo.hits == 7


def test_a_memo_can_bound_its_entries_too():
    memo = Memo(2**40, 60.0, max_entries=2)
    for key in ("a", "b", "c"):
        memo.get(key, lambda key=key: key.upper())
    assert memo.size[0] == 2
    assert memo.get("a", lambda: "again") == "again"  # the least recently used went first
    assert memo.get("c", lambda: "never") == "C"
