"""A value per head or per token: the layer x head grid of a statistic (each cell labelled, clickable), the pronoun
pairs' flip grid, bars over a text's tokens."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from attnviz.escape import html_text
from attnviz.figures.interactive import click_markers
from attnviz.figures.layout import (
    BAR_ACROSS_PX,
    CHAR,
    EVERY_TICK,
    PHONE_WIDTH,
    main_px,
    row_label_px,
    title_lines,
    title_px,
    title_top,
)
from attnviz.figures.static import paint
from attnviz.figures.style import INKS, Style, light_ink
from attnviz.tokens import display_labels

# A layer x head grid's plot width, measured in Chromium: plain, 480 px at 1280x800 (the least of what a laptop shows);
# in projector mode, at the 1920x1080 screen projector mode is laid out for (the Model overview's grid: 1,198 px), so
# that its cells' words are 16 px or more there (they stayed about 8 px, sized for the least width).
STAT_GRID_PX = {False: 480, True: 1150}
# The least width of the figure that holds such a plot: the plot, its layer or head names and its colour bar (about
# 140 px beside the plot in Chromium at 900-1280 px, 202 px in projector mode at 1920x1080). Narrower, the cells'
# words, sized for the plot, ran out of their cells: the pronoun lesson's "animal" 29 px in 26 px cells in a 900 px
# window, its sidebar open (widgets.stat_box keeps it this wide, scrolled sideways in a narrower column).
STAT_GRID_MIN_PX = {False: STAT_GRID_PX[False] + 140, True: STAT_GRID_PX[True] + 210}
FLIP_COLOURS = [  # flips the wrong way (orange), never moves (grey), flips right (green): three flat bands
    [0, "#d95f02"],
    [1 / 3, "#d95f02"],
    [1 / 3, "#dddddd"],
    [2 / 3, "#dddddd"],
    [2 / 3, "#1b9e77"],
    [1, "#1b9e77"],
]


def stat_grid(
    values: np.ndarray, labels: list[list[str]], stat: str, *, style: Style = Style(), show_values: bool = True
) -> go.Figure:
    """A layer x head grid coloured by one statistic, each head's label (and value) written in its cell.

    A phone's grid takes its column's whole width (the colour bar across the top), and stands with its heads as rows
    where a model has more heads than layers (BERT's 12 heads made 20 px columns, each cell's words ran into the
    next). Words that still do not fit a cell at 8 px are left out (anywhere: a 32-head model's cells are 15 px on a
    laptop), and the title says a tap or hover on a head shows them.
    `head_at` reads a click either way."""
    n_l, n_h = values.shape
    turned = style.phone and n_h > n_l  # heads down the side, layers across
    heads, layers = [f"H{h + 1}" for h in range(n_h)], [f"L{layer + 1}" for layer in range(n_l)]
    across, down = (layers, heads) if turned else (heads, layers)
    if style.phone:  # the column less the figure's margins and the row names
        plot_px = PHONE_WIDTH - 20 - row_label_px(down, style.font_size)
    else:
        plot_px = STAT_GRID_PX[style.projector]
    lines, size, words = _cell_lines(values, labels, plot_px / len(across), style, show_values)
    flip = (lambda rows: [list(col) for col in zip(*rows, strict=True)]) if turned else (lambda rows: rows)
    stat = html_text(stat, 60)
    z = values.astype(np.float32)
    finite = z[np.isfinite(z)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    where = "layer %{x}, head %{y}" if turned else "layer %{y}, head %{x}"
    fig = go.Figure(
        go.Heatmap(
            z=z.T if turned else z,
            x=across,
            y=down,
            customdata=flip([[html_text(label, 40) for label in row] for row in labels]),
            texttemplate="%{text}",
            textfont={"size": size},
            colorscale=style.colorscale,
            zmin=lo,
            zmax=hi,
            colorbar={"title": {"text": stat}},
            hovertemplate=where + "<br>" + stat + " %{z:.3f}<br>%{customdata}<extra></extra>",
            xgap=2,
            ygap=2,
        )
    )
    # each line in the ink its cell's colour needs (plotly picks one colour a cell by lightness: 2.5-2.9:1 on mid-tones)
    inks = np.array(INKS)[light_ink(paint(z, fig.data[0].colorscale, lo, hi)).astype(int)]
    fig.data[0].text = flip(
        [
            [
                "<br>".join(f'<span style="color:{ink}">{line}</span>' for line in cell)
                for cell, ink in zip(row, ink_row, strict=True)
            ]
            for row, ink_row in zip(lines, inks, strict=True)
        ]
    )
    fig.add_trace(click_markers(across, down, "open", 40))
    # every head and layer named, none thinned; the ranges the cells' own, not padded for the markers' 40 px (which
    # stood a phone's layer names 49 px below the grid and a laptop's head names 49 px left of it)
    fig.update_xaxes(range=[-0.5, len(across) - 0.5], **EVERY_TICK)
    fig.update_yaxes(range=[len(down) - 0.5, -0.5], **EVERY_TICK)
    # each row tall enough for its cells' lines (a label broken after its hyphen, the value): 30 layers of 18 px words
    # on a projector need 70 px a row, where 44 px held 9 px words
    most = max((len(cell) for row in lines for cell in row), default=1)
    row_px = max(90 if len(down) <= 12 and not style.phone else 44, math.ceil(most * size * 1.3) + 8)
    return _grid_frame(fig, style, row_px * len(down), told=not words and any(map(any, labels)))


def _cell_lines(
    values: np.ndarray, labels: list[list[str]], cell_px: float, style: Style, show_values: bool
) -> tuple[list[list[list[str]]], int, bool]:
    """Each cell's lines (its label, broken after its hyphen where the cell is narrow, then its value) and their
    size in px, and whether the labels' words are written: not where they do not fit the cell at 8 px (no value
    either where "0.00" does not fit)."""
    fits = cell_px / (CHAR * (style.font_size - 2))  # characters a cell's line holds

    def cell(label: str) -> list[str]:  # a label too long for its cell breaks after its hyphen ("previous-" / "token")
        shown = html_text(label, 40)
        return (shown.replace("-", "-<br>", 1) if len(label) > fits else shown).split("<br>")

    # the longest line a cell shows ("street", "previous-"), and a size at which it fits its cell
    longest = max((len(part) for row in labels for label in row for part in label.split("-")), default=1)
    words = CHAR * 8 * longest <= cell_px  # a phone's narrow cells may hold no label at 8 px
    size = max(8, min(style.font_size - 2, int(cell_px / (CHAR * max(longest if words else 4, 4)))))
    values_fit = show_values and CHAR * size * 4 <= cell_px - 2  # "0.00"
    lines = [
        [
            [*(cell(label) if words else []), *([f"{v:.2f}"] if values_fit else [])]
            for label, v in zip(row, vrow, strict=True)
        ]
        for row, vrow in zip(labels, values, strict=True)
    ]
    return lines, size, words


def _grid_frame(fig: go.Figure, style: Style, plot_px: int, told: bool) -> go.Figure:
    """The grid's height, margins and font; where its words were left out (`told`), a title saying a tap or a hover
    shows them; on a phone, the colour bar across the top (as layout.bar_across lays a map's)."""
    above = title_px(style.font_size, 1) if told else 0
    top = 30 + above + (BAR_ACROSS_PX if style.phone else 0)
    height = plot_px + 90 + top
    fig.update_layout(
        height=height,
        font={"size": style.font_size},
        margin={"l": 10, "r": 10, "t": top, "b": 10},
        plot_bgcolor="white",
    )
    if told:
        tell = f"{'Tap' if style.phone else 'Hover over'} a head for its label"
        fig.update_layout(title={"text": tell, "font": {"size": style.font_size}, **title_top(style.font_size)})
    if style.phone:
        bar = {"orientation": "h", "thickness": 10, "len": 0.9, "x": 0.0, "xanchor": "left", "yanchor": "top"}
        fig.update_traces(
            colorbar={**bar, "y": 1 - (above + 6) / height, "yref": "container", "title": {"side": "right"}},
            selector={"type": "heatmap"},
        )
    return fig


def head_at(point: dict) -> tuple[int, int]:
    """The (layer, head), 1-based, of a clicked stat_grid cell, whichever way the grid stands."""
    x, y = str(point["x"]), str(point["y"])
    layer, head = (x, y) if x.startswith("L") else (y, x)
    return int(layer[1:]), int(head[1:])


def bars(values: np.ndarray, tokens: tuple[str, ...], title: str, *, style: Style = Style()) -> go.Figure:
    """One value per input token as a bar, tokens in order along the x axis."""
    fig = go.Figure(
        go.Bar(
            x=display_labels(tokens),
            y=values.astype(np.float32),
            marker_color="#31688e",
            hovertemplate="%{x}<br>%{y:.3f}<extra></extra>",
        )
    )
    fig.update_xaxes(tickangle=-60)
    font = style.font_size
    lines = title_lines(title, main_px(style), font + 1)  # the page's column wide (a phone's 358 px: two lines)
    top = title_px(font + 1, len(lines))
    return fig.update_layout(
        title={"text": html_text("\n".join(lines)), "font": {"size": font + 1}, **title_top(font + 1, len(lines))},
        height=270 + top,  # the bars keep their height
        font={"size": font},
        margin={"t": top, "b": 10},
    )


def flip_grid(categories: np.ndarray, names: dict[int, str], title: str, *, style: Style = Style()) -> go.Figure:
    """A layer x head grid of categories 0, 1, 2 (a minimal pair: how each head's pick moves)."""
    n_l, n_h = categories.shape
    fig = go.Figure(
        go.Heatmap(
            z=categories,
            text=[[names[int(c)] for c in row] for row in categories],
            colorscale=FLIP_COLOURS,
            zmin=-0.5,
            zmax=2.5,
            colorbar={"tickvals": [0, 1, 2], "ticktext": [names[c] for c in (0, 1, 2)], "title": {"text": "the pick"}},
            hovertemplate="layer %{y}, head %{x}: %{text}<extra></extra>",
            x=[f"H{h + 1}" for h in range(n_h)],
            y=[f"L{layer + 1}" for layer in range(n_l)],
            xgap=2,
            ygap=2,
        )
    )
    fig.update_xaxes(**EVERY_TICK)
    fig.update_yaxes(autorange="reversed", **EVERY_TICK)
    height = max(360, n_l * (style.font_size + 4) + 140)  # a line for each layer's label (30 on SmolLM2)
    return fig.update_layout(height=height, title=html_text(title), font={"size": style.font_size})
