"""Plotly figures for the browser. Builders return a figure; they never show or save it.

Queries are rows (top to bottom), keys are columns. Tick labels are escaped and made unique
("the ·1", "the ·8"): plotly reads labels as HTML and merges equal category labels. Every text a
builder is given (titles, labels) is plain text: the builder escapes it (attnviz.escape.html_text),
and "\n" is its only line break.
Large inputs are average-pooled to at most `max_side` cells a side before they are sent,
so a 512-token input stays within a few MB (bertviz ships every layer and dies near 256).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
import torch

from attnviz.blocks import block_mean, pool_factor
from attnviz.escape import html_text
from attnviz.figures import lesson_charts
from attnviz.figures.layout import (
    CHAR,
    COLUMN_GAP,
    COLUMN_PX,
    EVERY_LABEL,
    EVERY_TICK,
    GRID_WIDTH,
    PHONE_WIDTH,
    PROJECTOR_MAIN_PX,
    PROJECTOR_SCREEN_PX,
    bar_across,
    bar_px,
    drawn_chars,
    frame_px,
    labels_fit,
    main_px,
    ordinal,
    row_label_px,
    style_layout,
    title_lines,
    title_over,
    title_px,
    title_top,
    token_ticks,
)
from attnviz.figures.style import MASKED_COLOUR, Style, pooled_labels
from attnviz.result import Attention, AttentionResult, counted

HOVER = "query %{y}<br>key %{x}<br>weight %{z:.4f}<extra>%{fullData.name}</extra>"
PIECE_HOVER_CELLS = 96 * 96  # a one-head map this small carries each cell's raw pieces in its hover


def piece_hover(rows: Sequence[str], cols: Sequence[str], pieces: tuple | None) -> tuple[np.ndarray | None, str]:
    """The tokenizer's raw pieces for a one-head map's hover: customdata (Tq, Tk, 2) and the hover line that
    shows them, where they differ from the labels ("Ġanimal" under "animal") and the map is small enough."""
    if pieces is None or (tuple(pieces[0]), tuple(pieces[1])) == (tuple(rows), tuple(cols)):
        return None, ""
    if len(pieces[0]) * len(pieces[1]) > PIECE_HOVER_CELLS:
        return None, ""
    r = np.array([html_text(p, 40) for p in pieces[0]], dtype=object)
    c = np.array([html_text(p, 40) for p in pieces[1]], dtype=object)
    data = np.stack(np.broadcast_arrays(r[:, None], c[None, :]), axis=-1)  # (Tq, Tk, 2)
    return data, "<br>pieces %{customdata[0]} → %{customdata[1]}"


def pooled(weights: torch.Tensor, max_side: int) -> tuple[np.ndarray, int, int]:
    """(..., Tq, Tk) -> float32 array at most max_side a side (means of fixed f x f blocks), and the block sizes."""
    tq, tk = weights.shape[-2:]
    fq, fk = pool_factor(tq, max_side), pool_factor(tk, max_side)
    if fq == 1 and fk == 1:
        return weights.numpy().astype(np.float32), 1, 1
    return block_mean(weights, fq, fk).numpy().astype(np.float32), fq, fk


def masked_cells(tq: int, tk: int, fq: int = 1, fk: int = 1, window: int = 0) -> np.ndarray:
    """(ceil(Tq/fq), ceil(Tk/fk)) bool: the cells of a causal map pooled in fq x fk blocks that the mask forbids
    wholly: every key after every query of the cell, or (a sliding `window`, 0 none) every key further back than
    the window from every query. They are drawn grey (masked), not as weight 0."""
    q0, k0 = np.arange(math.ceil(tq / fq)) * fq, np.arange(math.ceil(tk / fk)) * fk
    q1, k1 = np.minimum(q0 + fq, tq) - 1, np.minimum(k0 + fk, tk) - 1  # each block's last query and key
    future = k0[None, :] > q1[:, None]
    return future | (q0[:, None] - k1[None, :] >= window) if window else future


def layer_masked(result: Attention, layer: int) -> np.ndarray | None:
    """(Tq, Tk) bool: what a causal result's mask forbids in one layer (the future; beyond the layer's sliding
    window); None for attention that masks nothing."""
    if result.kind != "causal":
        return None
    tq, tk = result.shape[-2:]
    return masked_cells(tq, tk, window=result.layer_window(layer))


def masked_future(maps: np.ndarray, tq: int, tk: int, fq: int, fk: int, causal: bool, window: int = 0) -> np.ndarray:
    """maps (..., Tq', Tk') with a causal map's masked cells NaN (plotly leaves them out: the grey ground shows)."""
    return np.where(masked_cells(tq, tk, fq, fk, window), np.nan, maps) if causal else maps


