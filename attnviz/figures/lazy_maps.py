"""Figures of long texts (a LazyAttention): pooled maps one can click to zoom, the attention each token
receives, one query's exact row, and an exact window with each row's share outside it.

Axes are token positions (1-based), so a click on a pooled cell says which tokens it covers; labels and
hover text are escaped (plotly renders HTML in them).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from attnviz.escape import html_text
from attnviz.figures.interactive import click_markers, masked_future, masked_trace
from attnviz.figures.layout import (
    BAR_ACROSS_PX,
    CHAR,
    EVERY_TICK,
    PHONE_WIDTH,
    PROJECTOR_MAIN_PX,
    bar_px,
    drawn_chars,
    main_px,
    title_lines,
    title_px,
    title_top,
    token_ticks,
)
from attnviz.figures.style import Style, weight_text
from attnviz.tokens import ltr_end

ROW_HOVER = "key %{x}: %{customdata}<br>weight %{y:.5f}<extra></extra>"


def positioned_labels(tokens: Sequence[str], start: int) -> list[str]:
    """Escaped, unique labels for tokens that start at position `start` (0-based): "it ·1031"."""
    return [f"{ltr_end(html_text(tok, limit=40))} ·{start + i + 1}" for i, tok in enumerate(tokens)]


def block_centres(n: int, f: int) -> np.ndarray:
    """The 1-based position in the middle of each block of f tokens (the last block may be shorter)."""
    starts = np.arange(0, n, f)
    ends = np.minimum(starts + f, n)
    return (starts + ends + 1) / 2


def _style(fig: go.Figure, style: Style, title: str, height: int) -> go.Figure:
    """Title, fonts and white ground; on a phone the title in lines that fit its column and a heatmap's colour bar
    across the top (a phone's Heads page cut five of these titles at a long text's 358 px, and the bars down the
    right took a third of the width from the maps)."""
    font = style.font_size + 2
    lines = title_lines(title, main_px(style), font) if style.phone else [title]
    top = title_px(font, len(lines)) if style.phone else 60
    placed = title_top(font, len(lines)) if style.phone else {}  # the lines' block from the figure's top down
    fig.update_layout(
        title={"text": html_text("\n".join(lines)), "font": {"size": font}, **placed},
        font={"size": style.font_size, "color": "black" if style.projector else None},
        paper_bgcolor="white",
        plot_bgcolor="white",
        margin={"l": 10, "r": 10, "t": top, "b": 10},
        height=height,
    )
    return _bar_across(fig, top) if style.phone else fig


def _bar_across(fig: go.Figure, top: int) -> go.Figure:
    """A phone's colour bar laid across the figure under its title (layout.bar_across's way, for a bar that is the
    colour axis's or a heatmap's own); a figure without one is left as it is."""
    bars = [t for t in fig.data if isinstance(t, go.Heatmap) and t.showscale is not False and t.coloraxis is None]
    if fig.layout.coloraxis.colorscale is None and not bars:
        return fig
    height = int(fig.layout.height) + BAR_ACROSS_PX
    # from the figure's left edge, 85% of the column long, the title beside it included: from the plot's left, a
    # fraction of the plot's width, the exact window's bar (its plot right of 64 tokens' labels) was 60 px long
    across = {"orientation": "h", "thickness": 10, "xref": "container", "x": 0.02, "xanchor": "left"}
    across |= {"lenmode": "pixels", "len": round(0.85 * PHONE_WIDTH), "y": 1 - (top + 6) / height}
    across |= {"yref": "container", "yanchor": "top", "title": {"side": "right"}}
    if fig.layout.coloraxis.colorscale is not None:
        fig.update_layout(coloraxis_colorbar=across)
    else:
        bars[0].update(colorbar=across)
    return fig.update_layout(height=height, margin={"t": top + BAR_ACROSS_PX})


def zoomable_map(
    m: np.ndarray, f: int, n: int, title: str, *, style: Style = Style(), causal: bool = True, window: int = 0
) -> go.Figure:
    """One head's map pooled in blocks of f tokens, (P, P); a click on a cell selects it (see `clicked_cell`). A
    causal map's cells wholly in the future, or wholly beyond a sliding `window`, are grey (masked), as in
    `window_map`."""
    centres = block_centres(n, f)
    p = len(centres)
    m = masked_future(m, n, n, f, f, causal, window)  # forbidden cells NaN: drawn grey by a trace of their own
    fig = go.Figure(
        go.Heatmap(
            z=m,
            x=centres,
            y=centres,
            colorscale=style.colorscale,
            zmin=0.0,
            zmax=float(np.nanmax(m)),
            colorbar={"title": {"text": "mean weight" if f > 1 else "weight"}},
            hoverinfo="skip",  # the markers over it say what a cell holds (below)
        )
    )
    # The hover is the markers': plotly's hover picks the nearest trace, and over a cell that was the markers' (their
    # hover off), so the map's own hover never showed. Each marker says its cell's tokens and weight.
    markers = click_markers(centres, centres, "zoom", max(4, 640 // p), gl=True)
    fig.add_trace(markers.update(text=cell_hover(m, f, n), hoverinfo=None, hovertemplate="%{text}<extra></extra>"))
    if causal:
        fig.add_trace(masked_trace(np.where(np.isnan(m), 1.0, np.nan), centres, centres))
    fig.update_xaxes(title="key position (attended to)", range=[0.5, n + 0.5], constrain="domain")
    # square cells, and on a phone's tall narrow plot the map's own range: constrained, y shrinks its domain, not
    # stretched to -1,000 .. 2,800 around a 1,361-token map
    fig.update_yaxes(title="query position (attending)", range=[n + 0.5, 0.5], scaleanchor="x", constrain="domain")
    height = main_px(style) + 60 if style.phone else 720 if style.projector else 640  # a phone's: about square
    fig = _style(fig, style, title, height)
    if not style.phone:  # as wide as the square map and its bar: drawn with width="content"
        fig.update_layout(width=map_width(style, height))
    return fig


def cell_hover(m: np.ndarray, f: int, n: int) -> list[str]:
    """What each cell of a map pooled in blocks of f tokens holds, row by row (the click markers' order): its queries
    and keys (1-based) and its weight, or that the mask forbids it."""
    spans = [f"{s + 1}–{min(s + f, n)}" if f > 1 else str(s + 1) for s in range(0, n, f)]
    rows, cols = ("queries", "keys") if f > 1 else ("query", "key")
    weight = "mean weight" if f > 1 else "weight"
    return [
        f"{rows} {spans[i]}<br>{cols} {spans[j]}<br>"
        + ("masked: not seen" if np.isnan(v) else f"{weight} {weight_text(float(v), 3)}")
        for (i, j), v in np.ndenumerate(m)
    ]


def map_width(style: Style, height: int) -> int:
    """The width a square map `height` px tall needs beside its names and colour bar, for st.plotly_chart's
    width="content" (a narrower column draws it narrower). Stretched across the column, the map stood centred and its
    bar 115 px from it on a laptop, about 350 on a projector's 1,380 px. Measured in Chromium (12 px and 20 px): the
    key axis's names and title take 72 and 100 px under the map, the query axis's 78 and 109 left of it, and the bar
    with its labels, title and gap 116 and 172 right of it."""
    font = style.font_size
    side = height - 60 - (100 if style.projector else 72)  # the plot's height, less the title and the key axis
    return round(4 * font + 30 + side + 8 * font + 20)


def clicked_cell(event, p: int) -> tuple[int, int] | None:
    """The (row, column) block of the zoomable map's cell a person clicked, from st.plotly_chart's event."""
    points = (event or {}).get("selection", {}).get("points", [])
    for point in points:
        index = point.get("point_index", point.get("point_number"))
        if point.get("curve_number") == 1 and index is not None and 0 <= int(index) < p * p:
            return divmod(int(index), p)
    return None


def received_band(received: np.ndarray, f: int, n: int, title: str, *, style: Style = Style()) -> go.Figure:
    """(H, N') per-head attention received, pooled in blocks of f tokens: one row per head."""
    h = received.shape[0]
    rows = (style.font_size + 10) * h  # the plot's height: every head named, a line of its font and more each
    # the colour bar as long as the plot, its title beside it, not above (on a projector, Gemma 3's 4 heads left the
    # bar 43 px under its title for four labels of 20 px on one another), and as many labels as fit a line and a half
    bar = {"title": {"text": "received", "side": "right"}, "nticks": max(2, 2 * rows // (3 * style.font_size))}
    fig = go.Figure(
        go.Heatmap(
            z=received,
            x=block_centres(n, f),
            y=[f"H{i + 1}" for i in range(h)],
            colorscale=style.colorscale,
            zmin=0.0,
            colorbar=bar,
            hovertemplate="head %{y}, around token %{x:.0f}<br>mean attention received %{z:.5f}<extra></extra>",
        )
    )
    fig.update_xaxes(title="token position", range=[0.5, n + 0.5])
    fig.update_yaxes(autorange="reversed", **EVERY_TICK)
    return _style(fig, style, title, 140 + rows)


def row_profile(
    values: np.ndarray, tokens: Sequence[str], query: int, title: str, *, style: Style = Style(), start: int = 0
):
    """One query's exact weights over the keys it sees, key positions start+1.. along x (start: the first key a
    sliding window leaves it, 0 without one; the keys before are masked, not drawn as weights of 0); the query marked.
    """
    n = len(values)
    fig = go.Figure(
        go.Scattergl(
            x=np.arange(start + 1, start + n + 1),
            y=values,
            customdata=[html_text(t, limit=40) for t in tokens],
            mode="lines+markers" if n <= 400 else "lines",
            line={"width": 1.5},
            hovertemplate=ROW_HOVER,
            name="weight",
        )
    )
    fig.add_vline(x=query + 1, line_dash="dot", line_color="grey")
    fig.update_xaxes(title="key position", range=[start + 0.5, start + n + 0.5])
    fig.update_yaxes(title="weight", rangemode="tozero")
    return _style(fig, style, title, 360)


def window_map(
    w: np.ndarray,
    rows: Sequence[str],
    cols: Sequence[str],
    q0: int,
    k0: int,
    outside: np.ndarray,
    title: str,
    *,
    style: Style = Style(),
    masked: np.ndarray | None = None,
) -> go.Figure:
    """An exact tile (r, c) of queries q0.. and keys k0.., and beside it each row's share outside the tile."""
    ys, xs = positioned_labels(rows, q0), positioned_labels(cols, k0)
    z = np.where(masked, np.nan, w) if masked is not None else w
    fig = go.Figure(
        [
            go.Heatmap(
                z=z,
                x=xs,
                y=ys,
                coloraxis="coloraxis",
                hoverongaps=False,
                hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.5f}<extra></extra>",
            ),
            go.Heatmap(
                z=outside[:, None],
                x=["outside"],
                y=ys,
                xaxis="x2",
                colorscale=[[0, "white"], [1, "black"]],  # more ink, more weight (plotly's "Greys" runs black to white)
                zmin=0.0,
                zmax=1.0,
                showscale=False,
                hovertemplate="query %{y}<br>weight on keys outside this window %{z:.4f}<extra></extra>",
            ),
        ]
    )
    # Each token its label's line where the figure gives it one (up to 64 a side, as every map), else every k-th and
    # the axis says so: plotly thinned a 64-token window's to every 2nd unsaid. The window is as wide as the main
    # column (its share outside in the last tenth), as tall as its rows' labels need, up to a screen.
    font = style.font_size
    column = PROJECTOR_MAIN_PX if style.projector and not style.phone else main_px(style)
    left = CHAR * font * drawn_chars(ys) + 6 + font + 14
    side = min(1400 if style.projector else 1100, max(420, (font + 1) * len(ys) + 220))
    x_px = 0.9 * (column - left - (0 if style.phone else bar_px(font)))
    fig.update_layout(
        xaxis={"domain": [0.0, 0.9], "tickangle": -60, **token_ticks(xs, x_px, font, "key")},
        xaxis2={"domain": [0.92, 1.0], "anchor": "y", "tickangle": -60},
        yaxis={"autorange": "reversed", **token_ticks(ys, side - 220, font, "query")},
        coloraxis={
            "colorscale": style.colorscale,
            "cmin": 0.0,
            "cmax": float(np.nanmax(z)) if np.isfinite(z).any() else 1.0,  # a window wholly masked: the full scale
            "colorbar": {"title": {"text": "weight"}, "x": 1.02},
        },
    )
    if masked is not None:  # grey, a trace of its own: the plot's ground stays white round the map and its column
        fig.add_trace(masked_trace(np.where(masked, 1.0, np.nan), xs, ys))
    return _style(fig, style, title, side)
