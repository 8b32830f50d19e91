"""What a link cannot do in Chromium: make an online server contact the hub, or put a link, a request or a traceback
in the page through markdown and HTML in links, boxes and files."""

from __future__ import annotations

import json

from browsing import SLOW_BROWSER, _type

from harness.server import SETTLED_JS, free_port, start_server

pytestmark = SLOW_BROWSER


class FakeHub:
    """A port that answers every HTTP request with 404 and remembers what was asked: a hub that holds nothing."""

    def __init__(self) -> None:
        import http.server
        import threading

        asked = self.asked = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self):
                asked.append(f"{self.command} {self.path}")
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_HEAD = do_POST = _answer

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


HUB_LINKS = [  # every way a student could name a model: links to each page, and the Compare page's hub box
    "/?model=bigscience/bloom",
    "/?model=gpt2&backend=hf",
    "/inside?model=bert-base-uncased",
    "/overview?model=t5-small",
    "/pronouns?model=distilbert-base-uncased",
    "/compare?source=hub&hub=Helsinki-NLP/opus-mt-en-de",
    "/compare?source=hub&hub=facebook/bart-large",
]


def _visit(browser, url: str, selector: str = "[data-testid=stSidebar]") -> list[str]:
    """Open a page, wait for it to settle; the texts of its alerts."""
    pg = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        pg.goto(url)
        pg.wait_for_selector(selector, timeout=90_000)
        pg.wait_for_function(SETTLED_JS, polling=250, timeout=90_000)
        assert pg.locator("[data-testid=stException]").count() == 0, url
        return pg.locator("[data-testid=stAlert]").all_text_contents()
    finally:
        pg.close()


def test_an_online_server_never_contacts_the_hub_unless_its_operator_allows_downloads(browser, tmp_path):
    hub = FakeHub()
    online = {
        "HF_HUB_OFFLINE": None,
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(tmp_path / "hf"),
        "ATTNVIZ_MODELS": None,
        "ATTNVIZ_ALLOW_DOWNLOADS": None,
    }
    try:
        port = free_port()
        proc = start_server(port, tmp_path / "online.log", online)
        try:
            for link in HUB_LINKS:
                alerts = _visit(browser, f"http://127.0.0.1:{port}{link}")
                assert any("does not offer" in a for a in alerts), (link, alerts)
            assert hub.asked == [], hub.asked
        finally:
            proc.terminate()
            proc.wait(10)
        port = free_port()  # the same server with downloads allowed does ask the hub: the test can see it
        proc = start_server(port, tmp_path / "downloads.log", {**online, "ATTNVIZ_ALLOW_DOWNLOADS": "1"})
        try:
            alerts = _visit(browser, f"http://127.0.0.1:{port}/?model=attnviz-test/no-such-model")
            assert any("could not be loaded" in a for a in alerts), alerts
            assert hub.asked, "with downloads allowed the server should have asked the hub"
        finally:
            proc.terminate()
            proc.wait(10)
    finally:
        hub.close()


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
