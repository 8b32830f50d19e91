"""What one visitor's browser may not do to everyone on the server.

Streamlit answers a `clear_cache` message from any browser session by clearing every `st.cache_data` and
`st.cache_resource` of the server: one student's scripted websocket (or the "Clear cache" menu item) would drop
the loaded models and the scored benchmarks for the whole class. `install` makes that message clear the sender's
own session state only, which is all the menu item needs to mean for one person. The operator clears the server's
caches by restarting it.
"""

from __future__ import annotations

import logging

from streamlit.runtime.app_session import AppSession

_INSTALLED = "_attnviz_clear_cache_guarded"
CLEARED_OWN = "a visitor's clear_cache cleared their own session only; the server's caches stay"


def _clear_own_session(session: AppSession) -> None:
    """A visitor's clear_cache: their own session state, not the server's caches."""
    session._session_state.clear()
    logging.getLogger("attnviz").warning(CLEARED_OWN)


def install() -> None:
    """Guard the server (once per process; later calls do nothing)."""
    if getattr(AppSession, _INSTALLED, False):
        return
    AppSession._handle_clear_cache_request = _clear_own_session
    setattr(AppSession, _INSTALLED, True)
