"""The engine contract (engines/base.py): every engine offers what callers use; capabilities are checked by type."""

import pytest
import torch

from attnviz.engines import registry
from attnviz.engines.base import Engine, SteppingEngine, WhatIfEngine, run_with_cpu_fallback
from attnviz.result import ATTENTION_KINDS as KINDS


@pytest.fixture(scope="module")
def engines(bundled_hf, bundled_scratch, tiny_gpt2_dir, tiny_marian_dir):
    return {
        "bert hf": bundled_hf,
        "bert scratch": bundled_scratch,
        "dates": registry.load("dates"),
        "gpt2 hf": registry.load(str(tiny_gpt2_dir), "hf", "cpu"),
        "marian hf": registry.load(str(tiny_marian_dir), "hf", "cpu"),
    }


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_every_engine_satisfies_the_contract_and_returns_what_it_says(engines):
    for name, eng in engines.items():
        assert isinstance(eng, Engine), name
        assert eng.backend in ("hf", "scratch") and set(eng.kinds) <= set(KINDS), name
        results = eng.run(eng.encode("22/11/2026 is a date"))
        assert tuple(results) == eng.kinds, name
        enc = eng.encode("22/11/2026 is a date")
        source = results.get("self") or results["causal"]
        if eng.architecture != "encoder-decoder":
            assert source.source == enc.axis, name  # the result's tokens are what encode() says


def test_capabilities_are_declared_by_type_not_by_probing(engines):
    stepping = {name for name, eng in engines.items() if isinstance(eng, SteppingEngine)}
    what_if = {name for name, eng in engines.items() if isinstance(eng, WhatIfEngine)}
    assert what_if == {"bert scratch"}
    assert stepping == {"bert scratch", "gpt2 hf"}  # a decoder on attnviz's attention function steps as loaded


def test_engines_say_their_family_and_architecture(engines):
    got = {name: (eng.family, eng.architecture) for name, eng in engines.items()}
    assert got == {
        "bert hf": ("bert", "encoder"),
        "bert scratch": ("bert", "encoder"),
        "dates": ("dates", "encoder-decoder"),
        "gpt2 hf": ("gpt2", "decoder"),
        "marian hf": ("marian", "encoder-decoder"),
    }
    assert [registry.can_rebuild(e) for e in engines.values()] == [True, True, False, False, False]


def test_the_cpu_fallback_calls_whatever_it_is_given(bundled_scratch):
    value, notice = run_with_cpu_fallback(
        bundled_scratch, lambda: bundled_scratch, lambda e: e.run_causal(e.encode("a b"))
    )
    assert notice is None and set(value) == {"causal"}


# -- passes of many sessions at once ------------------------------------------------------------------------------


def _held_pass(engine, text: str):
    """A pass that stops at its first layer until released: (thread, entered, release)."""
    import threading

    from attnviz.engines.hooks import Hooks

    entered, release = threading.Event(), threading.Event()

    def hold(done: int, total: int) -> None:
        if done == 1:
            entered.set()
            release.wait(30)

    hooks = Hooks(read=("q",), progress=hold, n_layers=engine.n_layers)
    thread = threading.Thread(target=engine.forward, args=(engine.encode(text), hooks), daemon=True)
    thread.start()
    if not entered.wait(30):
        raise AssertionError("the held pass never reached its first layer")
    return thread, release


def _second_pass(engine, text: str):
    import threading

    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("r", engine.run(engine.encode(text))), daemon=True)
    thread.start()
    return thread, out


@pytest.fixture(scope="module")
def dynamic_rope_llama_dir(tiny_llama_dir, tmp_path_factory):
    """The tiny Llama with a 'dynamic' rotary table: transformers grows it in place, so its passes take turns."""
    import json
    import shutil

    folder = tmp_path_factory.mktemp("tiny-llama-dynamic")
    shutil.copytree(tiny_llama_dir, folder, dirs_exist_ok=True)
    config = json.loads((folder / "config.json").read_text())
    config["rope_scaling"] = {"rope_type": "dynamic", "factor": 2.0}
    config.pop("rope_parameters", None)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("which", ["llama hf", "llama scratch", "bert scratch"])
