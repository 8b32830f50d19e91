"""A value per head or per token: the layer x head grid of a statistic (each cell labelled, clickable), the pronoun
pairs' flip grid, bars over a text's tokens."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from attnviz.escape import html_text
from attnviz.figures.interactive import click_markers
from attnviz.figures.layout import (
    CHAR,
    EVERY_TICK,
)
from attnviz.figures.static import paint
from attnviz.figures.style import INKS, Style, light_ink
from attnviz.tokens import display_labels

# A layer x head grid's plot width, measured in Chromium: plain, 480 px at 1280x800 (the least of what a laptop shows);
# in projector mode, at the 1920x1080 screen projector mode is laid out for (the Model overview's grid: 1,198 px), so
# that its cells' words are 16 px or more there (they stayed about 8 px, sized for the least width).
STAT_GRID_PX = {False: 480, True: 1150}
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
    """A layer x head grid coloured by one statistic, each head's label (and value) written in its cell."""
    n_l, n_h = values.shape
    cell_px = STAT_GRID_PX[style.projector] / n_h  # a cell's width
    fits = cell_px / (CHAR * (style.font_size - 2))  # characters a cell's line holds

    def cell(label: str) -> str:  # a label too long for its cell breaks after its hyphen ("previous-" / "token")
        shown = html_text(label, 40)
        return shown.replace("-", "-<br>", 1) if len(label) > fits else shown

    # the longest line a cell shows ("street", "previous-"), and a size at which it fits its cell
    longest = max((len(part) for row in labels for label in row for part in label.split("-")), default=1)
    size = max(8, min(style.font_size - 2, int(cell_px / (CHAR * max(longest, 4)))))

    lines = [
        [
            [*cell(labels[layer][h]).split("<br>"), *([f"{values[layer, h]:.2f}"] if show_values else [])]
            for h in range(n_h)
        ]
        for layer in range(n_l)
    ]
    stat = html_text(stat, 60)
    heads, layers = [f"H{h + 1}" for h in range(n_h)], [f"L{layer + 1}" for layer in range(n_l)]
    z = values.astype(np.float32)
    finite = z[np.isfinite(z)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=heads,
            y=layers,
            customdata=[[html_text(labels[layer][h], 40) for h in range(n_h)] for layer in range(n_l)],
            texttemplate="%{text}",
            textfont={"size": size},
            colorscale=style.colorscale,
            zmin=lo,
            zmax=hi,
            colorbar={"title": {"text": stat}},
            hovertemplate="layer %{y}, head %{x}<br>" + stat + " %{z:.3f}<br>%{customdata}<extra></extra>",
            xgap=2,
            ygap=2,
        )
    )
    # each line in the ink its cell's colour needs (plotly picks one colour a cell by lightness: 2.5-2.9:1 on mid-tones)
    inks = np.array(INKS)[light_ink(paint(z, fig.data[0].colorscale, lo, hi)).astype(int)]
    fig.data[0].text = [
        [
            "<br>".join(f'<span style="color:{inks[layer, h]}">{line}</span>' for line in lines[layer][h])
            for h in range(n_h)
        ]
        for layer in range(n_l)
    ]
    fig.add_trace(click_markers(heads, layers, "open", 40))
    fig.update_xaxes(**EVERY_TICK)  # every head and layer named, none thinned
    fig.update_yaxes(autorange="reversed", **EVERY_TICK)
    # each row tall enough for its cells' lines (a label broken after its hyphen, the value): 30 layers of 18 px words
    # on a projector need 70 px a row, where 44 px held 9 px words
    most = max((len(cell_lines) for row in lines for cell_lines in row), default=1)
    row_px = max(90 if n_l <= 12 else 44, math.ceil(most * size * 1.3) + 8)
    return fig.update_layout(
        height=row_px * n_l + 120,
        font={"size": style.font_size},
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        plot_bgcolor="white",
    )


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
    return fig.update_layout(
        title=html_text(title), height=320, font={"size": style.font_size}, margin={"t": 50, "b": 10}
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
