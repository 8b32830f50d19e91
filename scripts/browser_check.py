"""Open the app in Chromium and check that the Heads page draws one heatmap per head. Usage: browser_check.py URL"""

import shutil
import sys
import time

from playwright.sync_api import sync_playwright

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
COUNT_JS = "() => document.querySelectorAll('.js-plotly-plot g.hm image').length"


def main(url: str) -> int:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        start = time.perf_counter()
        page.goto(url)
        page.wait_for_function(f"({COUNT_JS})() === 12", timeout=120_000)
        print(f"Heads page: {page.evaluate(COUNT_JS)} heatmaps drawn in {time.perf_counter() - start:.1f} s")
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