def test_a_short_pass_never_waits_for_another_sessions_pass_on_a_model_attnviz_knows(
    which, tiny_llama_dir, bundled_scratch
):
    if which == "bert scratch":
        engine = bundled_scratch
    else:
        hf = registry.load(str(tiny_llama_dir), "hf", "cpu")
        engine = hf if which == "llama hf" else registry.scratch_engine(hf)
    held, release = _held_pass(engine, "a long text that another page sent " * 4)
    try:
        second, out = _second_pass(engine, "The animal was tired.")
        second.join(30)
        assert not second.is_alive(), f"{which}: a typed sentence waited for another page's pass"
        weights = out["r"].main.weights  # (L, H, T, T)
        assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5)
        assert held.is_alive()  # the first pass is still held at its first layer
    finally:
        release.set()
        held.join(30)
    assert not held.is_alive()


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_model_whose_pass_changes_its_state_runs_one_pass_at_a_time(dynamic_rope_llama_dir):
    engine = registry.load(str(dynamic_rope_llama_dir), "hf", "cpu")
    assert engine.lazy  # a Llama on attnviz's attention: hooks work, only the rotary table keeps it in turn
    held, release = _held_pass(engine, "a long text that another page sent " * 4)
    second, out = _second_pass(engine, "The animal was tired.")
    second.join(1.0)
    waited = second.is_alive()
    release.set()
    held.join(30)
    second.join(30)
    assert waited, "a pass on a model with a dynamic rotary table ran beside another"
    assert not second.is_alive() and out["r"].main.weights.shape[-1] == len(engine.encode("The animal was tired.").ids)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_no_more_than_two_passes_of_one_model_run_at_once(bundled_scratch):
    """Each short pass may hold up to ATTNVIZ_EAGER_MB of weights: a third session waits for one of the two."""
    from attnviz.engines.base import SHARED_PASSES

    assert SHARED_PASSES == 2
    first, release_first = _held_pass(bundled_scratch, "one page's text " * 10)
    second, release_second = _held_pass(bundled_scratch, "another page's text " * 10)
    third, out = _second_pass(bundled_scratch, "The animal was tired.")
    third.join(1.0)
    waited = third.is_alive()
    release_first.set()
    third.join(30)
    release_second.set()
    first.join(30)
    second.join(30)
    assert waited, "a third pass ran beside two others"
    weights = out["r"].main.weights  # (L, H, T, T)
    assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5)


def test_a_long_text_s_feed_forward_goes_by_rows_and_equals_it_whole():
    from attnviz.engines.base import by_rows

    torch.manual_seed(0)
    ff = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.SiLU(), torch.nn.Linear(32, 8))
    x = torch.randn(1, 70, 8)
    calls: list[int] = []

    def counted(t):
        calls.append(t.shape[1])
        return ff(t)

    with torch.inference_mode():
        whole, rows = ff(x), by_rows(counted, x, rows=16)
    assert calls == [16, 16, 16, 16, 6]  # five blocks of positions, the last the rest
    assert (rows - whole).abs().max() < 1e-6 and rows.shape == whole.shape
    calls.clear()
    assert torch.equal(by_rows(counted, x, rows=16), ff(x)) and calls == [70]  # gradients kept: whole
    with torch.inference_mode():
        by_rows(counted, x[:, :16], rows=16)
        by_rows(counted, torch.randn(2, 40, 8), rows=16)  # a batch: whole
        assert calls == [70, 16, 40]
        pair = by_rows(lambda t: (ff(t), None), x, rows=16)  # not a tensor shaped as x (experts' outputs): whole
    assert isinstance(pair, tuple) and (pair[0] - whole).abs().max() < 1e-6
