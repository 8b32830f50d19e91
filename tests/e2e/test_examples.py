"""The notebooks in examples/ run offline from top to bottom (nbclient), their views embed nothing from the network,
and converted to HTML (nbconvert) they draw their heatmaps in Chromium with no network at all."""

import contextlib
import os
import re

import nbformat
import pytest
from conftest import ROOT
from nbclient import NotebookClient
from nbconvert import HTMLExporter

from harness.server import ARGS, CHROMIUM

pytestmark = pytest.mark.slow  # the notebooks, executed

NOTEBOOKS = sorted((ROOT / "examples").glob("*.ipynb"))
# a still picture seen: loaded, laid out hundreds of pixels a side, not hidden
STILLS_SHOWN_JS = """() => [...document.querySelectorAll('img[id$="-still"]')].filter(i => {
  const b = i.getBoundingClientRect(); return i.complete && i.naturalWidth > 0 && b.width > 100 && b.height > 100
    && getComputedStyle(i).display !== 'none'; }).length"""
SOURCE = re.compile(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*['\"]?(?:https?:)?//", re.I)


def _html_outputs(nb) -> list[str]:
    return [
        o["data"]["text/html"]
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if "text/html" in o.get("data", {})
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_example_notebook_runs_offline_and_draws_its_views(path, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the kernel imports this checkout's attnviz
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []
    noise = [o["text"] for c in nb.cells for o in c.get("outputs", []) if "IProgress" in o.get("text", "")]
    assert noise == []  # tqdm's warning where ipywidgets is not installed: no progress bar is drawn here anyway
    views = [h for h in _html_outputs(nb) if "attnviz-view" in h]
    assert views and all(not SOURCE.search(h) for h in views)  # nothing embedded is fetched
    with_js = [i for i, h in enumerate(views) if "(function (define, module, exports)" in h]
    assert with_js == [0]  # plotly.js once, in the kernel's first view; the later ones draw with that copy
    if path.stem == "quickstart":
        printed = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
        difference = float(re.search(r"largest difference from attnviz's own run: ([\d.e-]+)", printed).group(1))
        assert difference < 1e-6  # transformers' own attentions through show equal the app's numbers
        assert (tmp_path / "bert_layer3.html").stat().st_size > 1_000_000
    page = tmp_path / f"{path.stem}.html"
    page.write_text(HTMLExporter().from_notebook_node(nb)[0], encoding="utf-8")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Chromium is not installed (make test does)")
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        offline = lambda route: route.abort() if route.request.url.startswith("http") else route.continue_()  # noqa: E731
        context.route("**/*", offline)  # every request to the network refused: the page must draw without
        tab = context.new_page()
        tab.goto(page.as_uri())
        drawn_js = "() => [...document.querySelectorAll('.attnviz-view .js-plotly-plot')].filter(p => p._fullLayout)"
        drawn_js = f"() => ({drawn_js})().length"
        with contextlib.suppress(PlaywrightTimeout):  # every view's figures drawn; the assertion below says if not
            tab.wait_for_function(f"({drawn_js})() >= {3 * len(views)}", timeout=60_000)
        drawn = tab.evaluate(drawn_js)
        stills_hidden = tab.evaluate(STILLS_SHOWN_JS) == 0  # each still hidden once its figure drew
        tab.screenshot(path=str(tmp_path / f"{path.stem}.png"), full_page=True)
        # where no script runs (a notebook opened untrusted, GitHub's preview), each figure shows as its still
        still = browser.new_context(viewport={"width": 1280, "height": 800}, java_script_enabled=False)
        still.route("**/*", offline)
        tab = still.new_page()
        tab.goto(page.as_uri())
        tab.wait_for_load_state("load")
        shown = tab.evaluate(STILLS_SHOWN_JS)
        tab.screenshot(path=str(tmp_path / f"{path.stem}-still.png"), full_page=True)
        browser.close()
    assert drawn == 3 * len(views)  # every view's three figures drawn, with every network request refused
    assert stills_hidden and shown == 3 * len(views)
