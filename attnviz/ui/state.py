"""The view's state in the URL, so a shared link opens the same view.

Before a widget is created, `restore` seeds its session-state value from the URL (once per
key per session); after the page is drawn, `publish` writes the current values back.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import streamlit as st

from attnviz import escape

_PUBLISHED = "_url_params"
_SHOWN = "_shown_head"
_BOUND = "_url_bound"  # {widget key: (URL key, the type restore casts to)}: every widget restored from the URL
_PAGES = "_page_params"  # {page's URL path: the URL state its last run published}
_LAST = "_last_page"  # the page this session's last run showed
LOOK = ("palette", "projector")  # how a view looks, not what it shows: a student may change it and still follow
MODEL_KEY = "sb.choice"  # the sidebar's model menu (controls.CHOICES' keys are its values)


def choose_model(choice: str) -> None:
    """A button's callback: the sidebar's model menu set to `choice` for the run the click starts (a callback runs
    before the menu is drawn again, so the menu shows it)."""
    st.session_state[MODEL_KEY] = choice


def _bool(raw: str) -> bool:
    """A switch's value in the URL: true/false (as `publish` writes them), 1/0, yes/no, on/off; anything else is not a
    value (?log=maybe drew the maps linearly without a word, as if log=false had been asked)."""
    said = raw.strip().lower()
    if said in ("1", "true", "yes", "on"):
        return True
    if said in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a switch's value: {raw!r}")


CASTS: dict[type, Callable[[str], Any]] = {bool: _bool, int: int, str: str}


def restore(widget_key: str, url_key: str, default: Any, valid: Callable[[Any], bool] = lambda v: True) -> None:
    """Give the widget `widget_key` its value from ?url_key=..., else `default`, if it has none yet."""
    st.session_state.setdefault(_BOUND, {})[widget_key] = (url_key, type(default))
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
            value = None
        if value is None or not valid(value):
            value = default
            refused(url_key, raw, default)
    st.session_state[widget_key] = value


def refused(url_key: str, raw: str, default: Any) -> None:
    """Say, once, that the address asked for a value this page does not offer, and what it shows instead (a link
    with ?layer=999 opened layer 1 without a word)."""
    asked = escape.md(f"{url_key}={raw}", limit=40)
    shown = ("on" if default else "off") if isinstance(default, bool) else escape.md(default)  # a switch's, in words
    st.info(f"The address asked for {asked}, which this page does not offer here: it shows {shown}.")


def bound(
    widget: Callable[..., Any],
    *args: Any,
    url: str,
    key: str,
    default: Any,
    valid: Callable[[Any], bool] = lambda v: True,
    **kwargs: Any,
) -> Any:
    """A widget whose value lives in the URL, in one call: restored from ?url=... (else `default`, and `default`
    where the value is not `valid`), drawn as `widget(*args, key=key, **kwargs)`, remembered for the URL; its value.
    `widget` is Streamlit's or a container's (`st.radio`, `column.slider`)."""
    restore(key, url, default, valid)
    value = widget(*args, key=key, **kwargs)
    remember(url, value)
    return value


def touched(params: dict[str, str]) -> list[str]:
    """The URL keys whose widget this session holds at another value than `params` gives it (as `restore` would
    read it): a following student's page, restored from the teacher's URL state, that the student changed since.
    Keys `params` does not name, and how the view looks (LOOK), are not compared."""
    out = []
    for widget_key, (url_key, kind) in st.session_state.get(_BOUND, {}).items():
        if url_key in LOOK or url_key not in params or widget_key not in st.session_state:
            continue
        try:
            wanted = CASTS[kind](params[url_key])
        except (ValueError, KeyError):
            continue  # not a value this widget could take from the URL: nothing to compare
        if st.session_state[widget_key] != wanted:
            out.append(url_key)
    return out


def forget_bindings() -> None:
    """Drop the record of widgets restored from the URL (their values are about to be restored afresh)."""
    st.session_state.pop(_BOUND, None)


def remember(url_key: str, value: Any) -> None:
    """Note a value for the URL; `publish` writes them all at the end of the run."""
    st.session_state.setdefault(_PUBLISHED, {})[url_key] = value


def keep(*url_keys: str) -> None:
    """These URL keys keep the values the URL has for them unless a widget drawn in this run remembers its own: a
    page's widgets that its text does not draw yet (a long text's window and log scale on a short text, a short
    text's view options on a long one). `publish` writes only what a run remembered, and a widget not drawn in a run
    loses its state, so a link's log=false was gone once the long text it was for was pasted. Not for a widget that
    a view of the same text leaves out (a Head view's head on the Layer view): a class's student takes the teacher's
    URL state whole, and a head kept from a page's stale URL would stand in it beside the teacher's Layer view
    (widgets.pick keeps that head in the session instead, never in the URL)."""
    published = st.session_state.setdefault(_PUBLISHED, {})
    for url_key in url_keys:
        raw = st.query_params.get(url_key)
        if raw is not None and url_key not in published:
            published[url_key] = raw


def show_head(layer: int, head: int | None = None) -> None:
    """Note what this run shows: one head (0-based), or a whole layer's heads (`head` None). A class's poll asks
    about the last head the teacher's pages showed (`seat.publish`); a page that shows no head (the Model
    overview's rollout, whose slider also names a layer) never changes it."""
    st.session_state[_SHOWN] = (layer, head)


def shown_head() -> tuple[int, int | None] | None:
    """What this run noted with show_head (once: the next run starts with nothing)."""
    return st.session_state.pop(_SHOWN, None)


def publish(page: str | None = None) -> dict[str, str]:
    """Write the values remembered in this run to the URL (app.py calls it last); the URL state, as written, kept as
    `page`'s own for when the session comes back to it (`arrive`)."""
    params = {
        k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in st.session_state.pop(_PUBLISHED, {}).items()
    }
    if dict(st.query_params) != params:
        st.query_params.from_dict(params)
    if page is not None:
        st.session_state.setdefault(_PAGES, {})[page] = params
    return params


def arrive(page: str, shared: Collection[str]) -> None:
    """Call before any widget. Back on a page this session showed before, through the navigation (the URL still holds
    the last page's own state, which Streamlit keeps across a switch): that page's own state again (the Heads page's
    view, layer and head, where the Model overview's rollout slider left "layer" at its own value and no head), with
    what every page shares (`shared`: the model, the text) as the URL has it now. A link, a switch that names its own
    parameters (a cell opening its head) or a teacher's view that a student takes leave the URL as it is."""
    last, kept = st.session_state.get(_LAST), st.session_state.get(_PAGES, {})
    st.session_state[_LAST] = page
    if last is None or last == page or page not in kept or dict(st.query_params) != kept.get(last):
        return
    now = dict(st.query_params)
    st.query_params.from_dict({**kept[page], **{k: v for k, v in now.items() if k in shared}})
    for widget_key, (url_key, _) in st.session_state.get(_BOUND, {}).items():  # restored afresh from that state
        if url_key not in shared:
            st.session_state.pop(widget_key, None)
