"""The Corpus page without a run opened in Chromium on three models (the readability files open every other page on
the default BERT and SmolLM2), and the lessons' predict, reveal and measure."""

from __future__ import annotations

import pytest
from browsing import MAIN_CHARTS, SLOW_BROWSER

from harness.server import IDLE_JS, SETTLED_JS

pytestmark = SLOW_BROWSER


CORPORA = "[data-testid=stMain] .js-plotly-plot, [data-testid=stMain] [data-testid=stAlert]"  # a grid, or the note


# Every page on three models: on the default BERT and SmolLM2 (hf) every page is opened in Chromium by the readability
# tests (each visit asserts no traceback and no error). The third, SmolLM2 on the scratch backend, was opened here on
# every page too (11 visits, about 130 s of a full run): what that adds over the other two is the server's path, the
# same figures drawn by the same browser code, so it is checked where it runs, in tests/test_app.py's
# test_every_page_runs_with_smollm2[scratch-*] (AppTest: no exception, no error, SmolLM2's own tokens on every map).
# The Corpus page without a run, which no readability visit opens, is opened here on all three.
OPENED = ["model=default", "model=smollm2&backend=hf", "model=smollm2&backend=scratch"]


@pytest.mark.parametrize("model", OPENED)
def test_the_corpus_page_without_a_run_opens_in_chromium_without_an_exception(browser, server, model):
    """The server's Corpus page before any run: its grid of a finished run, or the note that there is none yet."""
    pg = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        pg.goto(f"{server}/corpora?{model}")
        pg.wait_for_selector(CORPORA, timeout=90_000)
        pg.wait_for_function(SETTLED_JS, polling=250, timeout=90_000)
        assert pg.locator("[data-testid=stException]").count() == 0
        assert pg.locator("[data-testid=stAlertContentError]").count() == 0
    finally:
        pg.close()


@pytest.mark.parametrize("path", ["positions", "head_count", "masks"])
def test_a_lesson_page_predict_reveal_and_measure_in_chromium(browser, server, path):
    """Guess, reveal, press Measure: the revealed figure and the live measurement draw, no traceback."""
    pg = browser.new_page(viewport={"width": 1400, "height": 3000})
    try:
        pg.goto(f"{server}/{path}")
        main = pg.locator("[data-testid=stMain]")
        main.locator(".js-plotly-plot").first.wait_for(timeout=90_000)
        pg.wait_for_function(IDLE_JS, timeout=120_000)  # the run's every element has arrived: a count that holds
        charts = main.locator("[data-testid=stPlotlyChart]").count()
        if main.get_by_text("Your guess").count():
            choice = main.locator("[data-testid=stRadio]").filter(has_text="Your guess")
            choice.locator("label").nth(1).click()  # label 0 is the question's own
            main.get_by_role("button", name="Reveal").click()
            main.locator("[data-testid=stAlertContentSuccess]").first.wait_for(timeout=60_000)
        if main.get_by_role("button", name="Measure", exact=False).count():
            main.get_by_role("button", name="Measure", exact=False).click()
            main.get_by_text("Measured just now").wait_for(timeout=120_000)
            main.locator("[data-testid=stDataFrame]").first.wait_for(timeout=30_000)
        if path != "masks":  # the revealed figure or the measurement's: a chart more than the page drew first
            pg.wait_for_function(f"() => document.querySelectorAll('{MAIN_CHARTS}').length > {charts}", timeout=60_000)
        pg.wait_for_function(IDLE_JS, timeout=120_000)
        assert pg.locator("[data-testid=stException]").count() == 0
        assert pg.locator("[data-testid=stAlertContentError]").count() == 0
    finally:
        pg.close()
