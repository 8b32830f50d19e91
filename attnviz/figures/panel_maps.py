"""Maps side by side: one head of several results (self, masked, cross; a model and its what-if; each step of a
generation) as panels of one figure, each panel as wide as its keys' labels need, titles wrapped to fit."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from attnviz.escape import html_text
from attnviz.figures.interactive import layer_masked, masked_cells, masked_trace, piece_hover
from attnviz.figures.layout import (
    BAR_ACROSS_PX,
    CHAR,
    EVERY_LABEL,
    EVERY_TICK,
    bar_px,
    drawn_chars,
    labels_fit,
    main_px,
    row_label_px,
    style_layout,
    title_over,
    title_px,
    title_top,
    token_ticks,
)
from attnviz.figures.style import Style
from attnviz.result import AttentionResult
from attnviz.tokens import display_labels

# Streamlit's theme pads a plot's area by 8 px (its layout's margin.pad), which the grey of the plot's ground fills: a
# frame around each map. A panel's title stands that far over its map, not on the frame.
FRAME_PX = 8
NARROWEST_PX = 600  # the narrowest a figure is drawn, but on a phone (its plot area is then the measure)
PANEL_GAP = 0.04
CHAR_EM = 0.62  # the width of an average character, in font sizes


@dataclass(frozen=True)
class Panel:
    """One map of a side-by-side figure."""

    title: str
    matrix: np.ndarray  # (Tq, Tk)
    rows: tuple[str, ...]
    cols: tuple[str, ...]
    masked: np.ndarray | None = None  # (Tq, Tk) bool: True where the model may not look (drawn grey)
    signed: bool = False  # a difference: its own diverging scale around 0
    own_scale: str = ""  # a quantity other than attention: its own scale, with this title (e.g. "||αf(x)||")
    numbered_rows: bool = False  # the rows are unique already ("step 3: Paris"): shown as they are, not "… ·3"
    pieces: tuple | None = None  # (rows', cols') raw pieces of the tokenizer ("Ġanimal"), shown in the hover


def panel(result: AttentionResult, layer: int, head: int, title: str) -> Panel:
    """One head of a result as a panel; what a causal result's mask forbids (its future, beyond the layer's sliding
    window) is marked masked, not zero."""
    masked = layer_masked(result, layer)
    pieces = (result.target.pieces, result.source.pieces)
    return Panel(
        title, result.head(layer, head).numpy(), result.target_tokens, result.source_tokens, masked, pieces=pieces
    )


def steps_panel(
    steps: np.ndarray, rows: tuple[str, ...], cols: tuple[str, ...], prompt: int, title: str, window: int = 0
) -> Panel:
    """The steps of a writing (n, Tk): row s saw the prompt and s written tokens (within the layer's sliding
    `window`, 0 none); the rest is masked (grey)."""
    n, tk = steps.shape
    return Panel(
        title, steps, rows, cols, masked=masked_cells(tk, tk, window=window)[prompt - 1 :][:n], numbered_rows=True
    )


def _label_fraction(labels: Sequence[str], font_size: int, narrowest: float = NARROWEST_PX) -> float:
    """The width of a column of tick labels, as a fraction of the narrowest figure (`narrowest` px)."""
    longest = drawn_chars(labels)
    return (CHAR_EM * font_size * longest + 14) / narrowest


def _wrap_title(title: str, width_fraction: float, font_size: int, narrowest: float = NARROWEST_PX) -> str:
    """A panel title, escaped and broken into lines that fit over its panel on the narrowest figure."""
    chars = max(8, int(width_fraction * narrowest / (CHAR_EM * font_size)))
    lines = [line for part in title.split("\n") for line in textwrap.wrap(part, chars, break_on_hyphens=False) or [""]]
    return "<br>".join(html_text(line) for line in lines)


def _panel_domains(
    panels: list[Panel], font_size: int, narrowest: float = NARROWEST_PX
) -> list[tuple[float, float, bool]]:
    """(x0, x1, show row labels) per panel: a panel whose rows differ from its left neighbour's gets
    its own labels, and room for them; one with the same rows shares its neighbour's."""
    shown = [i == 0 or p.rows != panels[i - 1].rows for i, p in enumerate(panels)]
    gutters = [
        _label_fraction(row_labels(p), font_size, narrowest) if show and i else 0.0
        for i, (p, show) in enumerate(zip(panels, shown, strict=True))
    ]
    n = len(panels)
    width = (1 - PANEL_GAP * (n - 1) - sum(gutters)) / n
    out, x = [], 0.0
    for i in range(n):
        x += gutters[i]
        out.append((min(1.0, x), min(1.0, x + width), shown[i]))
        x += width + PANEL_GAP
    return out


