"""The one way user text reaches Streamlit's markdown: escaped, so it shows as typed and never becomes markup.

Streamlit renders markdown (links, images, emphasis, headings, tables), its own directives
(":red[...]", ":material/icon:", emoji shortcodes) and LaTeX between dollar signs. Text a person
typed, a URL parameter, a file name, a case from an uploaded file or an error message that quotes
any of these goes through `md` before it is put into a markdown string.
"""

from __future__ import annotations

import html
import re

# Every ASCII punctuation character markdown, Streamlit's directives or LaTeX give a meaning to.
_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~:$<>&])")
MAX_SHOWN = 300  # longer text is cut, with an ellipsis, before it is shown


def md(text: object, limit: int = MAX_SHOWN) -> str:
    """`text` as a literal in markdown: every markup character backslash-escaped, line breaks as spaces."""
    s = str(text)
    if len(s) > limit:
        s = s[:limit] + "…"
    s = " ".join(s.split())  # no line breaks: a heading or a list needs one
    return _SPECIAL.sub(r"\\\1", s)


def quoted(text: object, limit: int = MAX_SHOWN) -> str:
    """The escaped text between typographic quotes: ‘like this’."""
    return f"‘{md(text, limit)}’"


def plain(text: object, limit: int = MAX_SHOWN) -> str:
    """Text for a place that reads HTML, not markdown (plotly labels, hover text): HTML-escaped."""
    s = str(text)
    return html.escape(s[:limit] + ("…" if len(s) > limit else ""))
