"""The Heads page in Chromium: typing, markup, a PNG, the URL's state, bad input, a shared link, a long text, an
HTML snapshot, every token labelled, a link to a head, and a notebook view's click."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from browsing import (
    FIRST_X_JS,
    HEATMAPS_JS,
    NAMES_JS,
    PHONE,
    PHONE_AGENT,
    RESIZED_JS,
    SLOW_BROWSER,
    VISIBLE_JS,
    _type,
    _wait_for_token,
    converted_first,
)
from conftest import ROOT, SENTENCE

from harness.server import IDLE_JS, SETTLED_JS, free_port, start_server

pytestmark = SLOW_BROWSER


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


def test_typing_a_sentence_draws_one_heatmap_per_head(page):
    _type(page, "Students love colourful heatmaps")
    _wait_for_token(page, "colourful")
    page.wait_for_function(SETTLED_JS, polling=250, timeout=60_000)  # every chart drawn before they are counted
    assert page.evaluate(HEATMAPS_JS) == 12
    assert page.locator(".js-plotly-plot .hm image, .js-plotly-plot .heatmaplayer").count() >= 1


def test_markup_is_shown_as_text_and_never_runs(page):
    _type(page, "<script>alert(1)</script><img src=x onerror=alert(2)>")
    _wait_for_token(page, "script")
    page.wait_for_function(SETTLED_JS, polling=250, timeout=60_000)  # the whole run is in the page: any script ran
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
    port = free_port()
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


def test_the_heads_page_s_own_name_opens_it_at_the_app_s_url(browser, server):
    """/heads, typed or shared, is the Heads page (it lives at the app's own URL): no "Page not found", the same
    parameters, the Heads page marked in the menu."""
    pg = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        pg.goto(f"{server}/heads?text=Students+love+colourful+maps&layer=2")
        pg.wait_for_function(f"({HEATMAPS_JS})() === 12", timeout=90_000)
        _wait_for_token(pg, "colourful")
        url = pg.url.split("?")
        assert url[0] == f"{server}/" and "text=Students+love+colourful+maps" in url[1] and "layer=2" in url[1]
        assert not pg.get_by_text("Page not found").count() and not pg.locator("[role=dialog]").count()
        assert pg.locator("[data-testid=stSidebarNav] a[aria-current=page]").all_text_contents()[0].endswith("Heads")
    finally:
        pg.close()


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
            # new labels, not none: a chart that Streamlit draws anew is briefly absent, and [] differs from the old
            changed = f"(x => x.length > 0 && x.join('|') !== {'|'.join(old)!r})(({FIRST_X_JS})())"
            page.wait_for_function(f"() => {changed}", timeout=30_000)
            page.wait_for_function(SETTLED_JS, polling=250, timeout=60_000)
            assert page.evaluate(HEATMAPS_JS) == 12, name
        assert page.dialogs == [], name
        assert page.locator("[data-testid=stException]").count() == 0, name
    assert page.evaluate("() => document.querySelectorAll('img[src^=\"http://127.0.0.1:1\"]').length") == 0


def _memory(pid: int) -> dict[str, int]:
    """A process's resident set now (VmRSS) and at its peak since the last reset (VmHWM), in bytes."""
    text = Path(f"/proc/{pid}/status").read_text()
    return {k: int(re.search(rf"{k}:\s+(\d+)", text).group(1)) * 1024 for k in ("VmRSS", "VmHWM")}


def test_a_long_text_pasted_in_chromium_draws_pooled_maps_an_exact_window_and_the_overview(
    browser, tmp_path, monkeypatch
):
    """The long path end to end, with a smaller N for CI time: an eager budget of 64 MB makes SmolLM2 go lazy past
    249 tokens, and ~1,200 tokens are pasted. The server's peak memory added by the request stays within the bound
    the README states (its queries and keys, two analysis blocks and the forward pass's own activations)."""
    from attnviz.engines.base import eager_tokens
    from attnviz.lazy import BLOCK_BYTES

    monkeypatch.setenv("ATTNVIZ_EAGER_MB", "64")  # here too, for eager_tokens below
    port = free_port()
    proc = start_server(port, tmp_path / "streamlit.log", env={"ATTNVIZ_EAGER_MB": "64"})
    url = f"http://127.0.0.1:{port}"
    text = (ROOT / "README.md").read_text(encoding="utf-8")[:4000]  # ~1,200 SmolLM2 tokens of prose and markup
    converted_first("model=smollm2")
    pg = browser.new_page(viewport={"width": 1400, "height": 2600})
    try:
        pg.goto(f"{url}/?model=smollm2&view=Head")
        pg.wait_for_selector(".js-plotly-plot", timeout=90_000)
        pg.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=90_000)
        Path(f"/proc/{proc.pid}/clear_refs").write_text("5")  # the server's peak starts again: SmolLM2 is loaded
        before = _memory(proc.pid)["VmRSS"]
        pg.get_by_text("Long text: paste a passage").click()
        box = pg.get_by_role("textbox", name="Long text")
        box.fill(text)
        box.press("Control+Enter")
        pg.wait_for_selector("text=A long text", timeout=180_000)
        pg.wait_for_selector("text=An exact window", timeout=180_000)
        n = int(
            re.search(
                r"A long text: ([\d,]+) tokens", pg.locator("[data-testid=stAlertContentInfo]").first.text_content()
            )
            .group(1)
            .replace(",", "")
        )
        assert n > eager_tokens(30, 9) * 3
        title = "() => [...document.querySelectorAll('.gtitle')].map(t => t.textContent).find(t => t.includes('exact'))"
        assert f"queries {n - 63}–{n}" in pg.evaluate(title)  # the window starts at the text's end
        pooled = pg.locator(".js-plotly-plot").first  # the pooled head map: clicked near its top-left, held still
        box_ = pooled.bounding_box()
        pooled.click(position={"x": box_["width"] * 0.2, "y": box_["height"] * 0.3})
        # the window's map drawn again at the clicked place (while the run redraws it, it may have no title at all)
        moved = f"() => {{ const t = ({title})(); return t !== undefined && !t.includes('queries {n - 63}–'); }}"
        pg.wait_for_function(moved, timeout=60_000)
        assert re.search(r"queries (\d+)–", pg.evaluate(title)).group(1) != str(n - 63)
        pg.locator("[data-testid=stMain] button").filter(has_text="Overview").first.click()
        pg.wait_for_selector("text=Every layer (rows) and head (columns)", timeout=120_000)
        pg.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=120_000)
        assert pg.locator(".js-plotly-plot").count() >= 1
        assert pg.locator("[data-testid=stException]").count() == 0
        assert pg.evaluate(NAMES_JS) == []  # the heads' and layers' names next to the tiles (SmolLM2's 30 x 9)
        pg.get_by_role("link", name="Model overview").first.click()  # statistics for every head of the long text
        pg.wait_for_selector("text=Rollout and flow multiply every layer", timeout=120_000)
        assert pg.locator(".js-plotly-plot").count() >= 1  # the layer x head grid of a statistic
        assert pg.locator("[data-testid=stException]").count() == 0
        pg.get_by_role("link", name="Inside").first.click()  # a page that draws every weight says where to go
        pg.wait_for_selector("text=show long texts", timeout=60_000)
        added = _memory(proc.pid)["VmHWM"] - before
        kept = 30 * (9 + 3) * n * 64 * 4  # queries (L, H, N, Dh) and keys (L, Hkv, N, Dh), float32
        bound = kept + 2 * BLOCK_BYTES + 600 * 2**20  # + the forward pass (SmolLM2's activations at this N)
        assert added < bound, (added / 2**20, bound / 2**20)
    finally:
        pg.close()
        proc.terminate()
        proc.wait(10)


