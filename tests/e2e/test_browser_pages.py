"""Every page opened in Chromium on SmolLM2's scratch backend (the readability files open every page on the two
others), and the lessons' predict, reveal and measure."""

from __future__ import annotations

import pytest
from browsing import MAIN_CHARTS, SLOW_BROWSER

from harness.server import IDLE_JS, SETTLED_JS

pytestmark = SLOW_BROWSER


PAGES = {  # url path -> a selector that shows the page drew its content
    "": ".js-plotly-plot",
    "inside": ".js-plotly-plot",
    "compare": ".js-plotly-plot",
    "generate": "[data-testid=stMain] [data-testid=stTextArea]",  # the sidebar holds the long-text box
    "overview": ".js-plotly-plot",
    "pronouns": "[data-testid=stRadio]",
    "positions": ".js-plotly-plot",
    "head_count": ".js-plotly-plot",
    "masks": ".js-plotly-plot",
    # a decoder's lessons: SmolLM2 draws the predict question or the heads; BERT is told they need a decoder
    "induction": "[data-testid=stMain] [data-testid=stRadio], [data-testid=stMain] [data-testid=stAlert]",
    "knockout": "[data-testid=stMain] [data-testid=stRadio], [data-testid=stMain] [data-testid=stAlert]",
    # a run's grid, or the note that the server has no finished run yet
    "corpora": "[data-testid=stMain] .js-plotly-plot, [data-testid=stMain] [data-testid=stAlert]",
}


# Every page on three models: on the default BERT and SmolLM2 (hf) every page is opened by the readability tests below
# (each visit asserts no traceback and no error); here the third, SmolLM2 on the scratch backend, on every page, and
# the Corpus page as a link without a run opens it on all three.
OPENED = [("model=smollm2&backend=scratch", path) for path in PAGES] + [
    (model, "corpora") for model in ("model=default", "model=smollm2&backend=hf")
]


@pytest.mark.parametrize(("model", "path"), OPENED)
def test_every_page_opens_in_chromium_without_an_exception(browser, server, path, model):
    pg = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        pg.goto(f"{server}/{path}?{model}")
        pg.wait_for_selector(PAGES[path], timeout=90_000)
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
