"""harness/server.py's wait for a server to answer: bounded by what the server does, not by the wall."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.server import free_port, wait_healthy

ANSWERS = """
import http.server, sys
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok" if self.path == "/_stcore/health" else b"")
    def log_message(self, *args): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


def _started(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *args])


@pytest.mark.slow  # spins a process for a second of CPU
def test_a_server_that_answers_is_healthy_one_that_exits_stalls_or_spins_is_not_and_says_so():
    port = free_port()
    runs = {
        "answers": (_started(ANSWERS, str(port)), None),
        "exits": (_started("import sys; sys.exit(3)"), "exited (3)"),
        "stalls": (_started("import time; time.sleep(60)"), "used no CPU for 1 s"),
        "spins": (_started("while True: pass"), "without answering"),
    }
    try:
        for name, (proc, said) in runs.items():
            why = wait_healthy(proc, port if name == "answers" else free_port(), cpu_s=1.0, stall_s=1.0)
            assert (why is None) if said is None else (why is not None and said in why), (name, why)
    finally:
        for proc, _ in runs.values():
            proc.kill()
            proc.wait()
