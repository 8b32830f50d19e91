"""A view as one self-contained HTML file: its figures with plotly.js inlined, and the facts that produced it.

It opens with no network (nothing is fetched: the charts' library is inside the file). Built in two parts around the
library, so that its size can be stated on a button without building the file.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from html import escape as escape_html

import plotly.graph_objects as go
import plotly.io as pio


@functools.cache
def plotly_js() -> str:
    """plotly.js as the installed plotly package ships it, to inline (a snapshot, a notebook's view: nothing is
    fetched), wrapped so that no AMD loader (a notebook's require.js) captures it: on a plain page it sets
    window.Plotly as the bare library does. The one copy attnviz inlines anywhere."""
    from plotly.offline import get_plotlyjs

    return "(function (define, module, exports) {\n" + get_plotlyjs() + "\n}).call(window);"


def parts(title: str, facts: dict[str, str], figures: Sequence[go.Figure], note: str = "") -> tuple[str, str]:
    """The HTML before and after plotly.js: everything a snapshot holds but the library. Text is escaped here."""
    rows = "".join(f"<tr><th>{escape_html(k)}</th><td>{escape_html(str(v))}</td></tr>" for k, v in facts.items())
    charts = "".join(
        pio.to_html(fig, include_plotlyjs=False, full_html=False, config={"displaylogo": False}) for fig in figures
    )
    head = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{escape_html(title)}</title>"
        "<style>body{font-family:sans-serif;margin:2em;max-width:1200px}th{text-align:left;padding-right:1em}"
        "td{white-space:pre-wrap}</style><script type='text/javascript'>"
    )
    body = (
        f"</script></head><body><h1>{escape_html(title)}</h1><table>{rows}</table>"
        f"{f'<p>{escape_html(note)}</p>' if note else ''}{charts}"
        "<p><small>Saved from attnviz. This file needs no network: the charts' library is inside it.</small></p>"
        "</body></html>"
    )
    return head, body


def size(head: str, body: str) -> int:
    """The snapshot's size in bytes, without building it."""
    return len(head.encode()) + len(plotly_js().encode()) + len(body.encode())


def html_file(head: str, body: str) -> str:
    """One self-contained HTML file: the figures with plotly.js inlined, the facts, the note."""
    return head + plotly_js() + body