def test_an_html_snapshot_of_a_view_opens_offline_and_draws_its_heatmaps(browser, server, tmp_path):
    """Heads page, one head: prepare the snapshot, save it, open the file with the network off."""
    pg = browser.new_page(viewport={"width": 1400, "height": 1400})
    try:
        pg.goto(f"{server}/?view=Head&layer=2&head=3")
        main = pg.locator("[data-testid=stMain]")
        main.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
        pg.wait_for_function(IDLE_JS, timeout=120_000)  # the button below the maps stays where it is from here
        main.get_by_role("button", name="Prepare an HTML snapshot").click()
        save = main.get_by_role("button", name="Save the snapshot (HTML")
        save.wait_for(timeout=30_000)
        label = save.inner_text()
        with pg.expect_download() as dl:
            save.click()
        path = tmp_path / "snapshot.html"
        dl.value.save_as(path)
        stated = float(label.split("HTML, ")[1].split(" MB")[0])
        assert abs(path.stat().st_size / 2**20 - stated) < 0.05  # the size on the button is the file's
    finally:
        pg.close()
    context = browser.new_context()
    asked = []
    context.route("**/*", lambda route: (asked.append(route.request.url), route.continue_()))
    context.set_offline(True)
    offline = context.new_page()
    try:
        offline.goto(path.as_uri())
        offline.locator(".js-plotly-plot").first.wait_for(timeout=30_000)
        traces = offline.evaluate("() => document.querySelector('.js-plotly-plot').data.map(t => t.type)")
        assert "heatmap" in traces
        assert offline.locator(".js-plotly-plot .heatmaplayer image, .js-plotly-plot .hm image").count() >= 1
        text = offline.locator("body").inner_text()
        assert "The animal didn't cross the street" in text and "head" in text
        assert [u for u in asked if not u.startswith("file://")] == []  # nothing from the network
    finally:
        context.close()


