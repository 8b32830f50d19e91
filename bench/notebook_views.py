"""Benchmark: ten attnviz views in one notebook, their size, and what JupyterLab shows of them with no network.

A notebook of ten cells, each `attnviz.show(text, layer=...)` on the bundled BERT (a 12-head layer; ten sentences of
the built-in corpus), is executed in a fresh kernel (nbclient) and saved. It prints the .ipynb's size and each view's
output size (the first carries plotly.js; each later one its figures' data and their still pictures).

With `--lab JUPYTER` (a `jupyter` executable whose environment has JupyterLab: it is not one of attnviz's
requirements, e.g. `python -m venv /tmp/jlab && /tmp/jlab/bin/pip install jupyterlab`), it also starts JupyterLab on
the notebook's folder and opens the notebook in Chromium with every request not to this machine refused (and
counted), twice: untrusted as saved (no output's script runs: each figure shows as its still picture), then trusted
(`jupyter trust`: the figures draw with the first view's plotly.js). It counts the stills shown and the figures drawn
in each, and writes screenshots (OUT/untrusted.png, OUT/trusted.png).

Usage: python bench/notebook_views.py [--out /tmp/attnviz-views] [--lab /tmp/jlab/bin/jupyter]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

VIEWS = 10
STILLS_SHOWN_JS = """() => [...document.querySelectorAll('img[src^="data:image/png"]')].filter(i => {
  const b = i.getBoundingClientRect(); return i.complete && i.naturalWidth > 0 && b.width > 100 && b.height > 100
    && getComputedStyle(i).display !== 'none'; }).length"""
DRAWN_JS = "() => [...document.querySelectorAll('.attnviz-view .js-plotly-plot')].filter(p => p._fullLayout).length"


def notebook(out: Path) -> Path:
    """The ten-view notebook, executed in a fresh kernel and saved under `out`."""
    import nbformat
    from nbclient import NotebookClient

    from attnviz.analysis.head_stats import CORPUS

    cells = [nbformat.v4.new_code_cell(f"import attnviz\nTEXTS = {list(CORPUS)!r}")]
    cells += [
        nbformat.v4.new_code_cell(f"attnviz.show(TEXTS[{i % len(CORPUS)}], layer={i % 6}, head={i % 12})")
        for i in range(VIEWS)
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    env = {"PYTHONPATH": str(ROOT)}
    os.environ.update(env)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(out)}}).execute()
    path = out / "views.ipynb"
    nbformat.write(nb, path)
    return path


def sizes(path: Path) -> list[int]:
    """Each view's HTML output, in bytes."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    return [
        len(o["data"]["text/html"].encode())
        for c in nb.cells
        for o in c.get("outputs", [])
        if "attnviz-view" in o.get("data", {}).get("text/html", "")
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def in_lab(jupyter: str, path: Path, out: Path) -> None:
    """The notebook in JupyterLab in Chromium, untrusted then trusted, with the network refused."""
    from playwright.sync_api import sync_playwright

    from harness.server import ARGS, CHROMIUM

    port = _free_port()
    lab = subprocess.Popen(
        [
            jupyter,
            "lab",
            "--no-browser",
            "--allow-root",
            f"--port={port}",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            "--ServerApp.disable_check_xsrf=True",
            f"--ServerApp.root_dir={path.parent}",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(out / "lab.log", "w"),  # noqa: SIM115  (closed with the process)
    )
    refused: list[str] = []
    try:
        for _ in range(120):
            if lab.poll() is not None:
                raise SystemExit(f"JupyterLab stopped (exit {lab.returncode}): see {out / 'lab.log'}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            time.sleep(0.5)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            for trust in (False, True):
                if trust:
                    subprocess.run([jupyter, "trust", str(path)], check=True, capture_output=True)
                context = browser.new_context(viewport={"width": 1280, "height": 900})

                def route(r, refused=refused):
                    local = r.request.url.startswith((f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}"))
                    if local or r.request.url.startswith("data:"):
                        r.continue_()
                    else:
                        refused.append(r.request.url)
                        r.abort()

                context.route("**/*", route)
                tab = context.new_page()
                tab.goto(f"http://127.0.0.1:{port}/lab/tree/{path.name}", timeout=120_000)
                tab.wait_for_selector(".jp-OutputArea-output", timeout=120_000)
                for dialog_button in ("No Kernel", "Select", "Dismiss"):  # a kernel prompt, if any, closed
                    with contextlib.suppress(Exception):
                        tab.get_by_role("button", name=dialog_button).first.click(timeout=2_000)
                shown = drawn = 0
                for _ in range(60):  # scrolled through, so that every output is laid out
                    tab.evaluate(
                        "() => { const n = document.querySelector('.jp-WindowedPanel-outer') "
                        "|| document.querySelector('.jp-Notebook'); n.scrollTop += 600; }"
                    )
                    time.sleep(0.5)
                    shown = max(shown, tab.evaluate(STILLS_SHOWN_JS))
                    drawn = max(drawn, tab.evaluate(DRAWN_JS))
                tab.evaluate(
                    "() => { const n = document.querySelector('.jp-WindowedPanel-outer') "
                    "|| document.querySelector('.jp-Notebook'); n.scrollTop = 0; }"
                )
                time.sleep(1)
                name = "trusted" if trust else "untrusted"
                tab.screenshot(path=str(out / f"{name}.png"))
                print(
                    f"JupyterLab, {name}: still pictures shown {shown} of {3 * VIEWS}, interactive figures drawn "
                    f"{drawn} of {3 * VIEWS}; screenshot {out / (name + '.png')}"
                )
                context.close()
            browser.close()
    finally:
        lab.terminate()
        lab.wait(timeout=30)
    print(f"requests refused (not to this machine): {len(refused)}" + (f": {refused[:5]}" if refused else ""))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="/tmp/attnviz-views")
    parser.add_argument("--lab", default=None, help="a jupyter executable with JupyterLab (see the docstring)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    path = notebook(out)
    each = sizes(path)
    print(
        f"{len(each)} views executed in {time.perf_counter() - started:.1f} s; {path}: "
        f"{path.stat().st_size / 2**20:.2f} MiB. Views' HTML: first {each[0] / 2**20:.2f} MiB, later "
        f"{min(each[1:]) / 2**20:.3f}-{max(each[1:]) / 2**20:.3f} MiB"
    )
    if args.lab:
        in_lab(args.lab, path, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
