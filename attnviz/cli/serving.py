"""Commands that open the app to a room: `serve` (the database checked, the address students reach found, the
default model preloaded, then Streamlit) and `class create` (a class's code and links ahead of a lesson)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from attnviz.cli.common import (
    BAD_INPUT,
    write_json,
)


def cmd_class(args: argparse.Namespace) -> int:
    """Start a class ahead of a lesson: its code, the teacher's and the students' links, when it ends."""
    import datetime as dt

    from attnviz.liveclass import reach
    from attnviz.liveclass.database import DATABASE_ERRORS, error_line
    from attnviz.liveclass.records import links
    from attnviz.liveclass.store import Store

    args.base_url = args.base_url or os.environ.get(reach.BASE_URL_ENV) or "http://localhost:8501"
    links(args.base_url, "CHECK")  # a bad address fails before a class is made
    if reach.is_loopback(reach.url_host(args.base_url)):
        found = reach.lan_address()
        hint = f" (this machine's network address looks like http://{found}:8501)" if found else ""
        print(
            f"attnviz: warning: {args.base_url} opens on this machine only: students' devices cannot reach it. "
            f"Pass --base-url with the address students open{hint}.",
            file=sys.stderr,
        )
    try:
        store = Store(args.db) if args.db else Store()
    except DATABASE_ERRORS as err:  # an unusable setting or an unreachable server: one line, not a traceback
        raise ValueError(f"the class database cannot be used: {error_line(err)}") from None
    code, secret, expires = store.create_class(hours=args.hours)
    urls = links(args.base_url, code, secret)
    when = dt.datetime.fromtimestamp(expires, dt.UTC).isoformat(timespec="seconds")
    print(
        f"class {code}, ends {when}\nstudents: {urls['student_url']}\nteacher (keep it private): {urls['teacher_url']}"
    )
    write_json(
        args.json,
        {"code": code, "teacher_url": urls["teacher_url"], "student_url": urls["student_url"], "expires": when},
    )
    return 0


def settle_memory() -> int:
    """Set what the server has loaded so far (Python, torch, transformers, Streamlit, the default model) aside from
    the garbage collector's full passes, which otherwise walk those half a million objects every few seconds under a
    class's load and stop every page for about 0.4 s each time (seen in bench/load.py --class: a change's p95 went
    up by as much). Everything made later (pages, figures, sessions) is still collected. How many objects."""
    import gc

    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def cmd_serve(args: argparse.Namespace) -> int:
    """The app, with the default model loaded (and the default text computed) before the server opens."""

    from streamlit.web import cli as streamlit_cli

    from attnviz.liveclass import database, reach, store

    try:  # the class database (ATTNVIZ_DB) opens now, or the server does not start
        db = store.Store()
    except database.DATABASE_ERRORS as err:
        print(
            f"attnviz: error: the class database ({database.DB_ENV}) cannot be used: {database.error_line(err)}",
            file=sys.stderr,
        )
        return BAD_INPUT
    print(f"attnviz: classes are stored in {db.describe()}", flush=True)
    db.close()
    address = reach.EVERY_INTERFACE if args.lan else args.address
    given = args.public_url or os.environ.get(reach.BASE_URL_ENV)
    if given:  # the operator's address: the class's links and QR code carry it
        os.environ[reach.BASE_URL_ENV] = url = reach.checked_url(given)
        warning = reach.LOOPBACK_WARNING.format(url=url) if reach.is_loopback(reach.url_host(url)) else None
    else:
        found, warning = reach.room_url(address, args.port)
        url = found or ""
        if url:  # for a teacher who opened the server on its own machine (localhost)
            os.environ[reach.FOUND_URL_ENV] = url
    where = url or "the address the teacher's browser opens"
    print(f"attnviz: listening on {address}:{args.port}; students open {where}", flush=True)
    if warning:
        print(f"attnviz: warning: {warning}", file=sys.stderr, flush=True)
    app = Path(__file__).resolve().parent.parent / "streamlit_app.py"  # inside the package: works from any folder
    if not args.no_preload:
        from attnviz import api
        from attnviz.ui import controls

        seconds = api.preload(controls.DEFAULT_TEXT)
        print(f"attnviz: default model loaded and its first page computed in {seconds:.1f} s", flush=True)
    settle_memory()
    from attnviz.ui.frame import SETTINGS  # the server's settings as flags: nothing is written into any folder

    flags = [f"--{k}={v}" for k, v in SETTINGS.items()]
    flags += ["--server.port", str(args.port), "--server.address", address]
    keep_to_the_room()
    sys.argv = ["streamlit", "run", str(app), *flags, *args.streamlit]
    return streamlit_cli.main()


def keep_to_the_room() -> None:
    """Nothing leaves the machine because a server started: on every interface (--lan), Streamlit asks a web service
    for this machine's public address at start ("External URL") and again for the origin of any page it does not
    recognise, and prints "Did not auto detect external IP" when the request fails. A classroom server has no use for
    that address (students open the one `serve` prints: the network's, or --public-url), so it is never asked for."""
    from streamlit import net_util

    net_util.get_external_ip = lambda: None  # read at each call by bootstrap and server_util
