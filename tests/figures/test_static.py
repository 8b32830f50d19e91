"""A still picture of a plotly figure: laid out as plotly lays it out, each map in its axes' domain, its colours
from the figure's colour scale and range, rows the way the axis runs."""

import io

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from PIL import Image

from attnviz.figures import interactive, static
from attnviz.result import AttentionResult
from attnviz.tokens import TokenAxis


def _rgb(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)


def test_a_map_is_drawn_in_its_domain_with_its_colours_rows_as_the_axis_runs():
    """Two maps side by side on one colour axis (black to white, 0..1): each cell's pixel has its value's colour,
    the first row on top where the axis is reversed, at the bottom where it is not."""
    z = [[0.0, 1.0], [1.0, 0.0]]
    fig = go.Figure(
        [
            go.Heatmap(z=z, coloraxis="coloraxis", xaxis="x", yaxis="y"),
            go.Heatmap(z=[[1.0, 1.0], [0.0, 0.0]], coloraxis="coloraxis", xaxis="x2", yaxis="y2"),
        ],
        layout={
            "width": 600,
            "height": 300,
            "margin": {"l": 50, "r": 80, "t": 50, "b": 50},
            "coloraxis": {"colorscale": [[0, "rgb(0,0,0)"], [1, "#ffffff"]]},
            "xaxis": {"domain": [0, 0.45], "showticklabels": False},
            "yaxis": {"domain": [0, 1], "autorange": "reversed", "showticklabels": False},
            "xaxis2": {"domain": [0.55, 1], "showticklabels": False},
            "yaxis2": {"domain": [0, 1], "showticklabels": False},
        },
    )
    px = _rgb(static.picture(fig))
    assert px.shape == (300, 600, 3)  # plotly's size in pixels
    plot_w, plot_h = 600 - 50 - max(80, static.BAR_PX), 300 - 100

    def at(domain_x, fx, fy):  # fy from the plot's top
        x0, x1 = domain_x
        return px[int(50 + fy * plot_h), int(50 + (x0 + fx * (x1 - x0)) * plot_w)]

    black, white = [0, 0, 0], [255, 255, 255]
    assert at((0, 0.45), 0.25, 0.25).tolist() == black  # row 0 on top (reversed): z[0][0] = 0
    assert at((0, 0.45), 0.75, 0.25).tolist() == white
    assert at((0, 0.45), 0.25, 0.75).tolist() == white
    assert at((0.55, 1), 0.25, 0.25).tolist() == black  # not reversed: row 0 ([1, 1]) at the bottom, row 1 on top
    assert at((0.55, 1), 0.25, 0.75).tolist() == white
    gap = px[150, int(50 + 0.5 * plot_w)]  # between the domains: the page
    assert gap.tolist() == white


def test_a_layer_grid_picture_is_the_grids_size_with_a_map_per_head():
    """The notebook's layer grid (figures.interactive.head_grid) as a still: plotly's height, the grid's width, and
    each head's map where its domain puts it (not the page's white)."""
    torch.manual_seed(0)
    w = torch.softmax(torch.randn(1, 4, 6, 6), -1)
    axis = TokenAxis(tuple("abcdef"), (False,) * 6, tuple(range(6)), ((0, 0),) * 6)
    fig = interactive.head_grid(AttentionResult(w, axis, axis, "self", "m"), 0)
    px = _rgb(static.picture(fig))
    assert px.shape[0] == round(fig.layout.height)
    lay, margin = fig.layout, fig.layout.margin
    width = px.shape[1]
    plot_w = width - margin.l - max(margin.r or 80, static.BAR_PX)
    plot_h = px.shape[0] - (margin.t or 100) - margin.b
    for h in range(4):
        sx = "" if h == 0 else str(h + 1)
        (x0, x1), (y0, y1) = lay[f"xaxis{sx}"].domain, lay[f"yaxis{sx}"].domain
        cx = int(margin.l + (x0 + x1) / 2 * plot_w)
        cy = int(px.shape[0] - margin.b - (y0 + y1) / 2 * plot_h)
        assert px[cy, cx].tolist() != [255, 255, 255], h  # a map is drawn there


def test_plotly_text_reads_as_plain_text():
    assert static.plain("Layer 3<br>head &amp; <b>5</b>") == "Layer 3\nhead & 5"


