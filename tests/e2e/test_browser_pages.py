"""The Corpus page without a run opened in Chromium on three models (the readability files open every other page on
the default BERT and SmolLM2), the lessons' predict, reveal and measure, and the Class page's join screen (in this
file's server: in test_browser_class.py, whose tests start servers of their own and run alone, it was the only
test of a server started for it, and kept the lone tests waiting at the run's end)."""

from __future__ import annotations

import re
import time

import pytest
from browsing import _WIRES, MAIN_CHARTS, NARROW, SLOW_BROWSER, WIDGETS_JS, _shows, converted_first
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from attnviz.ui import frame
from harness.server import IDLE_JS, SETTLED_JS
from harness.wire import Wire

pytestmark = SLOW_BROWSER


VERDICT = "[data-testid=stAlertContentSuccess], [data-testid=stAlertContentWarning]"  # a revealed guess's box
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
    converted_first(model)
    pg = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        pg.goto(f"{server}/corpora?{model}")
        pg.wait_for_selector(CORPORA, timeout=90_000)
        pg.wait_for_function(SETTLED_JS, polling=250, timeout=90_000)
        assert pg.locator("[data-testid=stException]").count() == 0
        assert pg.locator("[data-testid=stAlertContentError]").count() == 0
    finally:
        pg.close()


# The words of a chart under plotly's bar of buttons, which a pointer over the chart shows at its top right (the room's
# view of a map its teacher points at), once the bar has faded in; a hover's own label aside
MODEBAR_JS = """(i) => {
  const gd = document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')[i], bar = gd?.querySelector('.modebar');
  if (!bar || getComputedStyle(bar).opacity !== '1') return null;
  const b = bar.getBoundingClientRect();
  return [...gd.querySelectorAll('text')].filter(t => {
    const r = t.getBoundingClientRect();
    return t.textContent.trim() && !t.closest('.hoverlayer') && r.width && r.right > b.left && r.left < b.right
      && r.bottom > b.top && r.top < b.bottom;
  }).map(t => t.textContent.trim());
}"""


def test_plotlys_buttons_over_a_chart_cover_none_of_its_words(browser, server):
    """The pointer over each chart of three pages at 1280x800: plotly's buttons, shown then, stand clear of the chart's
    title and labels. Its eight covered the right end of a title on all three ("mask: sliding window (1 = may att",
    One head vs many's "head 2", Positions' "PE: 48 positions × 64 dimensions": 18 charts of ten pages); three are
    left (controls.WRAP_CSS)."""
    pg = browser.new_page(viewport={"width": 1280, "height": 800})
    covered = []
    try:
        for path in ("masks", "positions", "head_count"):
            pg.goto(f"{server}/{path}")
            charts = pg.locator("[data-testid=stMain] .js-plotly-plot")
            charts.first.wait_for(timeout=90_000)
            pg.wait_for_function(SETTLED_JS, polling=250, timeout=120_000)  # every chart drawn: none moves later
            for i in range(min(charts.count(), 7)):
                box = charts.nth(i).bounding_box()  # the pointer as in _table_toolbar_covers: on a chart held still
                charts.nth(i).hover(position={"x": box["width"] / 2, "y": min(box["height"] / 2, 300)})
                words = pg.wait_for_function(MODEBAR_JS, arg=i, polling=100, timeout=10_000).json_value()
                covered += [(path, i, w) for w in words]
                pg.mouse.move(0, 0)
    finally:
        pg.close()
    assert covered == [], covered


