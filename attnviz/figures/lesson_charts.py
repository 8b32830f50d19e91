"""Figures for the course's lessons: lines against steps or N, the cost of heads, masks' cost. Pure builders."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from attnviz.escape import html_text
from attnviz.figures.layout import CHAR, main_px, title_px, title_top
from attnviz.figures.style import Style

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf")  # distinct, and not the grey of references


def lines(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    title: str,
    x_title: str,
    y_title: str,
    *,
    style: Style = Style(),
    log_x: bool = False,
    log_y: bool = False,
    height: int = 320,
    reference: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None,
    width: int | None = None,
) -> go.Figure:
    """One line per series {name: (x, y)}; `reference` lines (dashed grey) are drawn underneath. `width`: the px of
    the column the chart stands in (default: the page's main column), where its legend's rows are laid out."""
    fig = go.Figure()
    for name, (x, y) in (reference or {}).items():
        fig.add_trace(
            go.Scatter(x=list(x), y=list(y), mode="lines", name=html_text(name), line={"dash": "dash", "color": "grey"})
        )
    for i, (name, (x, y)) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]  # by series, not by trace: the same series keeps its colour across charts
        fig.add_trace(
            go.Scatter(
                x=list(x),
                y=list(y),
                mode="lines+markers",
                name=html_text(name),
                marker={"size": 4},
                line={"color": colour},
            )
        )
    xs = sorted({float(v) for x, _ in series.values() for v in x})
    fig.update_xaxes(title=html_text(x_title), type="log" if log_x else "linear")
    if log_x and len(xs) <= 12:
        fig.update_xaxes(tickvals=xs, ticktext=[f"{v:g}" for v in xs])  # the measured N, not 2, 5 between decades
    fig.update_yaxes(title=html_text(y_title), type="log" if log_y else "linear")
    if log_y:
        fig.update_yaxes(dtick=1)  # one tick per power of ten
    font = style.font_size
    names = [*(reference or {}), *series] if len(series) + len(reference or {}) > 1 else []  # one line: no legend
    rows = legend_rows(names, width or main_px(style), font)
    return fig.update_layout(
        title={"text": html_text(title), "font": {"size": font + 1}, **title_top(font + 1)},
        height=grown(height, style) + rows * (font + 8),  # the plot keeps its height under the legend's rows
        font={"size": font},
        # the legend in its rows between the title and the plot: under the plot it ran into the x axis's title once a
        # projector's font grew; over it, in a fixed margin, its rows rose over the title (the Masks page's five
        # lines in half the column took five rows)
        margin={"l": 10, "r": 10, "t": title_px(font + 1, 1) + rows * (font + 8) + 4, "b": 10},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "left", "x": 0},
    )


def grown(height: int, style: Style) -> int:
    """A chart's height for this style: a projector's 1.5x text took its room from the plot (the cost of heads'
    bars stood 150 px tall under 20 px labels)."""
    return round(height * (1.5 if style.projector else 1))


def legend_rows(names: Sequence[str], width: int, font: int) -> int:
    """The rows a horizontal legend of these entries takes in a chart `width` px wide: one where they all fit side by
    side, else plotly sets them in columns as wide as the widest (each a line's sample, about 40 px, and its name as
    drawn), as many a row as fit the plot's width (the figure's less its margins and the y axis's labels)."""
    if not names:
        return 0
    items = [46 + CHAR * font * len(name) for name in names]
    room = width - 20 - 4 * font
    if sum(items) <= room:
        return 1
    return math.ceil(len(items) / max(1, int(room // max(items))))


LOSS_X = "position of the token predicted (1-based)"


def predicted_positions(start: int, count: int) -> list[int]:
    """The 1-based positions of the tokens that `count` losses from loss index `start` predict: loss index i is the
    cross-entropy of token i + 1 (0-based), so the token at position i + 2 for people."""
    return list(range(start + 2, start + 2 + count))


def loss_lines(series: dict[str, tuple[int, Sequence[float]]], title: str, *, style: Style = Style()) -> go.Figure:
    """Per-token loss curves, one per series {name: (loss index of its first value, losses)}, against the 1-based
    position of the token each loss predicts (the same axis on every page)."""
    points = {name: (predicted_positions(start, len(values)), list(values)) for name, (start, values) in series.items()}
    return lines(points, title, LOSS_X, "cross-entropy (nats)", style=style)


def _heads_label(heads: int, kv_heads: int) -> str:
    """A bar's name under it, in lines short enough for a phone's fifth of 358 px ("16 Q / 1 K/V heads" in one line,
    turned, ran under the chart's toolbar at its right edge there)."""
    if kv_heads == heads:
        return f"{heads} head{'s' if heads != 1 else ''}"
    return f"{heads} Q,<br>{kv_heads} K/V"


def heads_cost_chart(rows, *, style: Style = Style()) -> go.Figure:
    """Time of one pass per head count: batched and looped side by side, grouped-query variants after."""
    fig = go.Figure()
    for method in dict.fromkeys(r.method for r in rows):
        picked = [r for r in rows if r.method == method]
        labels = [_heads_label(r.heads, r.kv_heads) for r in picked]
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[r.ms for r in picked],
                name=method,
                text=[f"{r.ms:.2f} ms" for r in picked],
                textposition="outside",
                hovertemplate="%{x}<br>%{y:.3f} ms<extra>" + method + "</extra>",
            )
        )
    fig.update_yaxes(title="ms per pass (median)")
    if any(r.kv_heads != r.heads for r in rows):
        fig.update_xaxes(
            title={"text": "Q: query heads, K/V: the key/value heads they share", "font": {"size": style.font_size - 1}}
        )
    return fig.update_layout(
        barmode="group",
        height=grown(340, style),
        font={"size": style.font_size},
        # the legend's one row over the plot: under it, at y = -0.2 of the plot, it met the axis's title
        margin={"l": 10, "r": 10, "t": 2 * style.font_size + 12, "b": 10},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "left", "x": 0},
        # a bar's time over it where it reads at the chart's font less 2 (a phone's narrow bars shrank it to 5 px);
        # else the hover says it, and the y axis
        uniformtext={"minsize": style.font_size - 2, "mode": "hide"},
    )


def mask_cost_chart(rows, *, style: Style = Style(), width: int | None = None) -> tuple[go.Figure, go.Figure]:
    """Time and the scores formed (or GPU peak memory) against N, one line per method, log-log; `width`: each
    chart's column, as lines takes it."""
    methods = list(dict.fromkeys(r.method for r in rows))
    gpu = rows[0].peak_mb is not None

    def series(value) -> dict:
        return {m: ([r.n for r in rows if r.method == m], [value(r) for r in rows if r.method == m]) for m in methods}

    ns = np.array(sorted({r.n for r in rows}), dtype=float)
    first = min((r.ms for r in rows if r.n == ns[0]), default=1.0)
    ref = {
        "∝ N²": (ns.tolist(), (first * (ns / ns[0]) ** 2).tolist()),
        "∝ N": (ns.tolist(), (first * ns / ns[0]).tolist()),
    }
    time_fig = lines(
        series(lambda r: r.ms),
        "time of one pass",
        "tokens N",
        "ms",
        style=style,
        log_x=True,
        log_y=True,
        reference=ref,
        width=width,
    )
    memory = series(lambda r: r.peak_mb) if gpu else series(lambda r: r.scores_mb)
    mem_title = "peak GPU memory of one pass" if gpu else "scores the method forms"
    mem_fig = lines(memory, mem_title, "tokens N", "MB", style=style, log_x=True, log_y=True, width=width)
    return time_fig, mem_fig