def test_a_cell_with_no_value_shows_the_plots_ground_or_the_map_under_it_as_plotly_draws_it():
    """A NaN cell was painted grey whatever lay under it: the overview's white gaps between tiles came out grey, and
    a second map over the first (its masked cells) covered the first with grey where it had no value."""
    from attnviz.figures.style import MASKED_COLOUR

    layout = {
        "width": 400,
        "height": 300,
        "margin": {"l": 50, "r": 80, "t": 50, "b": 50},
        "coloraxis": {"colorscale": [[0, "rgb(0,0,0)"], [1, "rgb(0,0,0)"]], "cmin": 0, "cmax": 1},
        "xaxis": {"showticklabels": False},
        "yaxis": {"autorange": "reversed", "showticklabels": False},
    }
    under = go.Heatmap(z=[[0.0, np.nan], [np.nan, np.nan]], coloraxis="coloraxis")
    over = go.Heatmap(z=[[np.nan, 1.0], [np.nan, np.nan]], colorscale=[[0, "rgb(255,0,0)"], [1, "rgb(255,0,0)"]])
    plot_w, plot_h = 400 - 50 - max(80, static.BAR_PX), 300 - 100
    grey = [int(MASKED_COLOUR[i : i + 2], 16) for i in (1, 3, 5)]
    for ground, expected in (("white", [255, 255, 255]), (MASKED_COLOUR, grey)):
        px = _rgb(static.picture(go.Figure([under, over], layout={**layout, "plot_bgcolor": ground})))
        cell = {
            (i, j): px[int(50 + (i + 0.5) / 2 * plot_h), int(50 + (j + 0.5) / 2 * plot_w)].tolist()
            for i in (0, 1)
            for j in (0, 1)
        }
        assert cell[0, 0] == [0, 0, 0] and cell[0, 1] == [255, 0, 0]  # each map's values; the second's NaN left out
        assert cell[1, 0] == cell[1, 1] == expected  # no value in either: the ground


def test_a_causal_maps_still_has_the_weights_colour_bar_not_the_masked_greys():
    """The masked grey is a trace of its own over a causal map (no scale); drawn last, it became the still's colour
    bar: a grey ramp marked 1 to 1 beside a notebook's map of a decoder."""
    from attnviz.figures import lazy_maps
    from attnviz.figures.style import MASKED_COLOUR

    t = 12
    w = torch.softmax(torch.randn(t, t).masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), -torch.inf), -1)
    fig = lazy_maps.zoomable_map(w.numpy(), 1, t, "a causal head", causal=True)
    assert fig.data[-1].name == "masked"
    px = _rgb(static.picture(fig))
    bar = px[round(fig.layout.margin.t or 100) + 5 :, px.shape[1] - static.BAR_PX + 8 + 7]  # down the bar's middle
    grey = [int(MASKED_COLOUR[i : i + 2], 16) for i in (1, 3, 5)]
    colours = {tuple(c) for c in bar.tolist()} - {(255, 255, 255)}
    assert len(colours) > 10 and tuple(grey) not in colours  # the weights' ramp, and no grey