@pytest.mark.parametrize("path", ["positions", "head_count", "masks"])
def test_a_lesson_page_predict_reveal_and_measure_in_chromium(browser, server, path):
    """Guess, reveal, press Measure: the revealed figure and the live measurement draw, no traceback."""
    pg = browser.new_page(viewport={"width": 1400, "height": 3000})
    _WIRES[pg] = Wire(pg)  # what the page and its server said, for a failure's message
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
            verdict = main.locator(VERDICT).filter(has_text=re.compile("You guessed|You called it"))
            verdict.first.wait_for(timeout=60_000)  # green for a right guess, amber for a wrong one
        if main.get_by_role("button", name="Measure", exact=False).count():
            # The revealed figures are drawn above the button while the run goes on, moving it down (760 px on One
            # head vs many, in two steps): a click aimed before a move can land on the page instead, the likeliest
            # reading of a full suite's failure (2026-12-01: no measurement in 120 s, passing alone and under load).
            # A person presses it where it stays: once the run is over.
            pg.wait_for_function(IDLE_JS, timeout=120_000)
            main.get_by_role("button", name="Measure", exact=False).click()
            _shows(pg, main.get_by_text("Measured just now"), 120_000, "the measurement")  # a suite saw it not
            main.locator("[data-testid=stDataFrame]").first.wait_for(timeout=30_000)
        if path != "masks":  # the revealed figure or the measurement's: a chart more than the page drew first
            pg.wait_for_function(f"() => document.querySelectorAll('{MAIN_CHARTS}').length > {charts}", timeout=60_000)
        pg.wait_for_function(SETTLED_JS, polling=250, timeout=120_000)  # every chart drawn: none grows over a table
        assert pg.locator("[data-testid=stException]").count() == 0
        assert pg.locator("[data-testid=stAlertContentError]").count() == 0
        tables = main.locator("[data-testid=stDataFrame]")
        covered = [_table_toolbar_covers(pg, tables, i) for i in range(tables.count())]
        assert not any(covered), covered
    finally:
        _WIRES.pop(pg, None)
        pg.close()


# The words of the page under a table's toolbar (Streamlit's, shown above the table's top right while a pointer is over
# it), once it has faded in
TABLE_TOOLBAR_JS = """(i) => {
  const el = [...document.querySelectorAll('[data-testid=stMain] [data-testid=stElementContainer]')]
    .filter(e => e.querySelector('[data-testid=stDataFrame]'))[i];
  const bar = el?.querySelector('[data-testid=stElementToolbar]');
  if (!bar || getComputedStyle(bar).opacity !== '1') return null;
  const b = bar.getBoundingClientRect(), out = [];
  const walker = document.createTreeWalker(document.querySelector('[data-testid=stMain]'), NodeFilter.SHOW_TEXT);
  for (let n; (n = walker.nextNode());) {
    if (!n.data.trim() || el.contains(n)) continue;
    const range = document.createRange();
    range.selectNodeContents(n);
    if ([...range.getClientRects()].some(r => r.width && r.right > b.left && r.left < b.right && r.bottom > b.top
      && r.top < b.bottom)) out.push(n.data.trim().slice(0, 50));
  }
  return out;
}"""


# What the pointer is over, for a toolbar that did not show: the element hit at the pointer's point and its chain.
POINTER_JS = """([x, y]) => {
  const hit = document.elementFromPoint(x, y), chain = [];
  for (let e = hit; e && e !== document.body; e = e.parentElement) chain.push(e.dataset.testid || e.tagName);
  return {point: [Math.round(x), Math.round(y)], chain: chain.slice(0, 8).join(' < '),
    tables: [...document.querySelectorAll('[data-testid=stMain] [data-testid=stDataFrame]')]
      .map(t => { const r = t.getBoundingClientRect(); return [r.left, r.top, r.width, r.height].map(Math.round); })};
}"""


def _table_toolbar_covers(pg, tables, i: int) -> list[str]:
    """What table i's toolbar covers with the pointer over the table (TABLE_TOOLBAR_JS). Streamlit shows the toolbar
    on its table's CSS :hover. Playwright's hover scrolls the table into view, waits until its box holds still for two
    frames and checks the table is what the pointer would touch, then moves there: a mouse.move to a box read a moment
    before could land beside a table that moved (in CI on 2026-11-30 one toolbar of the head_count lesson did not
    show in 10 s; not reproduced here in 12 runs, alone, under load, with Chromium's CPU throttled). A toolbar that
    does not show fails with what the pointer is over."""
    table = tables.nth(i)
    table.scroll_into_view_if_needed()
    box = table.bounding_box()
    at = {"x": box["width"] / 2, "y": min(box["height"] / 2, 60)}
    table.hover(position=at)
    try:
        covered = pg.wait_for_function(TABLE_TOOLBAR_JS, arg=i, polling=100, timeout=10_000).json_value()
    except PlaywrightTimeoutError:
        now = table.bounding_box()
        pointer = pg.evaluate(POINTER_JS, [now["x"] + at["x"], now["y"] + at["y"]])
        raise AssertionError(f"table {i}'s toolbar did not show with the pointer on it: {pointer}") from None
    pg.mouse.move(0, 0)
    return covered