def test_the_heads_page_labels_every_token_on_every_map(browser, server):
    """The layer grid, one head's map and its value-weighted pair: as many tick labels as tokens on every axis (up to
    64 tokens), each visible; in a window narrower than a laptop's full screen the grid keeps its width (no label on a
    map) and scrolls sideways."""
    pg = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        for view in ("Layer", "Head", "Head&value=true"):
            pg.goto(f"{server}/?view={view}&layer=2&head=3")
            pg.wait_for_selector("[data-testid=stMain] .js-plotly-plot", timeout=90_000)
            pg.wait_for_function(SETTLED_JS, polling=250, timeout=90_000)
            counts = pg.evaluate("""() => {
              const gd = document.querySelector('[data-testid=stMain] .js-plotly-plot'), lay = gd._fullLayout;
              return gd._fullData.filter(t => t.type === 'heatmap').flatMap(t => [[t.xaxis, t.x], [t.yaxis, t.y]])
                .map(([a, v]) => [lay[a.replace(/^x/, 'xaxis').replace(/^y/, 'yaxis')]._vals.length, v.length]);
            }""")
            assert len(counts) == {"Layer": 24, "Head": 2}.get(view, 4)  # value=true: α beside ||αf(x)||
            assert all(shown == tokens == 16 for shown, tokens in counts), (view, counts)  # the default sentence
            # drawn without Streamlit's theme (so without plotly's automargin), α and ||αf(x)|| had every row label
            # cut at the left and every key label below the figure (22-51 px)
            assert pg.evaluate(VISIBLE_JS) == [], view
            if view == "Layer":  # a laptop's window not at full width: the grid keeps its width and scrolls sideways
                pg.set_viewport_size({"width": 1000, "height": 800})
                pg.wait_for_function(RESIZED_JS, polling=250, timeout=30_000)
                assert pg.evaluate(VISIBLE_JS) == []  # each map's row labels off the map to its left (18-42 px over)
                box = pg.evaluate(
                    "() => { const b = document.querySelector('[class*=st-key-wide-grid-heads]');"
                    " return [b.scrollWidth, b.clientWidth]; }"
                )
                assert box[0] > box[1], box  # the rest of the grid is a sideways scroll away, not squeezed
                pg.set_viewport_size({"width": 1280, "height": 800})
    finally:
        pg.close()


def test_the_overview_of_every_head_names_its_tiles_where_they_stand(browser, server):
    """The Heads page's Overview (every layer x head as a small map, tiled): the heads' and layers' names next to the
    tiles, at 1280x800 and on a phone. Its height was fixed at 70 px a layer: BERT's 6 x 12 tiles filled 333 of a
    laptop's 438 px, the heads' names 69 px under them; on a phone the tiles were 108 px tall in 428."""
    laptop = browser.new_page(viewport={"width": 1280, "height": 800})
    phone = browser.shared_page(viewport=PHONE, user_agent=PHONE_AGENT, is_mobile=True, has_touch=True)
    try:
        for pg in (laptop, phone):
            pg.goto(f"{server}/?view=Overview")
            pg.wait_for_selector("[data-testid=stMain] .js-plotly-plot .hm image", timeout=90_000)
            pg.wait_for_function(SETTLED_JS, polling=250, timeout=90_000)
            assert pg.evaluate(NAMES_JS) == [] and pg.evaluate(VISIBLE_JS) == []
            ticks = pg.evaluate("() => [...document.querySelectorAll('g.xtick text')].map(t => t.textContent)")
            assert ticks == [f"H{h}" for h in range(1, 13)], ticks  # BERT's 12 heads, each named
    finally:
        laptop.close()
        phone.close()


