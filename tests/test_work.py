"""The door's kept computations: one memo key per piece of work, computed once, heavy work through `admit`."""

import secrets

from attnviz import api, work


def test_the_same_work_asked_twice_is_one_entry_computed_once():
    key = ("a test's work", secrets.token_hex(4))  # a key no other test holds
    calls = []
    first = work.Work(key, lambda: calls.append("first") or 42)
    assert first.held() is None  # nothing is computed by asking
    assert first.get() == 42 and first.held() == 42
    assert work.Work(key, lambda: calls.append("second") or 0).get() == 42 and calls == ["first"]


def test_a_recipes_key_is_its_arguments_and_heavy_work_goes_through_admit(tiny_llama_dir):
    eng = api.engine(str(tiny_llama_dir))
    same = work.ablation_work(eng, "one two three", {0: [1]})
    assert same == work.ablation_work(eng, "one two three", {0: [1]})  # equal by key: one memo entry
    assert same != work.ablation_work(eng, "one two three", {0: [0]})
    assert not same.heavy and same.estimate == 0
    grid = work.importance_work(eng, "one two three four")
    asked = []
    increase, _ = grid.get(admit=lambda what, estimate, compute: asked.append((what, estimate)) or compute())
    n = eng.n_layers * eng.n_heads
    assert asked == [(f"knocking out each of {n} heads", work.GRID_BYTES)]
    assert tuple(increase.shape) == (eng.n_layers, eng.n_heads)
    assert (
        grid.get(admit=lambda *a: asked.append("again")) is grid.held() and asked[-1] != "again"
    )  # kept: not admitted
