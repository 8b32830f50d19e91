"""The frame every page runs in: page config, the shared sidebar, navigation, the class (ui/room: one call), failures
as messages.

Two entries run it: the repository's app.py (`streamlit run app.py`, `make run` before this) over the page files in
app_pages/, and the packaged attnviz/streamlit_app.py (`attnviz serve`, from any folder once installed) over
each page's render(). Both offer the same pages at the same URLs (PAGES). The pages' folder is app_pages/, not
pages/: with a folder named pages/, Streamlit 1.67 starts in its old folder-based mode server-wide.
"""

from __future__ import annotations

import copy
import functools
import importlib
import logging

import streamlit as st

from attnviz.api import class_database
from attnviz.ui import cache, controls, guards, room, routes, state, widgets
from attnviz.ui.halt import Halted

FAILED = (
    "Something went wrong on this page. Try another text or model; if it happens again, tell the person "
    "running this server (the details are in its log)."
)

# (URL path = the page's module in attnviz/ui/pages and its file in app_pages/, title, icon), in the navigation's
# order; DEFAULT is the page at the app's own URL
PAGES = (
    ("start", "Start here", ":material/school:"),
    ("heads", "Heads", ":material/grid_view:"),
    ("inside", "Inside multi-head attention", ":material/calculate:"),
    ("compare", "Self vs masked vs cross", ":material/compare:"),
    ("generate", "Generate", ":material/edit_note:"),
    ("overview", "Model overview", ":material/insights:"),
    ("pronouns", "Pronoun resolution", ":material/quiz:"),
    ("positions", "Positions", ":material/format_list_numbered:"),
    ("head_count", "One head vs many", ":material/view_column:"),
    ("masks", "Masks and their cost", ":material/filter_alt:"),
    ("induction", "Induction heads", ":material/repeat:"),
    ("knockout", "Knock out and patch", ":material/science:"),
    ("corpora", "Corpus", ":material/library_books:"),
    ("classroom", "Class", ":material/groups:"),
)

DEFAULT = "heads"
# The default page is at the app's own URL, so its own name is free: a typed or shared /heads finds the hidden page
# that holds it (ALIAS) and goes on to the app's URL with the same parameters, with no "Page not found". The default
# page is named HOME inside (a page's name must be unique, and a hidden page cannot share it).
HOME = "home"
# the pages that show the sidebar's Text (the others have texts of their own): on a phone its box is drawn again
TEXT_PAGES = {"heads", "inside", "compare", "overview", "masks", "knockout", "classroom", ""}
CLASS_AT = [stem for stem, _, _ in PAGES].index("classroom")

# What the server is started with (attnviz serve passes these as flags; the repository's .streamlit/config.toml says
# the same for `streamlit run app.py`, and a test checks that the two agree). Never watch files: a watcher scanning
# a checkout cost an idle server a core.
SETTINGS = {
    "server.headless": "true",
    "server.enableXsrfProtection": "true",
    "server.enableCORS": "true",
    "server.maxUploadSize": "10",
    "server.fileWatcherType": "none",
    "browser.gatherUsageStats": "false",
    "client.toolbarMode": "viewer",
    "client.showErrorDetails": "none",
    "runner.postScriptGC": "false",
}


@functools.cache  # the page objects, made once per process (a plain cache: no session's clear_cache drops it)
def file_pages(folder: str = "app_pages") -> tuple:
    """The pages as files in `folder` (relative to the main script), made once per server: each st.Page resolves its
    file (a class of 100 redrawing at once paid for it 1,200 times)."""
    return tuple(
        st.Page(
            f"{folder}/{stem}.py",
            title=title,
            icon=icon,
            default=stem == DEFAULT,
            url_path=HOME if stem == DEFAULT else None,
        )
        for stem, title, icon in PAGES
    ) + (alias_page(),)


@functools.cache
def render_pages() -> tuple:
    """The pages as their render() functions, at the same URL paths as the files (the packaged app has no page
    files: it is found relative to the package, from any folder)."""
    return tuple(
        st.Page(
            importlib.import_module(f"attnviz.ui.pages.{stem}").render,
            title=title,
            icon=icon,
            url_path=HOME if stem == DEFAULT else stem,
            default=stem == DEFAULT,
        )
        for stem, title, icon in PAGES
    ) + (alias_page(),)


def _to_default() -> None:
    """The hidden page at /heads: never drawn (main goes on to the app's URL first)."""


def alias_page():
    """The default page's own name as a hidden page, so that /heads is found (main sends it on to the app's URL)."""
    return st.Page(_to_default, title=dict((s, t) for s, t, _ in PAGES)[DEFAULT], url_path=DEFAULT, visibility="hidden")


def main(pages: tuple) -> None:
    """One run of the app over `pages`; every run navigates over its own copies, since a run marks the page it
    shows."""
    guards.install()  # once per server: what a visitor's browser may not do to everyone (clear every cache)
    cache.new_run()  # each model this run asks for is resolved once
    st.set_page_config(page_title="attnviz — see where attention goes", page_icon="🔍", layout="wide")
    routes.register_pages({stem: page for (stem, _, _), page in zip(PAGES, pages[: len(PAGES)], strict=True)})
    listed = [copy.copy(page) for page in pages]
    if room.teacher():  # a teacher: the Class page first
        listed.insert(0, listed.pop(CLASS_AT))
    # every page listed (Streamlit folds past ten under "View more": the Class page was hidden there)
    navigation = st.navigation(listed, expanded=True)
    if navigation.url_path == DEFAULT:  # /heads, typed or shared: the Heads page is at the app's own URL
        st.switch_page(pages[[stem for stem, _, _ in PAGES].index(DEFAULT)], query_params=st.query_params.to_dict())
    state.arrive(navigation.url_path, widgets.SHARED_PARAMS)  # back on a page: its own place again

    def sidebar(here: room.seat.Seat | None) -> None:
        controls.sidebar()
        # a phone's Text box (its sidebar is folded), on the pages that read the text; not on a student's Class page,
        # which shows the teacher's polls: a text typed there would only leave following
        student_class = navigation.url_path == "classroom" and here is not None and not here.teacher
        if navigation.url_path in TEXT_PAGES and controls.on_phone() and not student_class:
            controls.phone_text_box()

    def page() -> None:
        try:
            navigation.run()
        except Halted:  # the page ended early with its message: the rest of the run still draws
            pass
        except class_database.DATABASE_ERRORS:  # the class's store: room.page_run says so, and the app goes on
            raise
        except Exception:  # a bug, not bad input (that has its own messages): a message here, the traceback in the log
            logging.getLogger("attnviz").exception("page %r failed", navigation.title)
            st.error(FAILED)
        finally:
            controls.show_device()

    room.page_run(navigation.url_path, sidebar, page)