def test_the_cost_of_masks_measured_here_keeps_its_legends_between_title_and_plot(browser, server):
    """The Masks page's cost, measured on this server when asked: two log-log charts in half the column each, five
    lines and three in their legends. The legends' rows stood in a fixed margin and rose over the charts' titles
    ("time of one pass" under "dense + mask"). At 1280x800 and on a 1920x1080 projector, every legend row stands
    between its chart's title and its plot (VISIBLE_JS), as a phone's do in the readability visits' own charts."""
    pg = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        pg.goto(f"{server}/masks?model=default")
        measure = pg.get_by_role("button", name="Measure on this server").first
        measure.wait_for(timeout=120_000)
        pg.wait_for_function(IDLE_JS, timeout=120_000)
        measure.click()
        pg.locator("[data-testid=stMain] .st-key-mk-mem .js-plotly-plot .legend").wait_for(timeout=300_000)
        pg.wait_for_function(SETTLED_JS, polling=250, timeout=120_000)
        assert pg.evaluate(VISIBLE_JS) == []
        legends = "() => document.querySelectorAll('[data-testid=stMain] .legend .traces').length"
        assert pg.evaluate(legends) == 8  # the time's five lines (two of them references), the scores' three
        pg.set_viewport_size({"width": 1920, "height": 1080})
        pg.wait_for_function(RESIZED_JS, polling=250, timeout=30_000)
        pg.locator("[data-testid=stSidebar]").get_by_text("Projector mode", exact=True).click()
        pg.wait_for_function("() => new URL(location.href).searchParams.get('projector') === 'true'", timeout=60_000)
        pg.locator("[data-testid=stMain] .st-key-mk-mem .js-plotly-plot .legend").wait_for(timeout=120_000)
        pg.wait_for_function(SETTLED_JS, polling=250, timeout=120_000)
        assert pg.evaluate(VISIBLE_JS) == [] and pg.evaluate(legends) == 8
    finally:
        pg.close()


def test_a_link_to_a_head_opens_the_heads_page_in_the_packaged_app(browser, server):
    """`attnviz serve` runs the packaged app, whose pages are functions: Positions' "Open in Heads" (the Model
    overview's and the Corpus page's links go through the same widgets.open_head) took the file path
    app_pages/heads.py there and the page said "Something went wrong"."""
    pg = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        pg.goto(f"{server}/positions?model=default")
        button = pg.get_by_role("button", name="Open in Heads").first
        button.wait_for(timeout=120_000)
        pg.wait_for_function(IDLE_JS, timeout=120_000)
        button.click()
        # the page writes the head's parameters, then switches: wait for both (the address held view=Head on
        # /positions for a moment, and a test that waited for the parameters alone read the path then)
        pg.wait_for_function(
            "() => location.search.includes('view=Head') && !location.pathname.includes('positions')", timeout=30_000
        )
        pg.get_by_role("heading", name="Where does each token look?").wait_for(timeout=90_000)  # the Heads page
        pg.wait_for_selector("[data-testid=stMain] .js-plotly-plot", timeout=90_000)
        pg.wait_for_function(IDLE_JS, timeout=60_000)
        assert pg.locator("[data-testid=stMain] [data-testid=stAlertContainer]").count() == 0
        assert "/positions" not in pg.url
    finally:
        pg.close()


def test_a_click_on_a_head_in_a_notebook_views_grid_draws_it_large_with_no_kernel(browser, tmp_path, bundled_hf):
    """The notebook view's grid said "pick a head for full detail" and clicks did nothing: a click on a head's map
    draws that head in the one-head map of the same output, from the data already in the page (offline, no kernel:
    the view saved as a file)."""
    import attnviz

    path = attnviz.show(bundled_hf.run(bundled_hf.encode(SENTENCE)), layer=2, head=0).to_html(tmp_path / "view.html")
    context = browser.new_context(viewport={"width": 1280, "height": 2400})
    context.set_offline(True)
    pg = context.new_page()
    try:
        pg.goto(path.as_uri())
        pg.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length === 3", timeout=30_000)
        grid, head = pg.locator(".js-plotly-plot").nth(1), pg.locator(".js-plotly-plot").nth(2)
        assert head.evaluate("gd => gd.layout.title.text").startswith("Layer 3, head 1")
        box = grid.locator(".nsewdrag[data-subplot=x5y5]").bounding_box()  # head 5's map
        pg.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        pg.wait_for_function(
            "() => document.querySelectorAll('.js-plotly-plot')[2].layout.title.text.startsWith('Layer 3, head 5')",
            timeout=10_000,
        )
        z = head.evaluate("gd => Array.from(gd.data[0].z, row => Array.from(row))")
        assert np.allclose(
            np.array(z, dtype=float), bundled_hf.run(bundled_hf.encode(SENTENCE)).main.weights[2, 4].numpy(), atol=1e-6
        )
    finally:
        context.close()
