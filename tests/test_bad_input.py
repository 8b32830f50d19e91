"""The bad-input corpus (tests/data/bad_inputs.json) through the engines, the command line and every page."""

import json
import re

import pytest
import torch
from apptest import _guess
from conftest import ROOT
from streamlit.testing.v1 import AppTest

from attnviz.cli import main
from attnviz.engines import base, registry
from attnviz.engines.base import ModelLoadError

CORPUS = json.loads((ROOT / "tests/data/bad_inputs.json").read_text(encoding="utf-8"))
TEXTS = [(t["name"], t["text"] if "text" in t else t["repeat"] * t["times"], t["expect"]) for t in CORPUS["texts"]]
MODELS = [(m["name"], m["model"] if "model" in m else m["repeat"] * m["times"]) for m in CORPUS["models"]]
UPLOADS = CORPUS["uploads"]
SERVER_PATH = re.compile(r"(?<![\w.:/])/[\w.\-]+/")  # an absolute path: never in a message
PAGES = ["app_pages/heads.py", "app_pages/inside.py", "app_pages/overview.py", "app_pages/compare.py"]


@pytest.mark.parametrize(("name", "text", "expect"), TEXTS, ids=[t[0] for t in TEXTS])
def test_engines_give_a_message_or_a_valid_result(name, text, expect, bundled_hf, bundled_scratch):
    for engine in (bundled_hf, bundled_scratch):
        if expect == "message":
            with pytest.raises(ValueError):
                engine.run(engine.encode(text))
            continue
        r = next(iter(engine.run(engine.encode(text)).values()))
        assert torch.allclose(r.weights.sum(-1), torch.ones(r.weights.shape[:3]), atol=1e-5)
        assert (r.truncated > 0) == (expect == "truncated")


@pytest.mark.slow  # the command line, each in a fresh Python
@pytest.mark.parametrize(("name", "text", "expect"), TEXTS, ids=[t[0] for t in TEXTS])
def test_command_line_exits_0_or_2_never_crashes(name, text, expect, capsys):
    code = main(["attention", text, "--device", "cpu"])
    assert code == (2 if expect == "message" else 0)
    if code == 2:
        assert "error" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "model"), MODELS, ids=[m[0] for m in MODELS])
def test_bad_model_names_are_refused_by_a_server_with_a_message_and_no_path(name, model, monkeypatch):
    monkeypatch.delenv(registry.MODEL_DIRS_ENV, raising=False)
    with pytest.raises(ModelLoadError) as info:
        registry.load(model, policy=registry.Policy.from_env())
    message = str(info.value)
    assert '"default"' in message or "offers default" in message
    assert not SERVER_PATH.search(message) and str(ROOT) not in message


