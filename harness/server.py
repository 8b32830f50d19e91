"""The app's server on a free port, as `make run` starts it (the default model loaded first), and the Chromium that
the browser tests and benchmarks drive (Debian's, headless)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
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
IDLE_JS = "() => !document.querySelector('[data-testid=stStatusWidget]')"  # no run in progress (its elements may lag)
# A page that has settled: no run in progress, every chart element in the main area drawn by plotly, and the same count
# of elements and drawn charts at two polls in a row (Playwright polls every 250 ms with polling=250). Tests wait for
# this condition where they slept a fixed 1-1.5 s for "the page's later charts".
SETTLED_JS = """() => {
  if (document.querySelector('[data-testid=stStatusWidget]')) return false;
  const main = document.querySelector('[data-testid=stMain]');
  if (!main) return false;
  const charts = main.querySelectorAll('[data-testid=stPlotlyChart]').length;
  const drawn = [...main.querySelectorAll('.js-plotly-plot')].filter(p => p._fullLayout).length;
  const now = `${charts}/${drawn}/${main.querySelectorAll('[data-testid=stElementContainer]').length}`;
  const same = window.__attnvizSettled === now;
  window.__attnvizSettled = now;
  return same && drawn >= charts;
}"""


# Ports handed out by free_port: each process takes its own block below the kernel's ephemeral range (32768-60999 on
# Linux, where outgoing connections and bind(0) draw), so that two pytest-xdist workers (PYTEST_XDIST_WORKER=gw0, gw1,
# ...) never hand out the same port, and no port is handed out twice in one process though its server has not bound it
# yet (the two-server class test asked bind(0) twice before starting either, which could name one port twice).
PORT_BLOCK = 400
_handed: set[int] = set()


def _first_port() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    n = int(worker[2:]) + 1 if worker.startswith("gw") and worker[2:].isdigit() else 0
    return 20000 + (n % 30) * PORT_BLOCK


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, from this process's own block, never one handed out
    before by this process."""
    start = _first_port()
    for port in range(start, start + PORT_BLOCK):
        if port in _handed:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed.add(port)
        return port
    raise RuntimeError(f"no free port in {start}-{start + PORT_BLOCK - 1}")


def start_server(port: int, log_path, env: dict | None = None) -> subprocess.Popen:
    """`python -m attnviz serve` (the default model loaded first, as `make run` and the image do) on a port, offline
    unless `env` says otherwise; returns once it is healthy."""
    cmd = [sys.executable, "-m", "attnviz", "serve", "--port", str(port), "--server.fileWatcherType", "none"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    env = {k: v for k, v in env.items() if v is not None}  # None: unset it
    with open(log_path, "w") as log:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    why = wait_healthy(proc, port)
    if why:
        proc.kill()
        raise RuntimeError(f"streamlit did not become healthy: it {why}; see {log_path}")
    return proc


def wait_healthy(
    proc: subprocess.Popen, port: int, *, cpu_s: float | None = None, stall_s: float | None = None
) -> str | None:
    """None once the server that `proc` started (it, or a process under it: `make run`) answers on `port`; else why
    it never will: it exited, used no CPU for STALL_S (it waits on a lock or a network), or used more than
    START_CPU_S without answering (it spins); `cpu_s` and `stall_s` put other bounds.

    How long a start may take is counted in the server's own CPU, not the wall's: alone it was healthy after about
    12 s of CPU (12-16 s of wall; 4.4-4.6 s of both on 2026-11-30, the default model's first page included), but beside
    the suite's four workers on two cores, on a slow day, a class test's second server had not answered after 90 s of
    wall (its first page took 36.7 s against 6.2 alone), and the test failed though nothing was wrong."""
    cpu_s, stall_s = cpu_s or START_CPU_S, stall_s or STALL_S
    cpu, still = _tree_cpu_seconds(proc.pid), time.monotonic()
    while proc.poll() is None:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                return None
        except OSError:
            time.sleep(0.5)
        now = _tree_cpu_seconds(proc.pid)
        if now > cpu_s:
            return f"used {now:.0f} s of CPU without answering"
        if now > cpu + 0.05:
            cpu, still = now, time.monotonic()
        elif time.monotonic() - still > stall_s:
            return f"used no CPU for {stall_s:.0f} s"
    return f"exited ({proc.returncode})"


START_CPU_S = 120.0  # ten times a start's CPU alone once (12 s; 4.5 s now)
STALL_S = 60.0  # no CPU used for this long: it waits on something that will not come


def _tree_cpu_seconds(pid: int) -> float:
    """The user and system time so far of a process and every process under it (those still running)."""
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))  # (parent, ticks)
    tree = {pid}
    for _ in range(8):  # a few levels: make, its shell, python
        tree |= {p for p, (parent, _) in stats.items() if parent in tree}
    return sum(stats[p][1] for p in tree if p in stats) / os.sysconf("SC_CLK_TCK")