def masked_trace(grey: np.ndarray, x=None, y=None) -> go.Heatmap:
    """A heatmap of the masked grey where `grey` is 1 (NaN elsewhere: the map under it shows), on no colour axis; at
    the map's x and y where it has them. Used where the plot's ground would show beyond the map (a map kept square
    in a wider plot: constrain="domain")."""
    return go.Heatmap(
        z=grey,
        x=x,
        y=y,
        colorscale=[[0, MASKED_COLOUR], [1, MASKED_COLOUR]],
        showscale=False,
        hoverinfo="skip",
        name="masked",
    )


def grey_ground(fig: go.Figure, masked: bool) -> go.Figure:
    """A map with masked cells (NaN) on the masked grey, no grid lines over it; else on white."""
    fig.update_xaxes(showgrid=False).update_yaxes(showgrid=False)
    return fig.update_layout(plot_bgcolor=MASKED_COLOUR if masked else "white")


def click_markers(xs, ys, name: str, size: int, *, gl: bool = False) -> go.Scatter | go.Scattergl:
    """A nearly invisible square marker on every cell of a heatmap's grid (xs by ys): clicks on a heatmap send
    Streamlit no selection, clicks on markers do. WebGL (gl) for grids of thousands of cells."""
    x, y = np.meshgrid(xs, ys)
    return (go.Scattergl if gl else go.Scatter)(
        x=x.ravel(),
        y=y.ravel(),
        mode="markers",
        name=name,
        showlegend=False,
        hoverinfo="none",
        marker={"symbol": "square", "size": size, "opacity": 0.01, "color": "white"},
    )


def _grid_layout(n: int, columns: int, gap_x: float, gap_y: float, labelled: bool) -> dict:
    """Axes and titles of an n-map grid as a plain dict: 7x faster than make_subplots plus axis updates. `labelled`:
    every map's two axes label every token (the gaps make room for them)."""
    rows = math.ceil(n / columns)
    w = (1 - gap_x * (columns - 1)) / columns
    h = (1 - gap_y * (rows - 1)) / rows
    layout: dict = {"annotations": []}
    for i in range(n):
        r, c = divmod(i, columns)
        sx = "" if i == 0 else str(i + 1)
        x0, y1 = c * (w + gap_x), 1 - r * (h + gap_y)
        clamp = lambda v: min(1.0, max(0.0, round(v, 9)))  # noqa: E731  (float error could leave [0, 1])
        layout[f"xaxis{sx}"] = {
            "domain": [clamp(x0), clamp(x0 + w)],
            "anchor": f"y{sx}",
            "tickangle": -60,
            "showticklabels": labelled,
            "type": "category",
            **({} if labelled else {"ticks": ""}),  # no marks where no label says what they mark
        }
        layout[f"yaxis{sx}"] = {
            "domain": [clamp(y1 - h), clamp(y1)],
            "anchor": f"x{sx}",
            "autorange": "reversed",
            "showticklabels": labelled,
            "type": "category",
            **({} if labelled else {"ticks": ""}),
        }
        if labelled:  # every token, not every other one: plotly thins category labels it thinks too close
            for ax in (f"xaxis{sx}", f"yaxis{sx}"):
                layout[ax].update(EVERY_TICK)
        layout["annotations"].append(title_over(f"Head {i + 1}", x0 + w / 2, y1))
    return layout


def grid_columns(n_heads: int) -> int:
    """Maps per row for a layer's heads: 3 for 3, 6 or 9 heads (square-ish), else 4."""
    return 3 if n_heads in (3, 6, 9) else min(4, n_heads)


def head_grid(
    result: Attention,
    layer: int,
    *,
    style: Style = Style(),
    columns: int | None = None,
    max_side: int = 96,
    note: str = "",
    pick: bool = True,
) -> go.Figure:
    """One heatmap per head of a layer, on one shared colour scale; `note` says what else the title should; `pick`:
    whether the page offers one head drawn alone (the title's hints send a reader there only where it does)."""
    maps, fq, fk = pooled(result.weights[layer], max_side)  # (H, Tq', Tk')
    rows, cols = result.target_tokens, result.source_tokens
    causal, window = result.kind == "causal", result.layer_window(layer)
    return maps_grid(
        maps,
        rows,
        cols,
        fq,
        fk,
        layer,
        style=style,
        columns=columns,
        note=note,
        causal=causal,
        window=window,
        pick=pick,
    )