def test_a_map_on_position_axes_stands_as_plotly_draws_it_first_row_on_top_and_square():
    """The notebook's one-head map of a long text (lazy_maps.zoomable_map) runs its y axis by a range from high to
    low, on positions (numbers), with square cells: its still was drawn upside down (the future's grey triangle at
    the bottom left), stretched to the plot's width, its positions written "1.0" under every cell."""
    from attnviz.figures import lazy_maps

    t = 40
    w = torch.softmax(torch.randn(t, t).masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), -torch.inf), -1)
    fig = lazy_maps.zoomable_map(w.numpy(), 1, t, "a causal head", causal=True)
    from attnviz.figures.style import MASKED_COLOUR

    px = _rgb(static.picture(fig))
    grey = [int(MASKED_COLOUR[i : i + 2], 16) for i in (1, 3, 5)]
    t_px = round(fig.layout.margin.t)
    plot = px[t_px:, : px.shape[1] - static.BAR_PX]  # under the title (its letters' edges can take the grey)
    inked = (plot != 255).any(-1)
    across = np.nonzero(inked[3])[0]  # the map's first row of pixels (no label stands on it): its width
    left, right = across.min(), across.max()
    down = inked[:, (left + right) // 2]  # down its middle to the first white: its height (a label stands below)
    top, bottom = t_px, t_px + int(np.argmin(down)) - 1
    assert abs((bottom - top) - (right - left)) <= 3  # square, as plotly keeps it (scaleanchor)
    inset = (bottom - top) // 8
    assert px[top + inset, right - inset].tolist() == grey  # the future: grey at the top right
    assert px[bottom - inset, left + inset].tolist() != grey  # the past: a weight at the bottom left


def test_a_stills_cells_take_their_values_colours_within_a_64th_of_the_scale():
    """Each cell's colour from the picture's palette (the scale's own ramp): a palette matched 6 bits a channel (as
    Pillow's quantize does) wrote white as 252."""
    z = np.linspace(0.0, 1.0, 100).reshape(10, 10)
    scale = [[0, "rgb(0,0,0)"], [1, "rgb(0,0,255)"]]  # blue from 0 to 255 as the value goes from 0 to 1
    fig = go.Figure(
        go.Heatmap(z=z, colorscale=scale, zmin=0, zmax=1, text=[["x"] * 10] * 10, texttemplate="%{text}"),
        layout={"width": 600, "height": 600, "margin": {"l": 50, "r": 80, "t": 50, "b": 50}, "yaxis": {}},
    )
    px = _rgb(static.picture(fig))
    plot_w, plot_h = 600 - 50 - max(80, static.BAR_PX), 600 - 100
    blue = np.array(
        [
            [px[int(550 - (i + 0.2) / 10 * plot_h), int(50 + (j + 0.2) / 10 * plot_w)][2] for j in range(10)]
            for i in range(10)
        ]
    )  # each cell's corner (its text in the middle); row 0 at the bottom (the axis not reversed)
    assert np.abs(blue / 255 - z).max() <= 1 / 64 and len(np.unique(blue)) >= 90


def test_a_labelled_grids_colour_bar_runs_in_fine_steps():
    """A layer's 12 labelled maps of weights mostly near 0 (as a real model's): Pillow's median cut spent its 128
    colours on the dark cells and the text's edges, and the bar's upper half came out in a few bands (24 colours)."""
    torch.manual_seed(0)
    labels = tuple(f"word{i}" for i in range(16))
    axis = TokenAxis(labels, (False,) * 16, tuple(range(16)), ((0, 0),) * 16)
    w = torch.softmax(6 * torch.randn(1, 12, 16, 16), -1)
    fig = interactive.head_grid(AttentionResult(w, axis, axis, "self", "m"), 0)
    px = _rgb(static.picture(fig))
    top, bottom = round(fig.layout.margin.t), px.shape[0] - round(fig.layout.margin.b)
    bar = px[top + 5 : bottom - 5, px.shape[1] - static.BAR_PX + 8 + 7]  # down the bar's middle
    upper = bar[: len(bar) // 2]
    assert len({tuple(c) for c in upper.tolist()}) >= 96  # every step of the scale's upper half


def test_a_stills_colour_bar_says_what_its_colours_measure():
    """The still drew the bar and its numbers, not its title: a grid of numbers whose statistic the picture never
    named (the notebook's first figure)."""
    from attnviz.figures import stat_charts

    fig = stat_charts.stat_grid(np.random.default_rng(0).random((4, 6)), [["x"] * 6] * 4, "entropy")
    px = _rgb(static.picture(fig))
    top = round(fig.layout.margin.t or 100)
    over_bar = px[max(0, top - 22) : top - 4, px.shape[1] - static.BAR_PX :]
    assert (over_bar.sum(-1) < 300).sum() > 20  # the title's dark letters over the bar
    fig.data[0].colorbar.title.text = ""
    px = _rgb(static.picture(fig))
    assert (px[max(0, top - 22) : top - 4, px.shape[1] - static.BAR_PX :].sum(-1) < 300).sum() == 0  # none: blank


def test_a_log_scaled_maps_still_writes_its_bars_weights_where_their_colours_are():
    """A long text's map on a log scale (layout.log_colours): the still's bar wrote five values of log10 (-2.6 ...)
    where its own marks are weights; each mark is written level with its colour on the bar."""
    from attnviz.figures import layout, lazy_maps

    n = 200
    w = np.tril(np.ones((n, n), dtype=np.float32))
    fig = layout.log_colours(lazy_maps.zoomable_map(w / w.sum(1, keepdims=True), 1, n, "t"))
    marks = static._bar_marks(fig, fig.data[0])
    assert [t for _, t in marks] == list(fig.data[0].colorbar.ticktext) and len(marks) >= 2
    assert [v for v, _ in marks] == pytest.approx(list(fig.data[0].colorbar.tickvals))
    assert static._bar_marks(fig, fig.data[2]) is None  # the masked grey names nothing
    lo, hi = fig.data[0].zmin, fig.data[0].zmax
    canvas = Image.new("RGB", (80, 220), "white")
    static._colour_bar(canvas, (fig.data[0].colorscale, lo, hi), (0, 10, 14, 200), marks)
    px = np.asarray(canvas).astype(int)
    ink = np.nonzero((px[:, 17:].sum(-1) < 300).any(1))[0]  # rows with dark writing right of the bar
    for value, _ in marks:
        y = 10 + 200 - (value - lo) / (hi - lo) * 200
        assert np.abs(ink - y).min() <= 3, (value, y)