def row_labels(panel: Panel) -> list[str]:
    """A panel's row labels as its map draws them: "it ·11" (escaped); numbered rows ("step 3: Paris") as they are,
    with no " ·N" (they were measured with one they do not show)."""
    return [html_text(r, 80) for r in panel.rows] if panel.numbered_rows else display_labels(panel.rows)


def panels_a_row(panels: list[Panel], style: Style = Style()) -> int:
    """How many panels stand side by side (the rest in rows below): as many as leave each key of up to 64 a label's
    line in the main column, beside the rows' labels and the colour bars. Unlabelled panels all stand in one row."""
    font, keys = style.font_size, max(len(p.cols) for p in panels)
    if keys > EVERY_LABEL:
        return len(panels)
    own = [row_label_px(row_labels(p), font) for p in panels]  # where its rows differ from its left neighbour's
    bar = 10 if style.phone else bar_px(font)  # a phone's colour bars lie across the top (side_by_side)
    for k in range(len(panels), 1, -1):
        labels = max(
            sum(own[i] for i in range(r, min(r + k, len(panels))) if i == r or panels[i].rows != panels[i - 1].rows)
            for r in range(0, len(panels), k)
        )
        cells = (main_px(style) - bar - labels - font - 10 - 20 * (k - 1)) / k  # "query" too
        if cells >= labels_fit(keys, font):
            return k
    return 1


