"""The pages whose maps follow a click, readable as every page's first draw is, and the Corpus page over a finished
run, in Chromium."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from browsing import MAPLESS, READABLE_CLICKS, SLOW_BROWSER, _check_readable, _readable

from harness.server import IDLE_JS

pytestmark = SLOW_BROWSER


@pytest.fixture(scope="module")
def corpus_runs():
    """A finished BERT run and a SmolLM2 run on the built-in sentences, where the server's Corpus page looks."""
    from attnviz import api
    from attnviz.analysis import head_stats

    # each worker its own runs: the folder is shared by every worker, and `pytest -n 4` (xdist's --dist load) sends
    # this file's tests to several at once, which wrote the same run's files together
    runs, worker = Path(os.environ["ATTNVIZ_CORPUS_DIR"]), os.environ.get("PYTEST_XDIST_WORKER", "main")
    return {
        m: api.corpus(list(head_stats.CORPUS), m, runs / f"browser-{m}-{worker}", window=64)
        for m in ("default", "smollm2")
    }


@pytest.mark.parametrize("model", ["default", "smollm2"])
def test_the_corpus_page_draws_a_run_its_examples_and_a_heads_query_key_space_in_chromium(
    browser, server, corpus_runs, model
):
    run = corpus_runs[model]
    pg = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        pg.goto(f"{server}/corpora?run={run.folder.name}&stat=prev&layer=2&head=3")
        pg.wait_for_selector("[data-testid=stMain] .js-plotly-plot", timeout=90_000)
        pg.get_by_text("#1", exact=False).first.wait_for(timeout=60_000)  # the top example's line
        assert pg.evaluate("() => document.querySelectorAll('[data-testid=stMain] .js-plotly-plot').length") == 2
        pg.wait_for_function(IDLE_JS, timeout=120_000)  # every element in: a button moved by a later one misses
        pg.get_by_role("button", name="Place this head's queries and keys").click()
        pg.get_by_text("Faithfulness", exact=False).wait_for(timeout=90_000)
        assert pg.evaluate("() => document.querySelectorAll('[data-testid=stMain] .js-plotly-plot').length") == 3
        assert pg.locator("[data-testid=stException]").count() == 0
        assert pg.locator("[data-testid=stAlertContentError]").count() == 0
    finally:
        pg.close()


@pytest.mark.parametrize("model", ["default", "smollm2"])
def test_the_pages_after_their_buttons_are_readable_too(browser, server, corpus_runs, model):
    """The pages whose maps follow a click (Generate's Write, the pronoun lesson's guess and reveal, the knock-out
    grid, a corpus run's page, starting a class), pressed as a person would, at 1280x800 and in projector mode: the
    same checks as every page's first draw."""
    query = {"default": "model=default", "smollm2": "model=smollm2&backend=hf"}[model]
    for path, (clicks, drawn) in READABLE_CLICKS.items():
        where = f"{query}&run={corpus_runs[model].folder.name}&stat=prev" if path == "corpora" else query
        maps = (model, path) not in MAPLESS
        plain, big = _readable(browser, server, path, where, clicks, drawn, maps)
        _check_readable(path, plain, big, maps)
