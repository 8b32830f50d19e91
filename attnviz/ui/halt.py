"""A page's end before its bottom (a message shown, nothing more to draw), that still lets the frame finish the run.

`st.stop()` ends the whole script run: after it Streamlit takes no more calls, so what the frame draws after the page
(the device line, the class's published view, a follower's `?drawn=` and heartbeat) would be lost whenever a page
stopped early. Pages call `halt()` instead: it raises `Halted`, which the frame catches around the page and then goes
on. Inside a fragment's own rerun (its timer, or a widget in it) the page's frame does not run, so there `halt()` is
`st.stop()`, which ends the fragment's run alone.
"""

from __future__ import annotations

from typing import NoReturn

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx


class Halted(BaseException):  # noqa: N818 - a control-flow signal, not an error: no `except Exception` takes it
    """The page has said what it had to; the frame draws the rest of the run."""


def halt() -> NoReturn:
    """End the page here (the messages drawn so far stay)."""
    ctx = get_script_run_ctx()
    if ctx is not None and ctx.fragment_ids_this_run:
        st.stop()
    raise Halted