def test_a_tables_toolbar_covers_none_of_the_words_over_it_on_a_projector(browser, server):
    """Knock out on SmolLM2 in projector mode at 1280x800: the pointer over each of its two tables of next tokens (in
    half the column each) shows Streamlit's toolbar above the table, clear of the line that names the table. It
    covered "before:" of "Next token after ‘.’, before:" (2026-11-30)."""
    converted_first("model=smollm2&backend=hf")
    pg = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        pg.goto(f"{server}/knockout?model=smollm2&backend=hf&projector=true")
        tables = pg.locator("[data-testid=stMain] [data-testid=stDataFrame]")
        tables.nth(1).wait_for(timeout=120_000)
        pg.wait_for_function(IDLE_JS, timeout=120_000)
        covered = [_table_toolbar_covers(pg, tables, i) for i in range(tables.count())]
        assert covered == [[], []], covered
    finally:
        pg.close()


def test_the_pronoun_benchmarks_figures_are_read_whole_in_a_narrow_window(browser, server):
    """The benchmark's four figures (behind its button, where no readability visit goes) in a laptop's window not at
    full width: every label and value whole (WIDGETS_JS). In four columns they read "Maximum Atte…" and "Best
    head,…"."""
    pg = browser.new_page(viewport=NARROW)
    try:
        pg.goto(f"{server}/pronouns")
        pg.get_by_role("tab", name="Benchmark").click()
        cases = pg.get_by_label(re.compile("Cases to score"))
        cases.fill("8")  # every figure drawn; their values: tests/ui/pages/test_pronouns.py
        cases.press("Enter")
        pg.wait_for_function(IDLE_JS, timeout=60_000)
        pg.get_by_role("button", name="Run the benchmark").click()
        pg.locator("[data-testid=stMain] [data-testid=stMetric]").nth(3).wait_for(timeout=120_000)
        pg.wait_for_function(IDLE_JS, timeout=60_000)
        assert pg.locator("[data-testid=stMain] [data-testid=stMetric]").count() == 4
        assert pg.evaluate(WIDGETS_JS) == []
        assert pg.locator("[data-testid=stException], [data-testid=stAlertContentError]").count() == 0
    finally:
        pg.close()


def test_a_sentence_of_ones_own_shows_its_chosen_candidates_in_a_narrow_window(browser, server):
    """The pronoun lesson's own sentence, its two candidates picked, in a 900 px window: each chosen candidate in sight
    in its box (WIDGETS_JS). In three columns the box scrolled both out of sight, one red "×" left."""
    pg = browser.new_page(viewport=NARROW)
    try:
        pg.goto(f"{server}/pronouns")
        pg.wait_for_selector("[data-testid=stMain] h2", timeout=90_000)
        pg.wait_for_function(IDLE_JS, timeout=90_000)
        pg.locator("[data-testid=stSelectbox]").filter(has_text="Case").locator("input").click()
        pg.keyboard.type("Type your own")
        pg.keyboard.press("Enter")
        pg.locator("[data-testid=stMultiSelect]").wait_for(timeout=60_000)
        pg.wait_for_function(IDLE_JS, timeout=60_000)
        pg.locator("[data-testid=stMultiSelect] input").click()
        for word in ("dog", "cat"):  # the default sentence's: "The dog chased the cat because it was bored."
            pg.keyboard.type(word)
            pg.keyboard.press("Enter")
        pg.keyboard.press("Escape")
        pg.get_by_text("Your guess").wait_for(timeout=60_000)  # two candidates: the question is asked
        pg.wait_for_function(IDLE_JS, timeout=60_000)
        assert pg.locator("[data-testid=stMultiSelect] [data-testid=stMultiSelectTagsContainer]").inner_text().split()
        assert pg.evaluate(WIDGETS_JS) == []
        assert pg.locator("[data-testid=stException], [data-testid=stAlertContentError]").count() == 0
    finally:
        pg.close()


