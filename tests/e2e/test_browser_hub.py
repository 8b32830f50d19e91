"""What a link cannot do in Chromium: put a link, a request or a traceback in the page through markdown and HTML in
links, boxes and files. (That a link cannot make an online server contact the hub is a server's behaviour, checked
over the websocket in test_protocol.py.)"""

from __future__ import annotations

import json

from browsing import SLOW_BROWSER, _type

from harness.server import SETTLED_JS

pytestmark = SLOW_BROWSER


INJECTION = "[Session expired: log in again](http://127.0.0.1:1/login) ![x](http://127.0.0.1:1/pixel.png) <img src=http://127.0.0.1:1/i.png>"


def test_markdown_and_html_from_links_boxes_and_files_make_no_link_no_request_and_no_traceback(
    browser, server, tmp_path
):
    import urllib.parse

    q = urllib.parse.quote(INJECTION)
    pg = browser.new_page(viewport={"width": 1400, "height": 1000})
    requests = []
    pg.on("request", lambda r: requests.append(r.url))

    def settle(selector: str) -> None:
        pg.wait_for_selector(selector, timeout=90_000)
        pg.wait_for_function(SETTLED_JS, polling=250, timeout=90_000)
        assert pg.locator("[data-testid=stException]").count() == 0
        links = pg.evaluate("() => [...document.querySelectorAll('a[href]')].map(a => a.href)")
        images = pg.evaluate("() => [...document.querySelectorAll('img[src]')].map(i => i.src)")
        assert not [u for u in links + images if "127.0.0.1:1/" in u], (links, images)

    try:
        for link in (f"/?text={q}", f"/?model={q}", f"/compare?source=dates&date={q}", f"/compare?source=bert&b={q}"):
            pg.goto(f"{server}{link}")
            settle(".js-plotly-plot")
        pg.goto(f"{server}/")
        settle(".js-plotly-plot")
        _type(pg, INJECTION)  # the sidebar's text box
        settle(".js-plotly-plot")
        pg.goto(f"{server}/compare?source=dates")
        settle(".js-plotly-plot")
        box = pg.get_by_label("A date, written any way")
        box.fill(INJECTION)
        box.press("Enter")
        settle(".js-plotly-plot")
        cases = tmp_path / "cases.jsonl"
        case = {"text": f"The cat saw the dog, {INJECTION}, and it ran.", "pronoun": "it", "candidates": ["cat", "dog"]}
        bad = {**case, "answer": INJECTION}  # its error message quotes the answer
        cases.write_text(json.dumps({**case, "answer": "dog"}) + "\n" + json.dumps(bad) + "\n")
        pg.goto(f"{server}/pronouns")
        settle("[data-testid=stRadio]")
        pg.get_by_role("tab", name="Benchmark").click()
        pg.locator("[data-testid=stMain] [data-testid=stFileUploaderDropzoneInput]").set_input_files(str(cases))
        # Uploaded, and the upload finished (the file's chip shows a spinner until then): a click before it would score
        # the built-in lesson instead, whose 273 cases outlast the wait below and load the machine for the next tests.
        pg.locator("[data-testid=stFileChipName]", has_text="cases.jsonl").first.wait_for(timeout=60_000)
        pg.wait_for_function(
            "() => !document.querySelector('[data-testid=stFileChipIconSpinner]')"
            " && !document.querySelector('[data-testid=stStatusWidget]')",
            timeout=90_000,
        )
        pg.get_by_role("button", name="Run the benchmark").click()
        pg.wait_for_selector("[data-testid=stAlertContentError]", timeout=60_000)
        assert "line 2: the answer" in pg.locator("[data-testid=stAlertContentError]").first.text_content()
        settle("[data-testid=stAlertContentError]")
    finally:
        pg.close()
    outside = [u for u in requests if not u.startswith(server)]
    assert outside == [], outside
