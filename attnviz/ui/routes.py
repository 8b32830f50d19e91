"""The app's pages by URL path, as the frame registered them for its main script (app.py's files, or the packaged
app's render() functions): what a link to another page (a head on the Heads page, the teacher's page) switches to."""

from __future__ import annotations

from streamlit.runtime.scriptrunner import get_script_run_ctx

_PAGES: dict[str, dict] = {}  # {main script: {URL path: page}}: what the frame navigates over, per entry


def register_pages(pages: dict) -> None:
    """The frame's pages by URL path, for this run's main script (app.py's files or the packaged app's functions)."""
    ctx = get_script_run_ctx()
    _PAGES[ctx.main_script_path if ctx is not None else ""] = pages


def page_path(url_path: str):
    """The page at a URL path ("" is the first page) as st.switch_page takes it: the page the frame registered for
    this main script (a file in app_pages/, or a render() function in the packaged app), else its file."""
    ctx = get_script_run_ctx()
    pages = _PAGES.get(ctx.main_script_path if ctx is not None else "", {})
    return pages.get(url_path or "heads") or f"app_pages/{url_path or 'heads'}.py"