JOIN_JS = """() => {
  const main = document.querySelector('[data-testid=stMain]'), img = main.querySelector('[data-testid=stImage] img');
  const code = [...main.querySelectorAll('h1')].find(h => /^[A-Z0-9]{6}$/.test(h.innerText.trim()));
  return {teacher: main.innerHTML.includes('teacher='), qr: img ? img.getBoundingClientRect().height : 0,
          bottom: img ? img.getBoundingClientRect().bottom : 0, code: code ? code.innerText.trim() : null,
          codePx: code ? parseFloat(getComputedStyle(code).fontSize) : 0, text: main.innerText,
          first: document.querySelector('[data-testid=stSidebarNav] a').innerText};
}"""


TOOLBAR_JS = """() => {  // the toolbar's top and the heading's bottom, once the toolbar has slid in (0.3 s) and shows
  const bar = document.querySelector('[data-testid=stMain] [data-testid=stElementToolbar]');
  const heading = document.querySelector('[data-testid=stMain] [data-testid=stExpander] summary');
  if (!bar || !heading || getComputedStyle(bar).opacity !== '1') return null;
  return [bar.getBoundingClientRect().top, heading.getBoundingClientRect().bottom];
}"""


@pytest.mark.parametrize("size", [(1280, 800, ""), (1920, 1080, "?projector=true")])
def test_the_join_screen_shows_the_room_the_code_and_a_large_qr_code_and_never_the_teachers_link(browser, server, size):
    """After Start a class, what the room may see: the six-letter code large, the QR code at least 40% of the screen's
    height and inside it, the student address, the end in the teacher's own time (Asia/Yerevan here: UTC+4), and no
    teacher link anywhere in the main area (it was there in large type: a projected laptop gave the class away). The
    Class page is first in the navigation for the teacher, and every page is listed (Class was under "View 3 more")."""
    width, height, query = size
    ctx = browser.new_context(viewport={"width": width, "height": height}, timezone_id="Asia/Yerevan")
    pg = ctx.new_page()
    try:
        pg.goto(f"{server}/classroom{query}")
        started = time.time()
        pg.get_by_role("button", name="Start a class").click()
        pg.get_by_text("Your teacher link, which lets anyone lead the class").wait_for(timeout=60_000)
        pg.wait_for_function(IDLE_JS, timeout=60_000)
        pg.locator("[data-testid=stMain] [data-testid=stImage] img").wait_for(timeout=30_000)
        pg.wait_for_function("() => document.querySelector('[data-testid=stMain] [data-testid=stImage] img').complete")
        got = pg.evaluate(JOIN_JS)
        secret = pg.evaluate("() => new URL(location.href).searchParams.get('teacher')")
        assert secret and not got["teacher"] and secret not in got["text"], "the teacher's link is in the main area"
        assert got["code"] == pg.evaluate("() => new URL(location.href).searchParams.get('class')")
        assert got["codePx"] >= 40, got["codePx"]
        assert 0.4 * height <= got["qr"] and got["bottom"] <= height, (got["qr"], got["bottom"], height)
        assert "or open\n" in got["text"] and f"?class={got['code']}" in got["text"]
        ends = re.search(r"The class ends at (\d\d:\d\d)\.", got["text"])  # 8 hours on, in Yerevan's time
        could = {time.strftime("%H:%M", time.gmtime(t + (8 + 4) * 3600)) for t in (started, time.time())}
        assert ends and ends[1] in could, (got["text"][-200:], could)
        assert "Class" in got["first"]
        # the pointer over the QR code (where it rests after Start a class): the image's toolbar, shown then above the
        # image, stays under the join screen's heading (it covered "the address" at both sizes, 2026-11-30)
        pg.locator("[data-testid=stMain] [data-testid=stImage] img").hover()
        bar, heading = pg.wait_for_function(TOOLBAR_JS, timeout=10_000).json_value()
        assert bar >= heading - 0.5, (bar, heading)
        nav = pg.inner_text("[data-testid=stSidebarNav]")
        assert "View" not in nav and all(title in nav for _, title, _ in frame.PAGES), nav
        pg.locator("[data-testid=stSidebar]").get_by_text("Your teacher link (keep it private)").click()
        pg.get_by_text(f"teacher={secret}").wait_for(timeout=10_000)  # there, folded, for the teacher alone
        assert not pg.evaluate(JOIN_JS)["teacher"]
    finally:
        ctx.close()
