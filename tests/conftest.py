"""Shared fixtures: tiny random models saved to disk and loaded through the real loaders, and the bundled BERT."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a missing model fails in seconds, never downloads
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")  # large tensors on huge pages, as the command line has them
# Classes made by tests go to a throw-away database, never the user's own (servers started by tests inherit it).
# Corpus runs made by tests (the Model overview's corpus average, the Corpus page) go to a throw-away folder too.
# The process that makes a folder removes it when it exits (pytest-xdist's workers inherit the controller's).


def _throwaway(prefix: str) -> str:
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


if "ATTNVIZ_CORPUS_DIR" not in os.environ:
    os.environ["ATTNVIZ_CORPUS_DIR"] = _throwaway("attnviz-corpus-")
if "ATTNVIZ_DB" not in os.environ:
    os.environ["ATTNVIZ_DB"] = os.path.join(_throwaway("attnviz-test-"), "classes.db")
if "ATTNVIZ_TEST_GATE" not in os.environ:  # the lock files of tests marked `alone` (tests/gate.py)
    os.environ["ATTNVIZ_TEST_GATE"] = _throwaway("attnviz-gate-")
# Without a GPU, Triton kernels (attnviz/stats_kernel.py) run on CPU tensors under Triton's interpreter: it must be
# chosen before Triton is first imported, and torch._dynamo imports it with torch's first compile-related import.
if not Path("/dev/nvidiactl").exists():
    os.environ.setdefault("TRITON_INTERPRET", "1")
# `make test` runs the tests in two pytest-xdist workers (PYTEST_XDIST_WORKER), each computing on one thread, and the
# servers they start inherit it: two workers of one thread each kept this 2-core machine busier than one process of
# two threads (the fast loop: 93 s against 144 s), whose small tensors spend more on waking threads than they gain.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")


import gate  # noqa: E402  (tests/gate.py)
import pytest  # noqa: E402
import torch  # noqa: E402
from transformers import (  # noqa: E402
    AutoModelForCausalLM,
    AutoTokenizer,
    BertConfig,
    BertModel,
    GPT2Config,
    GPT2Model,
    LlamaConfig,
    LlamaForCausalLM,
    MarianConfig,
    MarianMTModel,
)
from transformers.utils import logging as hf_logging  # noqa: E402

from attnviz.engines import registry  # noqa: E402

hf_logging.disable_progress_bar()

# `make test-fast` is `pytest -m "not slow"` in two workers, the everyday loop (budget 60 s; under 50 s, 2026-11-27): no
# browser, no server, no PostgreSQL, no SmolLM2, no command line in a subprocess, no Ray, nothing that takes 0.45 s or
# more in a full run of the suite but one AppTest of each page. `make test` (what CI runs) runs everything. A slow test
# says so where it is written: `pytestmark = pytest.mark.slow` for a whole file (tests/e2e/: the browser, the servers,
# the notebooks, the package), `@pytest.mark.slow` on a test, with why beside it. Two rules stay here because they are
# about a resource, not a name: a test that uses one of these fixtures, or a store_target on PostgreSQL, is slow.
SLOW_FIXTURES = {"postgres", "smollm2_hf", "smollm2_eager", "smollm2_scratch", "browser", "server"}
SLOW_PARAMS = {"postgresql"}


# The files that take longest in a full run (the time of each test, summed by file, in a fresh clone's run of a70971c,
# 2026-11-27), longest first: collected first, so that the four workers of `make test` start on them and the many
# short files fill in after (in collection order one worker ran alone at the end of a run: one server and one Chromium
# for about 5 minutes). Every other file keeps its place after.
LONGEST_FIRST = (
    "test_browser_after_clicks.py",
    "test_browser_readable.py",
    "test_package.py",
    "test_browser_views.py",
    "test_run.py",
    "test_app.py",
    "test_serving.py",
    "test_lazy.py",
    "test_browser_pages.py",
    "test_examples.py",
    "test_protocol.py",
    "test_bad_input.py",
    "test_gemma3.py",
    "test_cli.py",
    "test_heads.py",
    "test_readme_tables.py",
    "test_browser_hub.py",
)


def pytest_configure(config):
    """The files go out to pytest-xdist's workers in LONGEST_FIRST's order: xdist's loadfile otherwise re-sorts them
    by their number of tests (its --loadscope-reorder, on by default), which sent the browser files, one to four
    tests each, last, where they ran at once at the end of the run (pytest 754 s, against 651 s in this order, one
    run each, 2026-11-28)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` (make test's), files with a lone test first, beside each other (tests/gate.py, lone_first)."""
    return gate.lone_first(config, log) if config.getvalue("dist") == "loadfile" else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A test marked `alone` runs with every other worker's tests paused (tests/gate.py says why)."""
    with gate.held(item.get_closest_marker(gate.MARK) is not None):
        yield


def pytest_collection_modifyitems(config, items):
    """Mark the tests that need a slow resource (SLOW_FIXTURES, SLOW_PARAMS): `make test-fast` leaves them out. Then
    put the files with a lone test first, the longest files next (LONGEST_FIRST), each file's tests in their own
    order."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if SLOW_FIXTURES & set(item.fixturenames) or SLOW_PARAMS & {v for v in params.values() if isinstance(v, str)}:
            item.add_marker(pytest.mark.slow)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    # The files with a test marked `alone` go first: xdist's scheduler (pytest_xdist_make_scheduler) gives them a worker
    # each and nothing else to any worker until their lone tests have ended, so those run beside each other at once.
    # (Last, a lone test waited for another worker's tests to drain while the worker of the second lone test had tests
    # before it, which the first held back: one after the other, a core idle for 100 s.)
    first = {item.path.name for item in items if item.get_closest_marker(gate.MARK)}
    gate.note_lone_files({item.nodeid.split("::")[0] for item in items if item.get_closest_marker(gate.MARK)})
    items.sort(key=lambda item: -1 if item.path.name in first else rank.get(item.path.name, len(rank)))


ROOT = Path(__file__).resolve().parent.parent
SENTENCE = "The animal didn't cross the street because it was too tired."


def _save(model, folder: Path, tokenizer) -> Path:
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def bundled_tokenizer():
    return AutoTokenizer.from_pretrained(registry.default_model_dir())


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory, bundled_tokenizer) -> Path:
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=bundled_tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    return _save(BertModel(cfg), tmp_path_factory.mktemp("tiny-bert"), bundled_tokenizer)


@pytest.fixture(scope="session")
def tiny_gpt2_dir(tmp_path_factory, bundled_tokenizer) -> Path:
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=bundled_tokenizer.vocab_size, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    return _save(GPT2Model(cfg), tmp_path_factory.mktemp("tiny-gpt2"), bundled_tokenizer)


@pytest.fixture(scope="session")
def tiny_marian_dir(tmp_path_factory, bundled_tokenizer) -> Path:
    torch.manual_seed(0)
    tok = bundled_tokenizer
    cfg = MarianConfig(
        vocab_size=tok.vocab_size,
        d_model=32,
        encoder_layers=2,
        decoder_layers=3,
        encoder_attention_heads=4,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.sep_token_id,
        decoder_start_token_id=tok.pad_token_id,
        forced_eos_token_id=tok.sep_token_id,
    )
    return _save(MarianMTModel(cfg), tmp_path_factory.mktemp("tiny-marian"), tok)


def _tiny_llama_config(vocab_size: int, max_positions: int) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=72,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,
        head_dim=12,
        intermediate_size=96,
        max_position_embeddings=max_positions,
        rope_theta=500.0,
        tie_word_embeddings=True,
        rms_norm_eps=1e-5,
    )


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory, bundled_tokenizer) -> Path:
    """A random Llama: 6 query heads sharing 2 key/value heads, head size 12 (not a power of two), tied head."""
    torch.manual_seed(0)
    cfg = _tiny_llama_config(bundled_tokenizer.vocab_size, max_positions=128)
    return _save(LlamaForCausalLM(cfg), tmp_path_factory.mktemp("tiny-llama"), bundled_tokenizer)


@pytest.fixture(scope="session")
def tiny_long_llama_dir(tmp_path_factory, bundled_tokenizer) -> Path:
    """The tiny Llama's shape with room for 2,048 positions: long inputs in a second."""
    torch.manual_seed(1)
    cfg = _tiny_llama_config(bundled_tokenizer.vocab_size, max_positions=2048)
    tokenizer = AutoTokenizer.from_pretrained(registry.default_model_dir(), model_max_length=2048)  # not BERT's 512
    return _save(LlamaForCausalLM(cfg), tmp_path_factory.mktemp("tiny-long-llama"), tokenizer)


@pytest.fixture(scope="session")
def tiny_gpt_oss_dir(tmp_path_factory, bundled_tokenizer) -> Path:
    """A random gpt-oss: learned sinks set away from zero (each head's rows over the tokens sum to less than 1), a
    sliding-window layer and a full one."""
    from transformers import GptOssConfig

    config = GptOssConfig(
        vocab_size=bundled_tokenizer.vocab_size, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=12, intermediate_size=64, num_local_experts=4, num_experts_per_tok=2,
        max_position_embeddings=256, sliding_window=16, layer_types=["sliding_attention", "full_attention"],
    )  # fmt: skip
    torch.manual_seed(7)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    with torch.no_grad():
        for block in model.model.layers:
            block.self_attn.sinks.copy_(torch.tensor([-1.0, 0.5, 2.0, 4.0]))
    tokenizer = AutoTokenizer.from_pretrained(registry.default_model_dir(), model_max_length=256)
    return _save(model, tmp_path_factory.mktemp("oss"), tokenizer)


def eager_reference(folder) -> torch.nn.Module:
    """Hugging Face's own model with transformers' eager attention: nothing of attnviz's on the way (the reference)."""
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32)
    return model.eval()


@pytest.fixture(scope="session")
def smollm2_eager():
    from attnviz.engines import smollm2

    return eager_reference(smollm2.converted())


@pytest.fixture(scope="session")
def smollm2_hf():
    return registry.load("smollm2", "hf", "cpu")


@pytest.fixture(scope="session")
def smollm2_scratch(smollm2_hf):
    return registry.scratch_engine(smollm2_hf)


@pytest.fixture(scope="session")
def bundled_hf():
    return registry.load("default", "hf", "cpu")


@pytest.fixture(scope="session")
def bundled_scratch():
    return registry.load("default", "scratch", "cpu")


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server for this test session (harness/pgserver.py); skipped, with the reason, where none can
    run (no server binaries, or root with no postgres user)."""
    from harness import pgserver

    folder, why = pgserver.binaries()
    if folder is None:
        pytest.skip(f"PostgreSQL cannot run here: {why}")
    server = pgserver.Server()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request, tmp_path) -> str:
    """Where a class store lives, once for each database: a fresh SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "classes.db")
    return request.getfixturevalue("postgres").create()


# The browser tests' Chromium and the app's server (tests/e2e/test_browser_*.py): one of each per test file.
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from harness.server import free_port, start_server

    port = free_port()
    proc = start_server(port, tmp_path_factory.mktemp("st") / "streamlit.log")
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    from harness.server import ARGS, CHROMIUM

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        still = _StillChromium(b, partial(p.chromium.launch_persistent_context, executable_path=CHROMIUM, args=ARGS))
        still.profiles = tmp_path_factory.mktemp("chromium")
        yield still
        still.close_shared()
        b.close()


class _StillChromium:
    """The browser whose every page prefers reduced motion (Playwright's reduced_motion, unless a test says
    otherwise): Streamlit's loading animations kept Chromium's compositor busy, about 1.6 s of CPU a page visit of
    the 2 cores the suite shares (2026-11-27). What the tests measure is laid out the same either way.

    A page asked for with a viewport alone opens in one context the file's pages share, as a person's tabs do, so
    that Streamlit's hashed bundles (served `immutable`) and the code Chromium compiled from them are cached after the
    first visit; `browser.new_page` made a fresh context, an empty cache, for every visit. That context is a profile
    on disk (Playwright's persistent context, a Chromium of its own), as a person's browser is: an off-the-record
    context keeps no compiled code, and a page load cost about 3.9 core-s in one against 3.0 in a profile (the Heads
    page, five loads each, 2026-11-30). A page with options of its own (downloads, a time zone, another motion
    setting) and every `new_context` get a context of their own. The app keeps nothing of a visitor in cookies or
    storage: a session is its websocket, one per page."""

    profiles: Path  # where the shared contexts' profiles live (the fixture's temporary folder)

    def __init__(self, browser, persistent) -> None:
        self._browser = browser
        self._persistent = persistent  # launch_persistent_context, Chromium's path and flags given
        self._shared: dict = {}

    def new_page(self, viewport: dict | None = None, **options):
        options = {"reduced_motion": "reduce", **options}
        if options != {"reduced_motion": "reduce"}:
            return self._browser.new_page(viewport=viewport, **options)
        page = self.shared_page()
        page.set_viewport_size(viewport or {"width": 1280, "height": 720})
        return page

    def new_context(self, **options):
        return self._browser.new_context(**{"reduced_motion": "reduce", **options})

    def shared_page(self, **options):
        """A page in the one context the file's pages with these context options share (a phone's: its viewport,
        User-Agent, touch), cached as the tabs above are; the caller closes the page, not the context."""
        key = repr(sorted(options.items()))
        if key not in self._shared:
            folder = self.profiles / f"profile{len(self._shared)}"
            self._shared[key] = self._persistent(str(folder), **{"reduced_motion": "reduce", **options})
        return self._shared[key].new_page()

    def close_shared(self) -> None:
        """Close the shared contexts' Chromiums."""
        for context in self._shared.values():
            context.close()

    def __getattr__(self, name: str):
        return getattr(self._browser, name)