def side_by_side(panels: list[Panel], *, style: Style = Style(), title: str = "") -> go.Figure:
    """Maps next to each other on ONE colour scale (signed panels on a second, diverging one), in rows of as many
    as leave every token its label (panels_a_row): on a projector they stand one under another.

    Masked cells are left empty (NaN) over a grey background, so "may not look" never reads as
    "looks very little". Each panel's row labels sit in their own space, or are shared with the
    panel to its left when the rows are the same.
    """
    layout: dict = {"annotations": []}
    traces = []
    plain = [
        p.matrix[~p.masked] if p.masked is not None else p.matrix.ravel()
        for p in panels
        if not p.signed and not p.own_scale
    ]
    zmax = float(max((m.max() for m in plain if m.size), default=1.0))
    font, per_row = style.font_size, panels_a_row(panels, style)
    left = row_label_px(row_labels(panels[0]), font) + font + 10  # the first panel's row labels, "query"
    scales = 2 if any(p.signed or p.own_scale for p in panels) else 1
    plot_w = main_px(style) - (10 if style.phone else bar_px(font)) - left  # a phone's bars: across the top
    narrowest = plot_w if style.phone else NARROWEST_PX  # a phone's figure is as wide as its column, no wider
    n_rows = math.ceil(len(panels) / per_row)
    domains = []  # a short last row keeps the others' widths: filled out with copies of its last panel
    for r in range(n_rows):
        chunk = panels[r * per_row : (r + 1) * per_row]
        domains += _panel_domains(chunk + [chunk[-1]] * (per_row - len(chunk)), font, narrowest)[: len(chunk)]
    headings = [
        _wrap_title(p.title, x1 - x0, font + 1, narrowest) for p, (x0, x1, _) in zip(panels, domains, strict=True)
    ]
    lines = max(h.count("<br>") + 1 for h in headings)
    title_px = lines * (font + 6) + 6 + FRAME_PX
    labelled = [len(p.rows) for p in panels if len(p.rows) <= EVERY_LABEL]
    side = max(labels_fit(max(labelled, default=0), font), 300 if style.projector else 240)  # a panel's cells
    longest = max((drawn_chars(display_labels(p.cols)) for p in panels if len(p.cols) <= EVERY_LABEL), default=0)
    below = 0.87 * CHAR * font * longest + 6 + font + 16  # turned key labels (sin 60°) and the "key" title
    plot_h = n_rows * side + (n_rows - 1) * (below + title_px)
    for i, (p, (x0, x1, show_rows)) in enumerate(zip(panels, domains, strict=True)):
        sx, r = ("" if i == 0 else str(i + 1)), i // per_row
        y1 = 1.0 - r * (side + below + title_px) / plot_h
        layout[f"xaxis{sx}"] = {
            "domain": [x0, x1],
            "anchor": f"y{sx}",
            "tickangle": -60,
            "showgrid": False,
            **token_ticks(display_labels(p.cols), (x1 - x0) * plot_w, font, "key"),
        }
        query = "query" if len(p.rows) <= EVERY_LABEL else f"query: {len(p.rows)} tokens"
        layout[f"yaxis{sx}"] = {
            "anchor": f"x{sx}",
            "domain": [max(0.0, round(y1 - side / plot_h, 9)), min(1.0, round(y1, 9))] if n_rows > 1 else [0.0, 1.0],
            "autorange": "reversed",
            "showticklabels": show_rows and len(p.rows) <= EVERY_LABEL,
            "showgrid": False,
            "title": {"text": query if i % per_row == 0 else ""},  # the first panel of each row
            **(EVERY_TICK if len(p.rows) <= EVERY_LABEL else {}),
        }
        layout["annotations"].append(
            title_over(headings[i], (x0 + x1) / 2, y1, font={"size": font + 1}, yshift=FRAME_PX)
        )
        traces.append(_panel_trace(p, sx))
    traces += _greys(traces)
    fig = go.Figure(data=traces, layout=layout)
    fig = style_layout(fig, style, zmax, title)
    _second_scale(fig, panels, style)
    if not style.phone:
        _second_bar_beside(fig, panels, domains, per_row)
    top = 40 + lines * (font + 6) + FRAME_PX
    height: float
    if n_rows == 1:
        height = max(480 if not style.projector else 600, labels_fit(max(labelled, default=0), font) + 200) - 90
    else:
        height = plot_h + below + 20
    # Room for the labels, measured here (as interactive.head_grid's): plotly's automargin is on only under
    # Streamlit's theme, and a figure drawn without it (theme=None, for our fonts) had its labels cut at both edges.
    margin = {"t": top, "l": round(left), "b": round(below) + 10}
    fig.update_layout(plot_bgcolor="white", height=round(height + top), margin=margin)
    return _bar_on_top(fig, style, top, bool(title), scales) if style.phone else fig


