"""The view's state in the URL, so a shared link opens the same view.

Before a widget is created, `restore` seeds its session-state value from the URL (once per
key per session); after the page is drawn, `publish` writes the current values back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

_PUBLISHED = "_url_params"


def _bool(raw: str) -> bool:
    return raw.lower() in ("1", "true", "yes", "on")


CASTS: dict[type, Callable[[str], Any]] = {bool: _bool, int: int, str: str}


def restore(widget_key: str, url_key: str, default: Any, valid: Callable[[Any], bool] = lambda v: True) -> None:
    """Give the widget `widget_key` its value from ?url_key=..., else `default`, if it has none yet."""
    if widget_key in st.session_state:
        if not valid(st.session_state[widget_key]):
            st.session_state[widget_key] = default
        return
    raw = st.query_params.get(url_key)
    value = default
    if raw is not None:
        try:
            value = CASTS[type(default)](raw)
        except (ValueError, KeyError):
            value = default
        if not valid(value):
            value = default
    st.session_state[widget_key] = value


def remember(url_key: str, value: Any) -> None:
    """Note a value for the URL; `publish` writes them all at the end of the run."""
    st.session_state.setdefault(_PUBLISHED, {})[url_key] = value


def publish() -> dict[str, str]:
    """Write the values remembered in this run to the URL (app.py calls it last); the URL state, as written."""
    params = {
        k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in st.session_state.pop(_PUBLISHED, {}).items()
    }
    if dict(st.query_params) != params:
        st.query_params.from_dict(params)
    return params
