"""The class in the sidebar: for the teacher, the student link, its QR code and who is here; for a student, the
follow switch, a name, and the heartbeat (attnviz.ui.room.seat)."""

from __future__ import annotations

import functools
import io
import time

import streamlit as st

from attnviz import escape
from attnviz.api import class_database, reach
from attnviz.ui.room import seat
from attnviz.ui.room.seat import Seat


def sidebar_panel(here: Seat) -> None:
    """The class in the sidebar: links and QR code for the teacher; the follow switch and a name for a student."""
    with st.sidebar.expander(f"Class {here.code}", expanded=True):
        if st.session_state.get("class.notice"):  # kept for this seat: heartbeats rerun the page
            st.error(st.session_state["class.notice"])
        if here.teacher:
            teacher_links(here)
        else:
            student_panel(here)


def teacher_links(here: Seat) -> None:
    """The student link, its QR code, who is here, when the class ends."""
    info = seat.store().get(here.code)
    url = seat.links(here.code)["student_url"]
    st.markdown(
        f"Students open this address, scan the code below, or type the class code **{here.code}** on the Class page:"
    )
    st.code(url, language=None, wrap_lines=True)  # the address as it is (never markup), with a copy button
    if reach.is_loopback(reach.url_host(url)):
        st.warning(reach.LOOPBACK_WARNING.format(url=escape.md(seat.base_url())))
    st.image(qr_png(url), caption="The student link", width=200)
    n, following = seat.store().students(here.code)
    st.caption(
        f"{n} student(s) seen in the last 30 s, {following} following. The class ends at {local_time(info.expires)}."
    )
    secret = st.session_state.get("class.secret")
    if secret:  # folded: the sidebar may be on the projector, and anyone with this link can lead the class
        with st.popover("Your teacher link (keep it private)"):
            st.caption("Anyone with it can lead the class. Open it on another device to teach from there.")
            st.code(seat.links(here.code, secret)["teacher_url"], language=None, wrap_lines=True)


def local_time(epoch: float) -> str:
    """A moment as HH:MM in the browser's own time zone (Streamlit reads the browser's offset), else in UTC."""
    offset = st.context.timezone_offset  # minutes, as JavaScript's getTimezoneOffset: UTC minus local time
    if offset is None:
        return time.strftime("%H:%M UTC", time.gmtime(epoch))
    return time.strftime("%H:%M", time.gmtime(epoch - 60 * offset))


def student_panel(here: Seat) -> None:
    """A student's side: the follow switch (on again: the teacher's view at once), a name, the heartbeat."""
    if st.session_state.get("class.left") and not st.session_state.get("class.following", True):
        st.warning(st.session_state["class.left"])
    following = st.toggle(
        "Follow the teacher",
        value=st.session_state.get("class.following", True),
        key="class.follow_toggle",
        help="Off: explore on your own. On again: back to the teacher's view.",
    )
    if following != st.session_state.get("class.following", True):
        st.session_state["class.following"] = following
        seat.store().set_following(here.code, here.student, following)
        if following:
            st.session_state.pop("class.version", None)  # rejoin: the teacher's view at once, read afresh
            seat.forget(here.code)
            st.rerun()
    name = st.text_input("Your name (optional)", key="class.name", max_chars=40)
    if name and name != st.session_state.get("class.name_sent"):
        seat.store().join(here.code, here.student, name)
        st.session_state["class.name_sent"] = name
    seat.tick(seat.tick_seconds(seat.run_moment(here.code)))


EXPLORING = "Exploring on your own: the teacher's view no longer replaces yours."


def exploring_banner(here: Seat) -> None:
    """A student who left following, told so in the main area, where every screen shows it (a phone folds the
    sidebar, where the switch is), with the way back: the teacher's view at once."""
    if here.teacher or st.session_state.get("class.following", True):
        return
    said, back = st.columns([4, 1], vertical_alignment="center")
    said.info(EXPLORING)
    back.button("Rejoin the teacher", key="class.rejoin", on_click=_rejoin, args=(here,), width="stretch")


def _rejoin(here: Seat) -> None:
    """The main area's Rejoin: following again, as the sidebar's switch turned on does (before the next run)."""
    st.session_state["class.following"] = st.session_state["class.follow_toggle"] = True
    st.session_state.pop("class.version", None)  # the teacher's view at once, read afresh
    try:
        seat.store().set_following(here.code, here.student, True)
    except class_database.DATABASE_ERRORS as err:
        seat.failed(err)
    seat.forget(here.code)


@functools.lru_cache(maxsize=64)  # a few bytes each; a class shows one link
def qr_png(url: str, px: int = 0) -> bytes:
    """The link as a QR code (the segno library), PNG bytes: 8 px a module, or whole modules to about `px` a side."""
    import segno

    code = segno.make(url, error="m")
    scale = max(1, px // code.symbol_size(scale=1, border=2)[0]) if px else 8
    out = io.BytesIO()
    code.save(out, kind="png", scale=scale, border=2)
    return out.getvalue()
