"""attnviz: the frame. Page config, the shared sidebar, navigation over app_pages/.

The pages live in app_pages/, not pages/: with a folder named pages/, Streamlit 1.67 starts in its
old folder-based mode server-wide, and a first request for a page's URL then runs that page without
this file (no navigation, no layout) until some session loads "/".
"""

import copy
import logging

import streamlit as st

from attnviz.ui import controls, guards, seat, state

FAILED = (
    "Something went wrong on this page. Try another text or model; if it happens again, tell the person "
    "running this server (the details are in its log)."
)

guards.install()  # once per server: what a visitor's browser may not do to everyone (clear every cache)
st.set_page_config(page_title="attnviz — see where attention goes", page_icon="🔍", layout="wide")


@st.cache_resource(show_spinner=False)
def _pages() -> tuple:
    """The pages, made once per server (each st.Page resolves its file: a class of 100 redrawing at once paid for
    it 1,200 times); every run navigates over its own copies, since a run marks the page it shows."""
    return (
        st.Page("app_pages/heads.py", title="Heads", icon=":material/grid_view:", default=True),
        st.Page("app_pages/inside.py", title="Inside multi-head attention", icon=":material/calculate:"),
        st.Page("app_pages/compare.py", title="Self vs masked vs cross", icon=":material/compare:"),
        st.Page("app_pages/generate.py", title="Generate", icon=":material/edit_note:"),
        st.Page("app_pages/overview.py", title="Model overview", icon=":material/insights:"),
        st.Page("app_pages/pronouns.py", title="Pronoun resolution", icon=":material/quiz:"),
        st.Page("app_pages/positions.py", title="Positions", icon=":material/format_list_numbered:"),
        st.Page("app_pages/head_count.py", title="One head vs many", icon=":material/view_column:"),
        st.Page("app_pages/masks.py", title="Masks and their cost", icon=":material/filter_alt:"),
        st.Page("app_pages/induction.py", title="Induction heads", icon=":material/repeat:"),
        st.Page("app_pages/knockout.py", title="Knock out and patch", icon=":material/science:"),
        st.Page("app_pages/classroom.py", title="Class", icon=":material/groups:"),
    )


navigation = st.navigation([copy.copy(page) for page in _pages()])
try:  # before any widget: a follower takes the teacher's view
    here = seat.seat()
    if here is not None:
        seat.follow(here, navigation.url_path)
except seat.STORE_ERRORS as err:  # the class database failed: the class is a message, the app goes on
    here = None
    seat.failed(err)
st.session_state["class.seat"] = here
controls.sidebar()
if here is not None:
    try:
        seat.sidebar_panel(here)
    except seat.STORE_ERRORS as err:
        seat.failed(err)
try:
    navigation.run()
except seat.STORE_ERRORS as err:
    seat.failed(err, st)
except Exception:  # a bug, not bad input (that has its own messages): a message here, the traceback in the log
    logging.getLogger("attnviz").exception("page %r failed", navigation.title)
    st.error(FAILED)
controls.show_device()
try:
    seat.publish(here, navigation.url_path, state.publish())
except seat.STORE_ERRORS as err:
    seat.failed(err)
seat.drawn(here)  # the end of a student's whole run: what it drew, in the URL (a heartbeat checks the browser got it)
