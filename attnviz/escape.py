"""The one way text from a person (or a file, a URL, an error that quotes them) reaches a page: escaped.

Two places read markup:
- Streamlit's markdown (st.markdown, captions, alerts, radio labels): links, images, emphasis,
  headings, Streamlit's own directives (":red[...]", ":material/icon:", emoji shortcodes) and
  LaTeX between dollar signs. `md` makes text a literal there.
- plotly's text (titles, tick labels, annotations, hover and cell text) reads a subset of HTML,
  links included. `html_text` makes text a literal there ("\\n" becomes a line break).
Both cut very long text, so one pasted chapter cannot flood a message. And a spreadsheet runs a CSV cell that
starts like a formula: `csv_cell` makes it text (whole, not cut).
"""

from __future__ import annotations

import html
import math
import re

# Every ASCII character markdown, Streamlit's directives or LaTeX give a meaning to (quotes and "=" mean
# nothing in the middle of a line, and md() joins the lines).
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|~:$<>&])")
# Markdown (GitHub's flavour, as Streamlit renders it) also turns bare URLs, "www." names and e-mail addresses
# into links, escaped or not. An invisible word joiner after the scheme, "www" or "@" breaks the pattern.
_AUTOLINK = re.compile(r"(?i)(https?|ftp|mailto|file|www|@)")
WORD_JOINER = "\u2060"
MAX_SHOWN = 300  # longer text is cut, with an ellipsis, before it is shown


def _cut(text: object, limit: int) -> str:
    s = str(text)
    return s[:limit] + "…" if len(s) > limit else s


def md(text: object, limit: int = MAX_SHOWN) -> str:
    """`text` as a literal in markdown: every markup character backslash-escaped, line breaks as spaces,
    and no bare URL, "www." name or e-mail address left for markdown to turn into a link."""
    s = " ".join(_cut(text, limit).split())  # no line breaks: a heading, a list or a table needs one
    s = _AUTOLINK.sub(lambda m: m.group(1) + WORD_JOINER, s)
    return _MARKDOWN.sub(r"\\\1", s)


def quoted(text: object, limit: int = MAX_SHOWN) -> str:
    """The escaped text between typographic quotes: ‘like this’."""
    return f"‘{md(text, limit)}’"


def html_text(text: object, limit: int = MAX_SHOWN) -> str:
    """`text` as a literal in plotly's HTML-like text: escaped, with "\\n" as a line break."""
    return html.escape(_cut(text, limit)).replace("\n", "<br>")


FORMULA_STARTS = ("=", "+", "-", "@", "＝", "＋", "－", "＠")  # full-width forms: spreadsheets read them too


def csv_cell(text: str) -> str:
    """A cell a spreadsheet will not run as a formula: one whose first character, or first after any leading
    whitespace, starts a formula (=, +, -, @, or their full-width forms), or that starts with a tab, return or
    newline, gets a leading apostrophe; plain numbers stay numbers."""
    try:
        if math.isfinite(float(text)) and text.strip() == text:
            return text
    except ValueError:
        pass
    risky = text[:1] in ("\t", "\r", "\n") or text.lstrip()[:1] in FORMULA_STARTS
    return "'" + text if risky else text
