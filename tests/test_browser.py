"""A real browser: Playwright drives Debian's Chromium against a live `streamlit run app.py`."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import ROOT

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Chromium is not installed (make test installs it)"
)
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HEATMAPS_JS = "() => document.querySelector('.js-plotly-plot')?.data?.filter(d => d.type === 'heatmap').length ?? 0"
FIRST_X_JS = "() => document.querySelector('.js-plotly-plot')?.data?.[0]?.x ?? []"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, log_path) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "app.py",
        "--server.headless",
        "true",
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--server.fileWatcherType",
        "none",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with open(log_path, "w") as log:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"streamlit did not become healthy; see {log_path}")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = _free_port()
    proc = start_server(port, tmp_path_factory.mktemp("st") / "streamlit.log")
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    pg = ctx.new_page()
    pg.dialogs = []
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    pg.goto(server)
    pg.wait_for_function(f"({HEATMAPS_JS})() === 12", timeout=90_000)
    yield pg
    ctx.close()


def _type(pg, text: str) -> None:
    box = pg.get_by_label("Text", exact=True)
    box.fill(text)
    box.press("Enter")


def _wait_for_token(pg, token: str) -> None:
    pg.wait_for_function(f"({FIRST_X_JS})().some(x => x.startsWith({token!r}))", timeout=60_000)


def test_typing_a_sentence_draws_one_heatmap_per_head(page):
    _type(page, "Students love colourful heatmaps")
    _wait_for_token(page, "colourful")
    assert page.evaluate(HEATMAPS_JS) == 12
    assert page.locator(".js-plotly-plot .hm image, .js-plotly-plot .heatmaplayer").count() >= 1


def test_markup_is_shown_as_text_and_never_runs(page):
    _type(page, "<script>alert(1)</script><img src=x onerror=alert(2)>")
    _wait_for_token(page, "script")
    page.wait_for_timeout(1000)
    assert page.dialogs == []
    labels = page.evaluate(FIRST_X_JS)
    assert "&lt; ·2" in labels  # escaped before plotly reads it as HTML
    assert (
        page.get_by_label("Text", exact=True).input_value() == "<script>alert(1)</script><img src=x onerror=alert(2)>"
    )
    assert page.evaluate("() => document.querySelectorAll('img[src=\"x\"]').length") == 0


def test_png_download_is_a_png(page, tmp_path):
    with page.expect_download(timeout=60_000) as info:
        page.get_by_role("button", name="PNG", exact=True).click()
    path = tmp_path / "grid.png"
    info.value.save_as(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert info.value.suggested_filename == "attnviz_L1.png"


def test_moving_the_layer_slider_updates_the_shareable_url(page):
    slider = page.get_by_role("slider").first
    slider.focus()
    slider.press("ArrowRight")
    page.wait_for_function("() => location.href.includes('layer=2')", timeout=30_000)
    assert "view=Layer" in page.evaluate("location.href")


def test_a_shared_link_to_a_page_opens_inside_the_app_frame_on_a_fresh_server(browser, tmp_path):
    """The first request a new server sees is a page's URL: it must still run app.py (navigation, layout)."""
    port = _free_port()
    proc = start_server(port, tmp_path / "fresh.log")
    try:
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        pg.goto(f"http://127.0.0.1:{port}/compare?source=bert")
        pg.wait_for_selector("[data-testid=stSidebarNav] a", timeout=90_000)
        pg.wait_for_selector(".js-plotly-plot", timeout=90_000)
        titles = [a.text_content() for a in pg.locator("[data-testid=stSidebarNav] a").all()]
        assert any(t.endswith("Heads") for t in titles) and any(t.endswith("Self vs masked vs cross") for t in titles)
        assert not any(t in ("app", "compare") for t in titles)  # no file-name menu from folder discovery
        pg.close()
    finally:
        proc.terminate()
        proc.wait(10)


BROWSER_CORPUS = [
    "emoji",
    "right-to-left",
    "zero-width joiners",
    "NUL and control characters",
    "markdown image link",
    "special tokens typed as text",
    "whitespace",
    "only zero-width",
]


def test_the_bad_input_corpus_in_a_real_browser(page):
    import json

    corpus = {
        t["name"]: t for t in json.loads((ROOT / "tests/data/bad_inputs.json").read_text(encoding="utf-8"))["texts"]
    }
    for name in BROWSER_CORPUS:
        entry = corpus[name]
        old = page.evaluate(FIRST_X_JS)
        _type(page, entry["text"])
        if entry["expect"] == "message":
            page.wait_for_selector("[data-testid=stAlertContentWarning]", timeout=30_000)
        else:
            page.wait_for_function(f"({FIRST_X_JS})().join('|') !== {'|'.join(old)!r}", timeout=30_000)
            assert page.evaluate(HEATMAPS_JS) == 12, name
        assert page.dialogs == [], name
        assert page.locator("[data-testid=stException]").count() == 0, name
    assert page.evaluate("() => document.querySelectorAll('img[src^=\"http://127.0.0.1:1\"]').length") == 0


PAGES = {  # url path -> a selector that shows the page drew its content
    "": ".js-plotly-plot",
    "inside": ".js-plotly-plot",
    "compare": ".js-plotly-plot",
    "overview": ".js-plotly-plot",
    "pronouns": "[data-testid=stRadio]",
}


@pytest.mark.parametrize("path", list(PAGES))
def test_every_page_opens_in_chromium_without_an_exception(browser, server, path):
    pg = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        pg.goto(f"{server}/{path}")
        pg.wait_for_selector(PAGES[path], timeout=90_000)
        pg.wait_for_timeout(500)
        assert pg.locator("[data-testid=stException]").count() == 0
        assert pg.locator("[data-testid=stAlertContentError]").count() == 0
    finally:
        pg.close()
