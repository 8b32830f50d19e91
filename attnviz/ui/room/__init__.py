"""The class in a page run: the seat (who this browser is in a class, following the teacher), the class's reads
shared by a run (reads), the sidebar's panel and the banner of a student exploring alone (panel). The frame runs every
page inside `page_run`, and asks `teacher` only to list the Class page first; the Class page itself is
ui/pages/classroom.py, the store below it attnviz/liveclass/.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from attnviz.api import class_database
from attnviz.ui import state
from attnviz.ui.room import panel, seat


def teacher() -> bool:
    """Whether this browser leads a class (or is opening the teacher's link): its navigation lists Class first."""
    return bool(st.session_state.get("class.secret")) or seat.TEACHER in st.query_params


def page_run(url_path: str, sidebar: Callable[[seat.Seat | None], None], page: Callable[[], None]) -> None:
    """One page run inside the class: before any widget a follower takes the teacher's view; the sidebar, then the
    class's panel in it and a student's banner; the page (a database failure in it is a message, the app goes on);
    then the view published (a teacher's) and the run's end marked (a student's). Outside a class: sidebar and page."""
    try:
        here = seat.seat()
        if here is not None:
            seat.follow(here, url_path)
    except class_database.DATABASE_ERRORS as err:  # the class database failed: the class is a message, the app goes on
        here = None
        seat.failed(err)
    st.session_state["class.seat"] = here
    sidebar(here)
    if here is not None:
        try:
            panel.sidebar_panel(here)
        except class_database.DATABASE_ERRORS as err:
            seat.failed(err)
        panel.exploring_banner(here)  # a student exploring alone: said above the page, the way back beside it
    try:
        page()
    except class_database.DATABASE_ERRORS as err:
        seat.failed(err, st)
    try:  # the run's URL state is written for everyone; a teacher's becomes the class's view
        seat.publish(here, url_path, state.publish(url_path), state.shown_head())
    except class_database.DATABASE_ERRORS as err:
        seat.failed(err)
    seat.drawn(here)  # the end of a student's whole run: what it drew, in the URL (a heartbeat checks it got there)
