"""Start `python -m attnviz serve` and draw its first page through Streamlit's own protocol (no browser): the time to
the port, the time to the page, the sidebar's device line, and any error or exception on the page.

Used on the GPU machine (issue 40: does the sidebar name the GPU?), where no browser is; it runs anywhere the app's
runtime is installed. Exits 1 if the page shows an error or an exception, or never names a device.

Usage: python scripts/serve-check.py [--port 8765]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


async def first_page(url: str) -> tuple[list[str], list[str]]:
    """(every markdown text of the first run, its errors and exceptions)."""
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    texts, errors = [], []
    async with websockets.connect(url, subprotocols=["streamlit"], max_size=64 * 2**20) as ws:
        msg = BackMsg()
        msg.rerun_script.query_string = ""
        await ws.send(msg.SerializeToString())
        while True:
            fwd = ForwardMsg()
            fwd.ParseFromString(await asyncio.wait_for(ws.recv(), timeout=300))
            kind = fwd.WhichOneof("type")
            if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                el = fwd.delta.new_element
                which = el.WhichOneof("type")
                if which == "markdown":
                    texts.append(el.markdown.body)
                elif which == "exception":
                    errors.append(f"exception: {el.exception.message[:300]}")
                elif which == "alert" and el.alert.format == el.alert.ERROR:
                    errors.append(f"error: {el.alert.body[:300]}")
            elif kind == "script_finished" and fwd.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                return texts, errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    # A streamlit installed with `pip --target` (how wheels travel to the GPU machine) takes itself for a development
    # checkout and then refuses --server.port.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "STREAMLIT_GLOBAL_DEVELOPMENT_MODE": "false"}
    cmd = [sys.executable, "-m", "attnviz", "serve", "--port", str(args.port), "--server.fileWatcherType", "none"]
    start = time.perf_counter()
    server = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{args.port}/_stcore/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                if server.poll() is not None:
                    print(server.stdout.read() if server.stdout else "", end="")
                    print(f"serve-check: the server exited with {server.returncode}")
                    return 1
                time.sleep(0.2)
        port_s = time.perf_counter() - start
        start = time.perf_counter()
        texts, errors = asyncio.run(first_page(f"ws://127.0.0.1:{args.port}/_stcore/stream"))
        page_s = time.perf_counter() - start
    finally:
        server.terminate()
        out, _ = server.communicate(timeout=30)
    print(out.strip())
    device = [t for t in texts if t.startswith("Device:")]
    print(f"serve-check: port open after {port_s:.1f} s (the model loaded and its first page computed before it)")
    print(f"serve-check: first page drawn over the protocol in {page_s:.2f} s, {len(texts)} markdown elements")
    print(f"serve-check: the sidebar says: {device[0] if device else '(no device line)'}")
    for e in errors:
        print(f"serve-check: {e}")
    return 0 if device and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