def maps_grid(
    maps: np.ndarray,
    rows: tuple[str, ...],
    cols: tuple[str, ...],
    fq: int,
    fk: int,
    layer: int,
    *,
    style: Style = Style(),
    columns: int | None = None,
    note: str = "",
    causal: bool = False,
    window: int = 0,
    pick: bool = True,
) -> go.Figure:
    """A layer's heads from maps already pooled (H, Tq', Tk') with blocks of fq x fk tokens, one colour scale; a
    `causal` layer's future (and what lies beyond its sliding `window`) grey, as on every side-by-side map; `pick` as
    head_grid's."""
    xs, ys = pooled_labels(cols, fk), pooled_labels(rows, fq)
    n, top = maps.shape[0], float(maps.max())
    maps = masked_future(maps, len(rows), len(cols), fq, fk, causal, window)
    columns = min(columns or grid_columns(n), n)
    traces = [
        go.Heatmap(
            z=maps[h],
            x=xs,
            y=ys,
            coloraxis="coloraxis",
            name=f"head {h + 1}",
            hovertemplate=HOVER,
            xaxis=f"x{h + 1 if h else ''}",
            yaxis=f"y{h + 1 if h else ''}",
            hoverongaps=False,
        )
        for h in range(n)
    ]
    font, n_tok = style.font_size, max(len(xs), len(ys))
    # Every token labelled on every map up to 64 tokens, where a map as wide as the column gives each its line (on
    # a projector's larger labels, up to about 40); past that no labels on the grid, and the title says so. On a
    # projector the grid fits one screen (PROJECTOR_SCREEN_PX): where labelled maps would not (one a row: 7,048 px
    # for BERT's 12 heads), the grid is unlabelled and the title says where the tokens are labelled.
    # A phone's grid is one map a row, laid out for its narrow column: maps side by side there put each map's row
    # labels over the map to its left.
    width, asked = (PHONE_WIDTH, 1) if style.phone else (GRID_WIDTH, columns)
    row_px = CHAR * font * drawn_chars(ys) + 6  # a map's row labels
    labelled = n_tok <= EVERY_LABEL and labels_fit(n_tok, font) <= width - row_px
    geometry = functools.partial(_grid_geometry, n, asked, xs, ys, font, width=width)
    columns, n_rows, side, left_px, below_px = geometry(labelled, style.projector)
    head_title = font + 16  # each map's own title (Head 1)
    one_screen = False
    if labelled and style.projector and n_rows * (side + below_px + head_title) + 80 > PROJECTOR_SCREEN_PX:
        labelled = False
        one_screen = True
        columns, n_rows, side, left_px, below_px = geometry(False, True)
    height = n_rows * (side + below_px + head_title) + 80
    plot_h = height - 80 - below_px
    gap_x = (left_px + 10) / (width - left_px)
    gap_y = (below_px + head_title) / plot_h if n_rows > 1 else 0.0
    layout = _grid_layout(n, columns, gap_x, gap_y, labelled)
    pooling = _grid_hint(fq, fk, n_tok, labelled, one_screen, pick)
    # A phone's map is its column less the row labels (its colour bar lies across the top: bar_across; down the
    # side it left BERT's 16 keys 9.9 px each for 12 px labels): every k-th key labelled where each has no line of
    # its own, and the title says so.
    room = max(1.0, width - left_px - 20)
    step = math.ceil(labels_fit(len(xs), font) / room) if style.phone else 1
    if labelled and step > 1:
        for i in range(n):
            layout[f"xaxis{i + 1 if i else ''}"].update(tickmode="array", tickvals=xs[::step], ticktext=xs[::step])
        pooling += f" — every {step}{ordinal(step)} key labelled"
    fig = go.Figure(data=traces, layout=layout)
    title = f"Layer {layer + 1}: every head{pooling}{_note(note)}"
    fig = style_layout(fig, style, top, title)
    # Room for the token labels, measured here: plotly's automargin would lay the figure out twice in the browser
    # (0.54 s against 0.35 s from Enter to 12 maps drawn), and the grid is drawn without Streamlit's theme.
    fig = grey_ground(fig, causal).update_layout(
        height=round(height), margin={"l": round(left_px) + 10, "b": round(below_px) + 10}
    )
    return _for_phone(fig, style, title, width, below=font + 10) if style.phone else fig


def _for_phone(fig: go.Figure, style: Style, title: str, width: int, below: int = 0) -> go.Figure:
    """A map or a layer's grid laid out for a phone: its title in lines that fit the column, never cut ("Layer 1:
    every head (random weights: d_model 384, 12 heads)" ran off a phone's 358 px), the maps keeping their height,
    and the colour bar across the top (bar_across), `below` px above the maps (a grid's map titles)."""
    font = style.font_size + 4  # style_layout's title
    lines = title_lines(title, width, font)
    more = title_px(font, len(lines)) - title_px(font, 1)
    fig.update_layout(title_text=html_text("\n".join(lines)), height=int(fig.layout.height) + more)
    return bar_across(fig, style, title_lines=len(lines), below=below)