def _second_bar_beside(fig: go.Figure, panels: list[Panel], domains: list, per_row: int) -> None:
    """The second scale's panels alone on a short last row (What if's difference under its two maps): their bar
    beside them, where plotly would set it for them alone, not 333 px away under the first bar."""
    second = [i for i, p in enumerate(panels) if p.signed or p.own_scale]
    last = (len(panels) - 1) // per_row
    if second and last > 0 and all(i // per_row == last for i in second):
        end = max(domains[i][1] for i in second)
        if end < 0.9:
            fig.update_layout(coloraxis2_colorbar={"x": end + 0.02, "xanchor": "left"})


def _greys(traces: list[go.Heatmap]) -> list[go.Heatmap]:
    """Each panel's masked cells grey, a trace of their own on its axes: the ground stays white round every panel
    (one grey ground framed the encoder's panel, which masks nothing, beside the decoder's)."""
    out = []
    for t in traces:
        gaps = np.isnan(np.asarray(t.z, dtype=float))
        if gaps.any():
            out.append(masked_trace(np.where(gaps, 1.0, np.nan), t.x, t.y).update(xaxis=t.xaxis, yaxis=t.yaxis))
    return out


def _bar_on_top(fig: go.Figure, style: Style, top: int, titled: bool, scales: int) -> go.Figure:
    """A phone's colour bars across the figure's top, the second scale's (a difference's) under the first (the
    figure's title above them, the panels' titles below), not down its right side, where they took bar_px of the
    358 px the panels share (as layout.bar_across lays a map's)."""
    above = title_px(style.font_size + 4, 1) if titled else 0
    height = int(fig.layout.height) + above + scales * BAR_ACROSS_PX
    fig.update_layout(
        title=title_top(style.font_size + 4) if titled else None,
        height=height,
        margin={"t": top + above + scales * BAR_ACROSS_PX},
    )
    for k, axis in enumerate(("coloraxis", "coloraxis2")[:scales]):
        fig.update_layout(
            {
                f"{axis}_colorbar": {
                    "orientation": "h",
                    "thickness": 10,
                    "len": 0.9,
                    "x": 0.0,
                    "xanchor": "left",
                    "y": 1 - (above + 6 + k * BAR_ACROSS_PX) / height,
                    "yref": "container",
                    "yanchor": "top",
                    "title": {"side": "right"},
                }
            }
        )
    return fig


def _panel_trace(p: Panel, sx: str) -> go.Heatmap:
    """One panel's heatmap on its axes (x{sx}, y{sx}): masked cells empty, each cell's pieces in the hover."""
    z = p.matrix.astype(np.float32)
    if p.masked is not None:
        z = np.where(p.masked, np.nan, z)
    data, line = piece_hover(p.rows, p.cols, p.pieces)
    return go.Heatmap(
        z=z,
        x=display_labels(p.cols),
        y=row_labels(p),
        name=p.title,
        hoverongaps=False,
        coloraxis="coloraxis2" if p.signed or p.own_scale else "coloraxis",
        xaxis=f"x{sx}",
        yaxis=f"y{sx}",
        customdata=data,
        hovertemplate="query %{y}<br>key %{x}<br>"
        + ("difference" if p.signed else html_text(p.own_scale) or "weight")
        + " %{z:.4f}"
        + line
        + "<extra>"
        + html_text(p.title.replace("\n", " "))
        + "</extra>",
    )


def _second_scale(fig: go.Figure, panels: list[Panel], style: Style) -> None:
    """The second colour scale, for panels on their own scale or signed ones (a diverging scale around 0). Its
    colour bar stands under the first, never beside it: side by side their titles ran together."""
    signed = [np.abs(p.matrix).max() for p in panels if p.signed]
    upper, lower = {"y": 1.0, "yanchor": "top", "len": 0.46}, {"y": 0.0, "yanchor": "bottom", "len": 0.46}
    own = [p for p in panels if p.own_scale]
    if own:
        top = float(max(np.nanmax(p.matrix) for p in own)) or 1.0
        colorbar = {"title": {"text": html_text(own[0].own_scale)}, **lower}
        fig.update_layout(coloraxis2={"colorscale": style.colorscale, "cmin": 0.0, "cmax": top, "colorbar": colorbar})
    if signed:
        bound = float(max(signed)) or 1.0
        fig.update_layout(
            coloraxis2={
                "colorscale": "RdBu",
                "cmid": 0.0,
                "cmin": -bound,
                "cmax": bound,
                "colorbar": {"title": {"text": "difference"}, **lower},
            }
        )
    if own or signed:
        fig.update_layout(coloraxis={"colorbar": upper})
