"""The bad-input corpus (tests/data/bad_inputs.json) through the engines, the command line and every page."""

import json

import pytest
import torch
from conftest import ROOT
from streamlit.testing.v1 import AppTest

from attnviz.__main__ import main
from attnviz.engines import base, registry
from attnviz.engines.base import ModelLoadError

CORPUS = json.loads((ROOT / "tests/data/bad_inputs.json").read_text(encoding="utf-8"))
TEXTS = [(t["name"], t["text"] if "text" in t else t["repeat"] * t["times"], t["expect"]) for t in CORPUS["texts"]]
MODELS = [(m["name"], m["model"]) for m in CORPUS["models"]]
PAGES = ["app_pages/heads.py", "app_pages/inside.py", "app_pages/overview.py", "app_pages/compare.py"]


@pytest.mark.parametrize(("name", "text", "expect"), TEXTS, ids=[t[0] for t in TEXTS])
def test_engines_give_a_message_or_a_valid_result(name, text, expect, bundled_hf, bundled_scratch):
    for engine in (bundled_hf, bundled_scratch):
        if expect == "message":
            with pytest.raises(ValueError):
                engine.run(text)
            continue
        r = next(iter(engine.run(text).values()))
        assert torch.allclose(r.weights.sum(-1), torch.ones(r.weights.shape[:3]), atol=1e-5)
        assert (r.truncated > 0) == (expect == "truncated")


@pytest.mark.parametrize(("name", "text", "expect"), TEXTS, ids=[t[0] for t in TEXTS])
def test_command_line_exits_0_or_2_never_crashes(name, text, expect, capsys):
    code = main(["attention", text, "--device", "cpu"])
    assert code == (2 if expect == "message" else 0)
    if code == 2:
        assert "error" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "model"), MODELS, ids=[m[0] for m in MODELS])
def test_bad_model_names_are_refused_by_the_app_loader(name, model):
    with pytest.raises(ModelLoadError, match='"default"'):
        registry.load(model, allow_paths=False)


def test_the_app_loader_never_opens_folders_outside_the_model_folders(tmp_path, monkeypatch):
    monkeypatch.setenv(registry.MODEL_DIRS_ENV, str(tmp_path / "models"))
    for outside in ("/etc", str(tmp_path), "../../etc", str(tmp_path / "models")):
        with pytest.raises(ModelLoadError):
            registry.resolve(outside, allow_paths=False)


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize(
    ("name", "text", "expect"),
    [t for t in TEXTS if "100,000" not in t[0]],
    ids=[t[0] for t in TEXTS if "100,000" not in t[0]],
)
def test_every_page_shows_a_message_or_a_picture(page, name, text, expect):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["text"] = text
    at.query_params["source"] = "bert"  # the Compare page's mode that reads the sidebar's text
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.warning if expect == "message" else at.get("plotly_chart")


@pytest.mark.parametrize(("name", "model"), MODELS, ids=[m[0] for m in MODELS])
def test_a_bad_model_in_a_link_opens_the_default_with_a_notice(name, model):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["model"] = model
    at.run()
    assert not at.exception and not at.error and at.get("plotly_chart")
    assert at.info and "does not offer" in at.info[0].value
    other = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()  # another session, same server
    assert not other.exception and not other.error and other.get("plotly_chart")


def test_gpu_out_of_memory_reruns_on_the_cpu_with_a_notice(bundled_hf, monkeypatch):
    gpu = registry.load("default", "hf", "cpu")  # a separate instance to break
    monkeypatch.setattr(gpu, "device", torch.device("cuda"))

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(gpu, "run", out_of_memory)  # what a real GPU forward raises, surfacing from run()
    results, notice = base.run_with_cpu_fallback(gpu, lambda: bundled_hf, lambda e: e.run("The GPU is full."))
    assert notice == base.OOM_NOTICE
    assert torch.equal(results["self"].weights, bundled_hf.run("The GPU is full.")["self"].weights)


def test_out_of_memory_on_the_cpu_is_not_hidden(bundled_hf, monkeypatch):
    cpu = registry.load("default", "hf", "cpu")
    monkeypatch.setattr(cpu.model, "forward", lambda *a, **k: (_ for _ in ()).throw(torch.OutOfMemoryError("x")))
    with pytest.raises(torch.OutOfMemoryError):
        base.run_with_cpu_fallback(cpu, lambda: bundled_hf, lambda e: e.run("text"))


def test_a_server_input_limit_cuts_and_says_so(monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MAX_TOKENS", "8")
    r = registry.load("default", "hf", "cpu").run("one two three four five six seven eight nine ten")["self"]
    assert len(r.target_tokens) == 8 and r.truncated == 12 - 8
    monkeypatch.setenv("ATTNVIZ_MAX_TOKENS", "lots")
    with pytest.raises(ValueError, match="ATTNVIZ_MAX_TOKENS"):
        registry.load("default", "hf", "cpu")


def test_nothing_depends_on_torch_s_process_wide_default_dtype(bundled_hf):
    """transformers sets the default dtype while it loads; a float16 default must not reach our tensors."""
    from attnviz.analysis import cost, head_stats, rollout
    from attnviz.engines.seq2seq import sinusoidal_positions

    reference = bundled_hf.run("A default dtype test.")["self"]
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float16)
    try:
        scratch = registry.load("default", "scratch", "cpu")  # built while the default is float16
        r = scratch.run("A default dtype test.")["self"]
        assert (r.weights - reference.weights).abs().max() < 1e-5
        steps, demo = cost.demo_run(cost.demo_attention(64, 4), r.target, causal=True)
        assert steps.weights.dtype == torch.float32 and demo.weights.dtype == torch.float32
        assert sinusoidal_positions(8, 16).dtype == torch.float32
        assert registry.load("dates").run("22/11/2026")["cross"].weights.dtype == torch.float32
        assert all(v.dtype == torch.float32 for v in head_stats.head_stats(r).values())
        assert rollout.rollout(r).dtype == torch.float32
    finally:
        torch.set_default_dtype(previous)


def test_a_float16_checkpoint_loads_as_float32_and_never_changes_the_default_dtype(
    tiny_bert_dir, tmp_path, monkeypatch
):
    from concurrent.futures import ThreadPoolExecutor

    from transformers import AutoModel, AutoTokenizer

    half = AutoModel.from_pretrained(tiny_bert_dir, dtype=torch.float16)
    assert half.config.dtype == torch.float16
    half.save_pretrained(tmp_path / "half")
    AutoTokenizer.from_pretrained(tiny_bert_dir).save_pretrained(tmp_path / "half")
    seen = []
    original = torch.set_default_dtype

    def spy(dtype):
        seen.append(dtype)
        original(dtype)

    monkeypatch.setattr(torch, "set_default_dtype", spy)
    with ThreadPoolExecutor(4) as pool:
        engines = list(pool.map(lambda _: registry.load(str(tmp_path / "half"), "hf", "cpu"), range(4)))
    assert all(next(e.model.parameters()).dtype == torch.float32 for e in engines)
    assert torch.get_default_dtype() == torch.float32 and set(seen) <= {torch.float32}