ONE_HEAD_LABELLED = "tokens labelled on one head (pick one) or on hover"
ON_HOVER = "tokens, on hover"  # the same grid where the page draws no head alone (Knock out, Start here, Inside)


def _grid_hint(fq: int, fk: int, n_tok: int, labelled: bool, one_screen: bool, pick: bool) -> str:
    """What a layer grid's title says of its tokens where its maps do not label each: pooled, on one projected
    screen, or too many; a head to pick only where the page offers one (`pick`)."""
    if fq != 1 or fk != 1:
        return f" — pooled {fq}×{fk} tokens a cell" + ("; pick a head for full detail" * pick)
    if one_screen:
        return f" — projector: {n_tok} {ONE_HEAD_LABELLED if pick else ON_HOVER}"
    if not labelled:
        return f" — {n_tok} tokens, too many to label on each map: hover (tap)" + (" or pick a head" * pick)
    return ""


def _grid_geometry(n: int, columns: int, xs, ys, font: int, labelled: bool, projector: bool, *, width: int):
    """A grid of n maps' columns, rows, map side and label room (left, below) in px, laid out `width` px wide: as many
    maps a row as leave each token a label's line where labelled, else the columns asked; a projector's unlabelled
    grid no taller than one screen (PROJECTOR_SCREEN_PX)."""
    left_px = CHAR * font * drawn_chars(ys) + 6 if labelled else 0
    below_px = 0.87 * CHAR * font * drawn_chars(xs) + 6 if labelled else 0  # turned 60°
    if labelled:  # as many maps a row as leave each token a label's line
        side_needed = labels_fit(max(len(xs), len(ys)), font)
        columns = max(1, min(columns, int((width - left_px) // (side_needed + left_px + 10))))
    n_rows = math.ceil(n / columns)
    side = (width - left_px - (columns - 1) * (left_px + 10)) / columns  # px of one map
    if not labelled:
        side = max(side, 260 if projector else 220) if columns > 1 else side
        if projector:  # the whole grid on one projected screen
            side = min(side, (PROJECTOR_SCREEN_PX - 80) / n_rows - (font + 16))
    else:  # no taller than its labels need: a projector's one map a row, square, made the grid 11,000 px tall
        side = min(side, max(1.25 * labels_fit(max(len(xs), len(ys)), font), 260))
    return columns, n_rows, side, left_px, below_px


def _note(note: str) -> str:
    return f" ({note})" if note else ""


HEAD_LABELS = 80  # one head's map labels every token up to this many a side; past it, none (hover for the token)
HEAD_BAR = 1.6  # the colour bar's room on a one-head map's right, in bar_px: 74-110 px measured at 12 pt, 121-162 at 20


def head_map(
    result: AttentionResult, layer: int, head: int, *, style: Style = Style(), max_side: int = 512, note: str = ""
) -> go.Figure:
    """One head, large, with token labels on both axes; a causal head's future grey (masked), not weight 0."""
    m, fq, fk = pooled(result.weights[layer, head], max_side)  # (Tq', Tk')
    top, causal = float(m.max()), result.kind == "causal"
    m = masked_future(m, result.weights.shape[-2], result.weights.shape[-1], fq, fk, causal, result.layer_window(layer))
    xs, ys = pooled_labels(result.source_tokens, fk), pooled_labels(result.target_tokens, fq)
    pieces = (result.target.pieces, result.source.pieces) if fq == fk == 1 else None
    data, line = piece_hover(result.target_tokens, result.source_tokens, pieces)
    hover = HOVER.replace("<extra>", line + "<extra>")
    trace = go.Heatmap(
        z=m, x=xs, y=ys, coloraxis="coloraxis", name=f"head {head + 1}", hovertemplate=hover, hoverongaps=False
    )
    fig = go.Figure(trace.update(customdata=data))
    font = style.font_size
    x_said, y_said = len(xs) <= HEAD_LABELS, len(ys) <= HEAD_LABELS
    row_px = font + 12  # px a row needs for its label: a projector's map grows with its font
    side = min(1400 if style.projector else 900, max(420, row_px * len(ys) + 160))
    # Room for the labels and the axis titles outside the map, measured here as maps_grid does (the margins were
    # 10 px: the row labels were cut to their last character and the query title lay over the map).
    left = (CHAR * font * drawn_chars(ys) + 6 if y_said else 0) + font + 14
    below = (0.87 * CHAR * font * drawn_chars(xs) + 6 if x_said else 0) + font + 14
    # Each token a label's line where the map gives it one, else every k-th and the title says so: the map is the
    # main column less its row labels and colour bar (a phone's 16 keys had 8.6 px each for 12 px labels, which ran
    # together), its rows the figure's height less the title's room. A projector's column is the 1920x1080 screen's
    # projector mode is laid out for: at 1280x800's 740 px, 19 tokens would already have been thinned there.
    column = PROJECTOR_MAIN_PX if style.projector and not style.phone else main_px(style)
    x_px, y_px = column - left - (0 if style.phone else HEAD_BAR * bar_px(font)), side - 60  # a phone's bar: across
    x_title, y_title = "key (attended to)", "query (attending)"
    fig.update_xaxes(
        tickangle=-60,
        **(
            token_ticks(xs, x_px, font, x_title, HEAD_LABELS)
            if x_said
            else {"showticklabels": False, "title": {"text": _unlabelled(x_title, len(result.source_tokens), fk)}}
        ),
    )
    fig.update_yaxes(
        **(
            token_ticks(ys, y_px, font, y_title, HEAD_LABELS)
            if y_said
            else {"showticklabels": False, "title": {"text": _unlabelled(y_title, len(result.target_tokens), fq)}}
        )
    )
    # a map of more than max_side tokens a side is pooled: its title says so (it said "Layer 1, head 2" over 1,361
    # tokens in 454 cells of 3, and its axes counted the cells as queries)
    pooling = "" if fq == fk == 1 else f" — pooled {fq}×{fk} tokens a cell"
    title = f"Layer {layer + 1}, head {head + 1}{pooling}{_note(note)}"
    fig = style_layout(fig, style, top, title)
    grey_ground(fig, causal).update_layout(height=round(side + below), margin={"l": round(left), "b": round(below)})
    return _for_phone(fig, style, title, column) if style.phone else fig


def _unlabelled(axis: str, n_tokens: int, f: int) -> str:
    """An axis of too many tokens to label: how many, and how many a cell where the map is pooled."""
    return f"{axis}: {n_tokens:,}{f' tokens, {f} a cell' if f > 1 else ''}, too many to label: hover or tap"


def _tile_ticks(n: int, size: int, prefix: str) -> dict:
    """One tick in the middle of each of n tiles of `size` cells (plus a one-cell gap): "H1", "H2", ..."""
    return {
        "tickvals": [i * (size + 1) + (size - 1) / 2 for i in range(n)],
        "ticktext": [f"{prefix}{i + 1}" for i in range(n)],
        "showgrid": False,
        "zeroline": False,
    }


OVERVIEW_THUMB = 32  # the largest side of each head's small map in the overview


def overview(
    result: AttentionResult, *, style: Style = Style(), thumb: int = OVERVIEW_THUMB, note: str = ""
) -> go.Figure:
    """All layers x heads as small maps, tiled into ONE heatmap (L x H subplots are what make plotly slow); a causal
    model's future grey."""
    maps, fq, fk = pooled(result.weights, thumb)
    return overview_maps(maps, style=style, note=note, masked=layers_masked(result, fq, fk))


def layers_masked(result: Attention, fq: int, fk: int) -> np.ndarray | None:
    """(L, Tq', Tk'): the cells of each layer's maps pooled in fq x fk blocks that its mask forbids wholly (the
    future; beyond the layer's sliding window); None for attention that masks nothing."""
    if result.kind != "causal":
        return None
    tq, tk = result.shape[-2:]
    return np.stack([masked_cells(tq, tk, fq, fk, result.layer_window(i)) for i in range(result.n_layers)])


def overview_maps(
    maps: np.ndarray, *, style: Style = Style(), note: str = "", masked: np.ndarray | None = None
) -> go.Figure:
    """The overview from small maps already made, (L, H, s, s'); `masked` (s, s') or each layer's (L, s, s'): the
    cells the mask forbids, grey (a trace of their own: the gaps between the tiles stay white)."""
    n_l, n_h, s, s2 = maps.shape
    shape = (n_l * (s + 1) - 1, n_h * (s2 + 1) - 1)
    tile = np.full(shape, np.nan, dtype=np.float32)
    grey = np.full(shape, np.nan, dtype=np.float32)  # 1 on the masked cells
    forbidden = np.broadcast_to(masked if masked is not None else False, (n_l, s, s2))
    who = np.full(tile.shape + (2,), -1, dtype=np.int16)  # 1-based layer and head under the cursor
    for layer in range(n_l):
        for head in range(n_h):
            r, c = layer * (s + 1), head * (s2 + 1)
            tile[r : r + s, c : c + s2] = np.where(forbidden[layer], np.nan, maps[layer, head])
            grey[r : r + s, c : c + s2] = np.where(forbidden[layer], 1.0, np.nan)
            who[r : r + s, c : c + s2] = (layer + 1, head + 1)
    # Each tile on its own scale would hide weak heads' structure; one scale keeps heads comparable.
    fig = go.Figure(
        go.Heatmap(
            z=tile,
            customdata=who,
            coloraxis="coloraxis",
            name="overview",
            hovertemplate="layer %{customdata[0]}, head %{customdata[1]}<br>weight %{z:.3f}<extra></extra>",
            hoverongaps=False,
        )
    )
    if masked is not None:
        fig.add_trace(masked_trace(grey))
    # Square cells in a plot area of the tiles' own shape: the axes keep to their domain (constrain), so the names
    # stand next to the tiles, and the figure is as tall as the tiles at the column's width (no taller than 70 px a
    # layer). Its height fixed at 70 px a layer, BERT's 6 x 12 tiles filled 333 of a laptop's 438 px and the heads'
    # names stood 69 px below them; on a phone the tiles were 108 px tall in 428.
    fig.update_xaxes(**_tile_ticks(n_h, s2, "H"), constrain="domain")
    fig.update_yaxes(**_tile_ticks(n_l, s, "L"), scaleanchor="x", constrain="domain")
    title = f"All {counted(n_l, 'layer')} × {counted(n_h, 'head')}{_note(note)}"
    fig = style_layout(fig, style, float(np.nanmax(tile)), title)
    font = style.font_size
    plot_w = main_px(style) - 20 - 4 * font - (0 if style.phone else bar_px(font))  # less "L12" and the colour bar
    plot_h = min(plot_w * tile.shape[0] / tile.shape[1], 70 * n_l)
    below = 2 * font + (3 * font if style.phone else 0)  # the heads' names (a phone's may turn: "H10" in 25 px)
    fig.update_layout(height=round(max(120, plot_h) + 70 + below))  # and the title over the tiles
    if style.phone:
        return _for_phone(fig, style, title, main_px(style))
    # Tiles narrower than the column (a deep model: Gemma 3's 18 x 4, SmolLM2's 30 x 9) stand at its left with the
    # colour bar across their top, as long as they are wide: centred, with the bar down the column's right side, they
    # left it 230 px away from them on a laptop and 400 px on a projector. (Plotly places a bar at a fraction of the
    # plot's width, and this figure's is known only in the browser; the tiles' own width is known here.) So on every
    # projector: laid out for its 740 px column at 1280 px, a 1920 px one's 1,380 px left any model's tiles narrower.
    tiles = max(120, plot_h) * tile.shape[1] / tile.shape[0]
    if style.projector or tiles < plot_w - 2 * font:  # SmolLM2's 30 x 9, 56 px short of the column: its bar 72 px off
        fig.update_xaxes(constraintoward="left")
        fig = bar_across(fig, style)
        across = {"lenmode": "pixels", "len": round(max(tiles, 12 * font)), "thickness": 14 if style.projector else 10}
        # 14 px and 20 px labels: within BAR_ACROSS_PX; each label right of its tick, so the bar's "0" stays off its
        # title, which plotly sets left of the bar (centred, a projector's "0" ran 2 px into "weight")
        fig.update_layout(coloraxis_colorbar=across | {"ticklabelposition": "outside right"})
    return fig


def _label_axes(
    fig: go.Figure, rows: list[str] | None, cols: list[str] | None, rows_px: float, cols_px: float, font: int
) -> None:
    """Each axis labelled every token where each label has a line of its own (else every k-th, said in its title);
    past EVERY_LABEL tokens, or with no labels, the axis names its ends instead."""
    for axis, labels, fit in ((fig.update_yaxes, rows, rows_px), (fig.update_xaxes, cols, cols_px)):
        if labels is None or len(labels) > EVERY_LABEL:  # too many: the axis says what runs along it
            said = f"{labels[0]} … {labels[-1]}, too many to label: hover or tap" if labels is not None else None
            axis(showticklabels=False, title={"text": html_text(said), "font": {"size": font - 1}} if said else None)
            continue
        step = max(1, math.ceil(len(labels) / max(1, fit / (font + 1))))  # every label that has a line of its own
        axis(showticklabels=True, tickmode="array", tickvals=list(labels)[::step], ticktext=list(labels)[::step])
        if step > 1:
            axis(title={"text": f"every {step}{ordinal(step)} labelled", "font": {"size": font - 1}})


def _columns_px(width: int, rows, row_ticks, font: int) -> float:
    """A matrix's columns' own width: its column less the rows' labels as drawn (row_ticks' and their rule's title,
    where given: a phone's Generate grid had 9.8 px a key for 12 px labels with the rows' own names counted) and the
    colour bar."""
    left = row_label_px(row_ticks[1], font) + font + 6 if row_ticks is not None else row_label_px(rows, font)
    return width - left - bar_px(font)


def _square(fig: go.Figure, width: int, rows: list[str] | None, font: int, below: float) -> tuple[int, int]:
    """A matrix's plot as tall as wide: its side (the column less the rows' labels and their rule, the colour bar
    with its title down its side, the margins) and the figure's height for it (the side, the columns' labels and
    their rule, the title's line). Plotly then keeps the cells square whatever the column's true width, the map at
    the top and left of its plot area, and the colour bar as long as the side estimated, from the map's top."""
    n = len(rows) if rows is not None else 0
    side = width - 20 - row_label_px(rows, font) - bar_px(font)  # the bar's title down its right side
    thinned = n * (font + 1) > side  # labelled every k-th: a rule under the columns, one beside the rows
    side = int(side - (font + 8 if thinned else 0))
    fig.update_xaxes(constrain="domain", constraintoward="left")
    fig.update_yaxes(scaleanchor="x", constrain="domain", constraintoward="top")
    # over the bar, its title pushed the bar below the map by its own height, and took its words' width beside it
    fig.update_traces(colorbar={"lenmode": "pixels", "len": side, "y": 1.0, "yanchor": "top", "title_side": "right"})
    return side, round(side + below + (font + 8 if thinned else 0) + title_px(font + 1, 1) + 10)


def _matrix_trace(m, rows, cols, style: Style, signed: bool, masked, bound: float | None, unit: str | None):
    """matrix's heatmap: masked cells left out (NaN: the grey ground shows), a diverging scale round 0 when signed,
    up to `bound` (default: the largest magnitude), its colour bar titled `unit`."""
    m = np.asarray(m, dtype=np.float32)
    if masked is not None:
        m = np.where(masked, np.nan, m)
    finite = m[np.isfinite(m)]
    if bound is None:
        bound = float(np.abs(finite).max()) if finite.size else 1.0
    scale = (
        {"colorscale": "RdBu", "zmid": 0.0, "zmin": -bound, "zmax": bound}
        if signed
        else {"colorscale": style.colorscale, "zmin": 0.0, "zmax": bound}
    )
    return go.Heatmap(
        z=np.where(np.isfinite(m), m, np.nan),
        x=cols,
        y=rows,
        hoverongaps=False,
        colorbar={
            "title": {"text": html_text(unit or ("value" if signed else "weight"))},
            "thickness": 16 if style.projector else 10,
        },
        hovertemplate="row %{y}<br>col %{x}<br>%{z:.4f}<extra></extra>",
        **scale,
    )


def matrix(
    m: np.ndarray,
    title: str,
    *,
    rows: list[str] | None = None,
    cols: list[str] | None = None,
    style: Style = Style(),
    signed: bool = True,
    masked: np.ndarray | None = None,
    height: int = 260,
    bound: float | None = None,
    unit: str | None = None,
    row_ticks: tuple[list[str], list[str], str] | None = None,
    width: int | None = None,
    square: bool = False,
) -> go.Figure:
    """Any matrix of the computation (X, Q, scores, ...): signed values on a diverging scale around 0, with a colour
    bar titled `unit` (default: "weight" unsigned, "value" signed).

    `masked` (bool, the matrix's shape) marks cells the mask forbids: drawn grey, left out of the scale.
    `bound`: the colour scale's end (default: the largest magnitude); values past it take the end colour.
    `row_ticks`: (the rows labelled, their labels, the rule in words) where rows are too many to label each.
    `width`: the px of the page's column the map stands in (default COLUMN_PX: three a row); its row labels and
    colour bar take their share, and a token axis is labelled every token where the rest gives each a line.
    `square`: positions against positions (PE(i)·PE(j), a cosine): cells as tall as wide, both axes labelled every
    k-th where a cell is thinner than a label's line (a line a row drew the Positions page's 64 x 64 cosine 4.4 times
    taller than wide, its diagonals steep).
    """
    width = min(width or COLUMN_PX, main_px(style))  # never wider than the page's main column (a phone's: 358 px)
    fig = go.Figure(_matrix_trace(m, rows, cols, style, signed, masked, bound, unit))
    font = style.font_size
    cols_px = _columns_px(width, rows, row_ticks, font)
    below = 0.87 * CHAR * font * drawn_chars(cols) + 6 if cols and len(cols) <= EVERY_LABEL else 0  # turned 60°
    height = round(height * (1.5 if style.projector else 1))  # a projector's map grows with its labels
    if square:
        cols_px, height = _square(fig, width, rows, font, below)
    elif rows is not None and len(rows) <= EVERY_LABEL:  # a line for each row's label, above the columns' labels
        height = max(height, round(labels_fit(len(rows), font) + 80 + below))  # turned 60°: sin 60° of its length
    # A title in lines that fit a narrow column (three maps a row on the Masks page): never cut.
    lines = title_lines(title, width, font + 1)
    _label_axes(fig, rows, cols, cols_px if square else height - 60, cols_px, font)
    top = title_px(font + 1, len(lines)) + frame_px(style)  # the title's lines over the map's grey frame
    if row_ticks is not None:
        fig.update_yaxes(
            showticklabels=True,
            tickmode="array",
            tickvals=row_ticks[0],
            ticktext=row_ticks[1],
            title={"text": html_text(row_ticks[2]), "font": {"size": font - 1}},
        )
    fig.update_yaxes(autorange="reversed", showgrid=False)  # grid lines showed white through a masked cell's grey
    fig.update_xaxes(tickangle=-60, showgrid=False)
    gaps = np.isnan(np.asarray(fig.data[0].z, dtype=float))
    if gaps.any():  # masked cells grey by a trace of their own, on a white ground: a grey ground filled the theme's
        fig.add_trace(masked_trace(np.where(gaps, 1.0, np.nan), cols, rows))  # pad round the map, a frame
    return fig.update_layout(
        # the title's top at the figure's top and the map below its last line (plotly centres a title's first line
        # in the margin, so a wrapped title ran down over the map in projector mode)
        title={"text": html_text("\n".join(lines)), "font": {"size": font + 1}, **title_top(font + 1, len(lines))},
        height=height + top - title_px(font + 1, 1),  # the map keeps its height
        margin={"l": 10, "r": 10, "t": top, "b": 10},
        font={"size": font},
        plot_bgcolor="white",
    )


def maps_a_row(rows: Sequence[str], across: int, style: Style = Style(), most: int = 3) -> tuple[int, int]:
    """Small maps side by side in the main column: how many a row (at most `most`) leave each of `across` labelled
    columns a line of its own beside the `rows`' labels and a colour bar, and the px each map's column gets.
    `across` = 0 for columns not labelled a token each (a vector's dimensions): a map then needs 120 px of cells.
    """
    font = style.font_size
    cells = labels_fit(across, font) if 0 < across <= EVERY_LABEL else 120
    need = row_label_px(rows, font) + bar_px(font) + cells
    main = main_px(style)
    for k in range(max(1, most), 1, -1):
        px = (main - COLUMN_GAP * (k - 1)) / k
        if px >= need:
            return k, int(px)
    return 1, main


def cost_chart(costs, *, style: Style = Style()) -> go.Figure:
    """Measured growth against N on log-log axes, each series relative to its value at the smallest N:
    the attention weights' size, the time of one pass (and peak GPU memory on a GPU), with N and N² lines."""
    n = np.array([c.n for c in costs], dtype=float)
    series = {
        "attention weights (MB)": np.array([c.weights_mb for c in costs]),
        "time of one pass (ms)": np.array([c.ms for c in costs]),
    }
    if costs[0].peak_mb is not None:
        series["peak GPU memory (MB)"] = np.array([c.peak_mb for c in costs])
    fig = go.Figure()
    for power, label, dash in ((1, "∝ N", "dot"), (2, "∝ N²", "dash")):  # drawn first: under the measurements
        fig.add_trace(
            go.Scatter(x=n, y=(n / n[0]) ** power, mode="lines", line={"dash": dash, "color": "grey"}, name=label)
        )
    for name, values in series.items():
        fig.add_trace(
            go.Scatter(
                x=n,
                y=values / values[0],
                customdata=values,
                mode="lines+markers",
                name=name,
                hovertemplate="N = %{x}<br>%{customdata:.3g} (×%{y:.1f})<extra>" + name + "</extra>",
            )
        )
    # the measured N on the axis and powers of ten up it (plotly's log ticks read "2 3 4 5 6 7 8 9 100 2 3", and
    # "1000 5 2 100 5 2"), the legend in its rows over the plot (down its side it took half a phone's chart)
    fig.update_xaxes(type="log", title="tokens N", tickvals=n.tolist(), ticktext=[f"{int(v)}" for v in n])
    fig.update_yaxes(type="log", title=f"× the value at N = {int(n[0])}", dtick=1)
    font = style.font_size
    rows = lesson_charts.legend_rows([t.name for t in fig.data], main_px(style), font)
    return fig.update_layout(
        height=lesson_charts.grown(380, style) + rows * (font + 8),
        font={"size": font},
        margin={"l": 10, "r": 10, "t": 10 + rows * (font + 8), "b": 10},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "left", "x": 0},
    )


# Gutters between panels are fractions of the figure's width, which plotly knows and we do not: they are
# sized for this width, the narrowest the figure meets (a laptop with the sidebar open), so on any wider
# screen a panel's row labels still clear the panel to its left.


def empty_figure() -> go.Figure:
    """A figure with nothing in it, 10 px tall: what a page draws, hidden, to have the browser load plotly.js early."""
    return go.Figure(layout={"height": 10, "margin": {"l": 0, "r": 0, "t": 0, "b": 0}})
