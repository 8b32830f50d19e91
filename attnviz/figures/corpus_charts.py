"""The Corpus page's figures: a head's histogram over a corpus, an example query's row over its text, and a head's
query/key space. Pure builders: plotly figures and escaped markdown, no Streamlit."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from attnviz.escape import html_text, md
from attnviz.figures.style import Style

SHADES = ("red", "orange", "orange", "gray", "gray", "gray", "gray", "gray")  # the keys looked at most, in rank order
CONTEXT = 40  # tokens either side of the query in an example (a window can be 256)


def histogram(counts: Sequence[int], lo: float, hi: float, title: str, *, style: Style = Style()) -> go.Figure:
    """A head's statistic over a corpus's windows: `counts` in equal bins from lo to hi."""
    values = np.asarray(counts)
    edges = np.linspace(lo, hi, len(values) + 1)
    centres = (edges[:-1] + edges[1:]) / 2
    fig = go.Figure(
        go.Bar(
            x=centres,
            y=values,
            width=(hi - lo) / len(values) * 0.95,
            hovertemplate="%{x:.3f}: %{y} windows<extra></extra>",
            marker={"color": "#3b6ea5"},
        )
    )
    fig.update_xaxes(title_text=html_text(title, 80), range=[lo, hi])
    fig.update_yaxes(title_text="windows")
    return fig.update_layout(
        height=300 if not style.projector else 420,
        margin={"t": 30, "b": 50, "l": 60, "r": 20},
        font={"size": style.font_size},
        bargap=0.02,
    )


def example_markdown(tokens: Sequence[str], query: int, keys: Sequence[int], weights: Sequence[float]) -> str:
    """One example as markdown: the query's text around it, the query on blue, the keys it looked at most on red
    (the first, in bold), orange (2nd, 3rd) and grey (4th to 8th); every token escaped (escape.md)."""
    rank = {int(k): r for r, k in enumerate(keys) if k >= 0}
    lo, hi = max(0, query - CONTEXT), min(len(tokens), query + CONTEXT + 1)
    lo = min(lo, min(rank, default=lo))
    hi = max(hi, max(rank, default=hi - 1) + 1)
    words = []
    for i in range(lo, hi):
        token = md(tokens[i], 40) or "·"
        if i == query:
            words.append(f"**:blue-background[{token}]**")
        elif i in rank:
            shaded = f":{SHADES[min(rank[i], len(SHADES) - 1)]}-background[{token}]"
            words.append(f"**{shaded}**" if rank[i] == 0 else shaded)
        else:
            words.append(token)
    return ("… " if lo > 0 else "") + " ".join(words) + (" …" if hi < len(tokens) else "")


def keys_line(tokens: Sequence[str], keys: Sequence[int], weights: Sequence[float], n: int = 5) -> str:
    """The keys a query looked at most, with their weights, as escaped markdown."""
    parts = [f"{md(tokens[int(k)], 30)} {w:.2f}" for k, w in zip(keys[:n], weights[:n], strict=False) if k >= 0]
    kept = sum(w for k, w in zip(keys, weights, strict=False) if k >= 0)
    return f"looked at most: {', '.join(parts)} ({kept:.0%} of its attention on the {len(keys)} keys kept)"


def qk_scatter(points: np.ndarray, contexts: Sequence[str], title: str, *, style: Style = Style()) -> go.Figure:
    """A head's queries and keys in one plane (corpus.qk.Space's points: queries first, then the keys of the same
    tokens); hover: the token in its context; customdata: (token index, 0 query / 1 key), for a click."""
    n = len(contexts)
    hover = [html_text(c, 200) for c in contexts]
    size = 7 if style.projector else 5
    fig = go.Figure()
    for role, (name, colour) in enumerate((("queries", "#1f77b4"), ("keys", "#d62728"))):
        part = points[role * n : (role + 1) * n]
        fig.add_trace(
            go.Scattergl(
                x=part[:, 0],
                y=part[:, 1],
                mode="markers",
                name=name,
                marker={"size": size, "color": colour, "opacity": 0.6},
                text=hover,
                customdata=np.stack([np.arange(n), np.full(n, role)], 1),
                hovertemplate=f"{name[:-1]}: %{{text}}<extra></extra>",
            )
        )
    fig.update_xaxes(title_text="first axis", zeroline=False)
    fig.update_yaxes(title_text="second axis", zeroline=False, scaleanchor="x")
    return fig.update_layout(
        title={"text": html_text(title, 160)},
        height=560 if not style.projector else 720,
        font={"size": style.font_size},
        legend={"orientation": "h", "y": -0.15},
    )