@pytest.mark.parametrize(("name", "model"), MODELS, ids=[m[0] for m in MODELS])
def test_bad_model_names_on_the_command_line_exit_2_with_one_line(name, model, capsys):
    assert main(["attention", "a b", "--model", model]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnviz: error:") and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("upload", UPLOADS, ids=[u["name"] for u in UPLOADS])
def test_every_bad_upload_gets_a_message_naming_what_is_wrong(upload):
    from attnviz.ui.pages.pronouns import _read_upload

    class Upload:  # what st.file_uploader returns: a name and the bytes
        name = upload["file"]

        @staticmethod
        def getvalue() -> bytes:
            if "hex" in upload:
                return bytes.fromhex(upload["hex"])
            return (upload["content"] if "content" in upload else upload["repeat"] * upload["times"]).encode()

    with pytest.raises(ValueError, match=re.escape(upload["message"])):
        _read_upload(Upload)


def test_a_relative_folder_in_the_working_directory_is_a_folder_not_a_hub_id(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv(registry.MODEL_DIRS_ENV, raising=False)
    with pytest.raises(ModelLoadError, match="folders load only from inside"):
        registry.resolve("tests/data", allow_paths=False)


@pytest.mark.parametrize("downloads", ["0", "1"])
def test_a_server_never_tells_a_folder_that_exists_from_one_that_does_not(tmp_path, monkeypatch, downloads):
    monkeypatch.setenv(registry.DOWNLOADS_ENV, downloads)
    monkeypatch.setenv(registry.MODEL_DIRS_ENV, str(tmp_path / "models"))
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    (tmp_path / "home" / "notes").mkdir()
    policy = registry.Policy.from_env()
    for present, absent in ((".ssh", ".sshx"), ("notes", "notesx"), (str(tmp_path / "home"), str(tmp_path / "hom"))):
        monkeypatch.chdir(tmp_path / "home")
        said = []
        for name in (present, absent):
            try:
                said.append(("ok", policy.resolve(name).origin))
            except ModelLoadError as err:
                said.append(("refused", str(err).replace(name, "NAME")))
        assert said[0] == said[1], said  # the same answer, folder or not


def test_a_symlink_out_of_the_model_folder_is_not_offered(tiny_bert_dir, tmp_path, monkeypatch):
    models = tmp_path / "models"
    models.mkdir()
    (models / "linked").symlink_to(tiny_bert_dir, target_is_directory=True)
    monkeypatch.setenv(registry.MODEL_DIRS_ENV, str(models))
    assert "linked" not in registry.local_folders()


def test_six_spellings_of_one_folder_are_one_model(tiny_bert_dir, monkeypatch):
    monkeypatch.setenv(registry.MODEL_DIRS_ENV, str(tiny_bert_dir.parent))
    root, name = tiny_bert_dir.parent, tiny_bert_dir.name
    spellings = [name, f"{name}/", f"./{name}", str(tiny_bert_dir), f"{tiny_bert_dir}/", str(root / "." / name)]
    monkeypatch.chdir(root)
    policy = registry.Policy.from_env()
    assert {policy.resolve(s) for s in spellings} == {registry.Source(name, "folder", str(tiny_bert_dir))}
    assert name in policy.offered()


def test_a_server_offers_the_listed_models_and_refuses_the_rest(tiny_bert_dir, monkeypatch):
    monkeypatch.setenv(registry.MODEL_DIRS_ENV, str(tiny_bert_dir.parent))
    monkeypatch.setenv(registry.MODELS_ENV, f"{tiny_bert_dir.name}, some/hub-model")
    policy = registry.Policy.from_env()
    assert policy.offered() == [*registry.BUNDLED, tiny_bert_dir.name, "some/hub-model"]
    assert policy.resolve("some/hub-model").origin == "hub" and not policy.downloads
    with pytest.raises(ModelLoadError, match="not offered on this server"):
        policy.resolve("other/model")


def test_the_app_loader_never_opens_folders_outside_the_model_folders(tmp_path, monkeypatch):
    monkeypatch.setenv(registry.MODEL_DIRS_ENV, str(tmp_path / "models"))
    for outside in ("/etc", str(tmp_path), "../../etc", str(tmp_path / "models")):
        with pytest.raises(ModelLoadError):
            registry.resolve(outside, allow_paths=False)


@pytest.mark.slow  # every bad input on every page (56 runs)
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


@pytest.mark.slow  # every page's run for ten bad links
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
    results, notice = base.run_with_cpu_fallback(gpu, lambda: bundled_hf, lambda e: e.run(e.encode("The GPU is full.")))
    assert notice == base.OOM_NOTICE
    assert torch.equal(results["self"].weights, bundled_hf.run(bundled_hf.encode("The GPU is full."))["self"].weights)


def test_out_of_memory_on_the_cpu_is_not_hidden(bundled_hf, monkeypatch):
    cpu = registry.load("default", "hf", "cpu")
    monkeypatch.setattr(cpu.model, "forward", lambda *a, **k: (_ for _ in ()).throw(torch.OutOfMemoryError("x")))
    with pytest.raises(torch.OutOfMemoryError):
        base.run_with_cpu_fallback(cpu, lambda: bundled_hf, lambda e: e.run(e.encode("text")))


def test_a_server_input_limit_cuts_and_says_so(monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MAX_TOKENS", "8")
    eng = registry.load("default", "hf", "cpu")
    r = eng.run(eng.encode("one two three four five six seven eight nine ten"))["self"]
    assert len(r.target_tokens) == 8 and r.truncated == 12 - 8
    monkeypatch.setenv("ATTNVIZ_MAX_TOKENS", "lots")
    with pytest.raises(ValueError, match="ATTNVIZ_MAX_TOKENS"):
        registry.load("default", "hf", "cpu")


def test_nothing_depends_on_torch_s_process_wide_default_dtype(bundled_hf):
    """transformers sets the default dtype while it loads; a float16 default must not reach our tensors."""
    from attnviz.analysis import head_stats, rollout
    from attnviz.engines.seq2seq import sinusoidal_positions
    from attnviz.lessons import cost

    reference = bundled_hf.run(bundled_hf.encode("A default dtype test."))["self"]
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float16)
    try:
        scratch = registry.load("default", "scratch", "cpu")  # built while the default is float16
        r = scratch.run(scratch.encode("A default dtype test."))["self"]
        assert (r.weights - reference.weights).abs().max() < 1e-5
        steps, demo = cost.demo_run(cost.demo_attention(64, 4), r.target, causal=True)
        assert steps.weights.dtype == torch.float32 and demo.weights.dtype == torch.float32
        assert sinusoidal_positions(8, 16).dtype == torch.float32
        dates = registry.load("dates")
        assert dates.run(dates.encode("22/11/2026"))["cross"].weights.dtype == torch.float32
        assert all(v.dtype == torch.float32 for v in head_stats.head_stats(r).values())
        assert rollout.rollout(r).dtype == torch.float32
    finally:
        torch.set_default_dtype(previous)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
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


PAYLOAD = (
    "[Session expired: log in again](http://127.0.0.1:1/login) ![x](http://127.0.0.1:1/pixel.png) "
    "<img src=http://127.0.0.1:1/i.png> **bold** :red[red] $x^2$ # heading"
)
LINKS = [  # (page, URL parameters): every parameter a page reads from the URL, set to the payload
    ("app_pages/heads.py", {"text": PAYLOAD}),
    ("app_pages/heads.py", {"model": PAYLOAD}),
    ("app_pages/inside.py", {"text": PAYLOAD, "model": PAYLOAD}),
    ("app_pages/overview.py", {"text": PAYLOAD}),
    ("app_pages/compare.py", {"source": "dates", "date": PAYLOAD}),
    ("app_pages/compare.py", {"source": "bert", "text": PAYLOAD, "b": PAYLOAD}),
    ("app_pages/compare.py", {"source": "hub", "hub": PAYLOAD, "target": PAYLOAD}),
    ("app_pages/pronouns.py", {"text": PAYLOAD, "model": PAYLOAD}),
]


def _shown_as_markup(at) -> list[str]:
    """Every text the page hands to Streamlit's markdown renderer, where the payload's link would become one."""
    texts = [e.value for kind in ("markdown", "caption", "error", "warning", "info", "success") for e in at.get(kind)]
    texts += [str(e.proto) for kind in ("header", "subheader", "title") for e in at.get(kind)]
    texts += [m.label for m in at.metric] + [o for r in at.radio for o in r.options]
    live = [(t, re.sub(r"\\.", "·", t)) for t in texts]  # a backslash-escaped character is text, not markup
    autolink = re.compile(r"(?i)(https?|www)[·:.]")  # a bare URL: markdown links it even when escaped
    markup = ("](http", "<img", ":red[", "**bold**")
    return [t for t, bare in live if any(m in bare for m in markup) or autolink.search(bare)]


@pytest.mark.parametrize(("page", "params"), LINKS, ids=[f"{p.split('/')[-1]}-{'-'.join(q)}" for p, q in LINKS])
@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_markdown_and_html_in_a_link_never_become_markup(page, params):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = v
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    assert _shown_as_markup(at) == []


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_markdown_typed_into_the_pronoun_lab_never_becomes_markup():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("app_pages/pronouns.py").run()
    at.selectbox(key="pr.case").set_value("Type your own…").run()
    at.text_input(key="pr.own_text").input(
        f"The [dog](http://127.0.0.1:1/a) chased the **cat** because it was {PAYLOAD}"
    ).run()
    at.multiselect(key="pr.own_cands").set_value(["dog", "cat"]).run()
    assert not at.exception
    _guess(at, "dog", "pr.predict.")
    assert not at.exception, [e.value for e in at.exception]
    assert at.get("plotly_chart") and _shown_as_markup(at) == []
