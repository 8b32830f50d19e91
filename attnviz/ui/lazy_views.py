"""The Heads page for a long text (a LazyAttention): pooled maps, attention received, an exact window, an exact row.

Nothing here holds every weight: the maps come pooled from the first pass, and the window and the row are
computed from the queries and keys when they are drawn (a 256-token window in tens of milliseconds, a row over
every head in a few hundred).
"""

from __future__ import annotations

import json

import numpy as np
import streamlit as st

from attnviz import api, fused
from attnviz.blocks import block_mean, pool_factor
from attnviz.figures import interactive, layout, lazy_maps
from attnviz.figures.panel_maps import Panel
from attnviz.figures.style import pooled_labels
from attnviz.lazy import GRID_SIDE, THUMB_SIDE, LazyAttention
from attnviz.ui import state, widgets
from attnviz.ui.controls import Inputs

HEAD_SIDE = 128  # cells a side of one head's clickable map
BAND_SIDE = 512  # columns of the attention-received band
WIDTHS = (16, 32, 64, 128, 256)  # the exact window's sides, in tokens
TOP_KEYS = 10
URL_KEYS = ("log", "zoom", "zq", "zk", "row")  # the URL keys of this view's own widgets (a short text has none)


def intro(lazy: LazyAttention) -> None:
    """What a long text's pictures are, in one paragraph."""
    n = lazy.n_tokens
    qk_mb = (lazy.q.nelement() + lazy.k.nelement()) * 4 / 2**20
    st.info(
        f"A long text: **{n:,} tokens**. Every weight of this model would take {lazy.eager_bytes / 2**30:.1f} GB; "
        f"attnviz kept each layer's queries and keys instead ({qk_mb:,.0f} MB) and computes weights from them where "
        "a view asks. Every number shown is exact; maps of the whole text are pooled (each cell is the mean of the "
        "weights of a block of queries on a block of keys), and the window and the row below are not pooled at all."
    )
    if lazy.notice:  # the GPU ran out of memory while its weights were computed: they moved to the CPU
        st.info(lazy.notice)
    if not fused.available(lazy.q.device):  # said to whoever runs the server, not why (its log and doctor say that)
        st.caption(
            "This server analyses long texts with plain PyTorch operations, not attnviz's fused kernel (it has no C "
            "compiler, or the kernel is turned off): the same numbers, up to 2x slower on a CPU. `attnviz doctor` "
            "on the server says why."
        )


def options_note(engine_layers: int, engine_heads: int) -> None:
    """Say why the view options are not offered."""
    st.caption(
        "View options (hide special tokens, merge word pieces, set the first token aside, value-weighting) "
        f"apply to texts up to {api.eager_tokens(engine_layers, engine_heads):,} tokens on this model."
    )


LOG_HELP = (
    "A long text's weights are small: a query that sees a thousand tokens gives each about a thousandth, so on a "
    "linear scale nearly every cell of a map is the same dark colour. On a log scale each power of ten is a step of "
    "colour, and the bands (the previous token, the first token, a word's repeats) show. Hover for each cell's own "
    "weight; the PNG and SVG are drawn on the same scale."
)


def log_scale() -> bool:
    """Whether the long text's maps are coloured on a log scale (the default; in the URL as log=false otherwise)."""
    return state.bound(st.toggle, "Log colour scale", url="log", key="heads.log", default=True, help=LOG_HELP)


def heads(inputs: Inputs, lazy: LazyAttention, view: str) -> None:
    """The Heads page's three views of a long text, their maps on a log colour scale unless it is turned off."""
    log = log_scale()
    if view == "Layer":
        layer = widgets.pick("Layer", "heads", "layer", lazy.n_layers)
        state.show_head(layer)
        layer_view(inputs, lazy, layer, log)
    elif view == "Head":
        layer = widgets.pick("Layer", "heads", "layer", lazy.n_layers)
        head = widgets.pick("Head", "heads", "head", lazy.n_heads)
        state.show_head(layer, head)
        head_view(inputs, lazy, layer, head, log)
    else:
        maps, f, _ = lazy.pooled(THUMB_SIDE)
        note = f"exact weights, pooled {f}×{f} tokens a cell" if f > 1 else ""
        st.caption("Every layer (rows) and head (columns) as a small map. Hover to see which is which.")
        masked = interactive.layers_masked(lazy, f, f)
        fig = interactive.overview_maps(maps, style=inputs.style, note=note, masked=masked)
        with widgets.grid_box("overview-long"):  # as the short overview: a narrow window scrolls it, not cuts it
            st.plotly_chart(layout.log_colours(fig) if log else fig, key="heads.chart.overview")
        widgets.windows_note([lazy.layer_window(i) for i in range(lazy.n_layers)], lazy.n_tokens)
        export_maps(inputs, lazy, maps, f, None, "heads.export.overview", log)


def layer_view(inputs: Inputs, lazy: LazyAttention, layer: int, log: bool = True) -> None:
    """Every head of a layer, pooled; and the attention each token receives in each head (`log`: on a log colour
    scale)."""
    maps, f, _ = lazy.pooled(GRID_SIDE)
    tokens = lazy.target_tokens
    window, causal = lazy.layer_window(layer), lazy.kind == "causal"
    widgets.grid_caption(causal)
    fig = interactive.maps_grid(
        maps[layer], tokens, tokens, f, f, layer, style=inputs.style, note="exact weights", causal=causal, window=window
    )
    with widgets.grid_box("heads-long"):  # as the short grid (pages/heads.py): a narrow window scrolls it, not cuts it
        st.plotly_chart(layout.log_colours(fig) if log else fig, key="heads.chart.grid", theme=None)
    widgets.window_note(layer, window, lazy.n_tokens)
    export_maps(inputs, lazy, maps[layer][None], f, layer, "heads.export.layer", log)
    received = lazy.received()[layer]  # (H, N)
    fb = pool_factor(lazy.n_tokens, BAND_SIDE)
    band = block_mean(received[None], 1, fb)[0].numpy() if fb > 1 else received.numpy()
    pooled = f" (each column the mean of {fb} tokens)" if fb > 1 else ""
    title = f"Attention received, layer {layer + 1}"  # short: the figure is as wide as the window, its title one line
    band_fig = lazy_maps.received_band(band, fb, lazy.n_tokens, title, style=inputs.style)
    st.plotly_chart(layout.log_colours(band_fig, "received") if log else band_fig, key="heads.band")
    if causal and window and window < lazy.n_tokens:  # a sliding window: no token is seen by more than `window`
        how = (
            f"On layer {layer + 1} each token is seen by itself and at most the {window - 1} queries after it (its "
            f"sliding window of {window}), so an early token has no head start, and the first token draws only from "
            f"the first {window} queries."
        )
    elif causal:
        how = (
            "In a causal model the first token often draws most of it (an attention sink), and a token early in the "
            "text is seen by more queries than a late one."
        )
    else:
        how = "Every query sees every token."
    st.caption(
        f"The mean weight each token gets over all queries{pooled}. A bright column is a token many queries look "
        f"at. {how}"
    )


def _zoom_state(lazy: LazyAttention) -> tuple[int, int, int]:
    """The window's side, first query and first key (0-based), from the widgets (seeded from the URL)."""
    n = lazy.n_tokens
    a, b, c = st.columns(3)
    last = max(1, n - 63)  # by default, the window ends at the text's end
    width = state.bound(
        a.select_slider,
        "Window (tokens a side)",
        WIDTHS,
        url="zoom",
        key="heads.zw",
        default=64,
        valid=WIDTHS.__contains__,
    )
    in_text = lambda v: 1 <= v <= n  # noqa: E731
    q0 = state.bound(
        b.number_input, "Queries from position", 1, n, url="zq", key="heads.zq", default=last, valid=in_text
    )
    k0 = state.bound(c.number_input, "Keys from position", 1, n, url="zk", key="heads.zk", default=last, valid=in_text)
    return int(width), int(q0) - 1, int(k0) - 1


def head_view(inputs: Inputs, lazy: LazyAttention, layer: int, head: int, log: bool = True) -> None:
    """One head pooled (click a cell to zoom; `log`: on a log colour scale), the exact window, and one query's exact
    row."""
    n = lazy.n_tokens
    m, f = lazy.pooled_head(layer, head, HEAD_SIDE)
    pooled = f" — pooled {f}×{f} tokens a cell; click a cell to zoom" if f > 1 else ""
    title = f"Layer {layer + 1}, head {head + 1}{pooled}"
    window = lazy.layer_window(layer)
    fig = lazy_maps.zoomable_map(m, f, n, title, style=inputs.style, causal=lazy.kind == "causal", window=window)
    event = st.plotly_chart(
        layout.log_colours(fig, "mean weight" if f > 1 else "weight") if log else fig,
        key="heads.long.map",
        on_select="rerun",
        selection_mode="points",
        width="stretch" if inputs.style.phone else "content",  # the map and its bar side by side (map_width)
    )
    widgets.window_note(layer, window, n)
    cell = lazy_maps.clicked_cell(event, m.shape[0])
    width = st.session_state.get("heads.zw", 64)
    if cell is not None and st.session_state.get("heads.long.cell") != cell:
        st.session_state["heads.long.cell"] = cell  # a click moves the window once, then the inputs are free
        i, j = cell
        start = lambda block: min(max(0, block * f + f // 2 - width // 2), max(0, n - width))  # noqa: E731
        st.session_state["heads.zq"], st.session_state["heads.zk"] = start(i) + 1, start(j) + 1
    st.subheader("An exact window")
    width, q0, k0 = _zoom_state(lazy)
    q1, k1 = min(n, q0 + width), min(n, k0 + width)
    tile = lazy.tile([layer], [head], slice(q0, q1), slice(k0, k1))[0, 0]  # (r, c), exact
    outside = (1 - tile.sum(-1)).clamp_min(0).numpy()  # each query's weight on keys outside the window
    masked = None
    if lazy.kind == "causal":
        masked = np.arange(k0, k1)[None, :] > np.arange(q0, q1)[:, None]
        if window:  # and the keys the layer's window hides
            masked |= np.arange(q0, q1)[:, None] - np.arange(k0, k1)[None, :] >= window
    tokens = lazy.target_tokens
    wtitle = f"Layer {layer + 1}, head {head + 1}: queries {q0 + 1}–{q1}, keys {k0 + 1}–{k1} (exact)"
    with widgets.grid_box("heads-window"):  # 64 keys labelled for a laptop's column: a narrower window scrolls it
        wfig = lazy_maps.window_map(
            tile.numpy(), tokens[q0:q1], tokens[k0:k1], q0, k0, outside, wtitle, style=inputs.style, masked=masked
        )
        st.plotly_chart(layout.log_colours(wfig) if log else wfig, key="heads.chart.window")
    st.caption(
        "Not pooled and not renormalised: each cell is the model's own weight. A row here need not sum to 1; the "
        "column on the right is what each query gives to keys outside the window (white none of its weight, black "
        "all of it)"
        + (", and the map's flat grey cells are keys a causal model cannot see yet" if masked is not None else "")
        + (f" or keys further back than the layer's window of {window:,} tokens." if window else ".")
    )
    export_window(inputs, lazy, layer, head, tile.numpy(), q0, k0, "heads.export.window", masked, log)
    row_view(inputs, lazy, layer, head, q0)


def row_view(inputs: Inputs, lazy: LazyAttention, layer: int, head: int, q0: int) -> None:
    """One query's exact row over every key it sees, and the keys it weighs most."""
    n = lazy.n_tokens
    st.subheader("One token's exact row")
    row = state.bound(
        st.number_input,
        "Query position",
        1,
        n,
        url="row",
        key="heads.row",
        default=q0 + 1,
        valid=lambda v: 1 <= v <= n,
        help="Where this token looks, every key",
    )
    i = int(row) - 1
    tokens = lazy.target_tokens
    seen = i + 1 if lazy.kind == "causal" else n
    window = lazy.layer_window(layer)
    first = max(0, i - window + 1) if window else 0  # a sliding window's first key: those before are masked
    values = lazy.rows([i])[layer, head, 0, first:seen].numpy()
    # short enough for one line in a 900 px window's 440 px figure: the keys a window leaves are the caption's
    # (with ", the 512 keys its window sees" Gemma 3's title ran 39 px off that figure)
    title = f"Where query {i + 1} ({tokens[i][:20]}) looks: layer {layer + 1}, head {head + 1}"
    chart = lazy_maps.row_profile(values, tokens[first:seen], i, title, style=inputs.style, start=first)
    st.plotly_chart(chart, key="heads.chart.row")
    if first:
        st.caption(
            f"Query {i + 1} sees the {seen - first} keys {first + 1}–{seen}. Keys 1 to {first} are further back than "
            f"layer {layer + 1}'s window of {window} tokens: masked, so the chart and the CSV start at the first key "
            "the window reaches."
        )
    else:
        st.caption(f"Every key query {i + 1} sees: keys 1–{seen}.")
    top = first + np.argsort(-values)[:TOP_KEYS]
    top_keys = [{"key position": int(j) + 1, "token": tokens[j], "weight": float(values[j - first])} for j in top]
    widgets.fixed_table(top_keys, {"weight": 4}, key="heads.row.top")
    csv = "key_position,token,weight\n" + "".join(
        f"{j + 1},{json.dumps(tokens[j], ensure_ascii=False)},{values[j - first]:.8g}\n" for j in range(first, seen)
    )
    st.download_button(
        "Row as CSV",
        csv,
        f"attnviz_L{layer + 1}_H{head + 1}_row{i + 1}.csv",
        "text/csv",
        key="heads.export.row",
        on_click="ignore",
    )


def export_maps(
    inputs: Inputs, lazy: LazyAttention, maps: np.ndarray, f: int, layer: int | None, key: str, log: bool = False
) -> None:
    """PNG, SVG, CSV and JSON of pooled maps as shown: (L', H, P, P), one layer's or every layer's; the PNG and SVG on
    a log colour scale where the page draws one (`log`), the CSV and JSON the weights themselves."""
    from attnviz.figures import export

    what = "overview" if layer is None else f"L{layer + 1}"
    masked = interactive.layers_masked(lazy, f, f)
    masked = masked if masked is None or layer is None else masked[layer]
    pooled_note = f", exact weights pooled {f}x{f} tokens a cell" if f > 1 else ""
    title = f"{api.titled(lazy.model)}: {what}, {lazy.n_tokens} tokens{pooled_note}"
    labels = pooled_labels(lazy.target_tokens, f)

    def bundle() -> str:
        options = {"view": what, "pooled_rows": f, "pooled_columns": f, "long_text": True, "log_colours": log}
        meta = widgets.manifest(inputs, lazy, lazy.kind, 0 if layer is None else layer + 1, None, options)
        return export.bundle_json(maps, labels, labels, meta, masked=masked)

    widgets.download_row(
        f"attnviz_{what}",
        key,
        lambda fmt: export.figure_bytes(
            export.overview_figure(maps, title, cmap=inputs.style.cmap, masked=masked, log=log), fmt
        ),
        lambda: export.thumbs_csv(maps),
        bundle,
    )


def export_window(
    inputs: Inputs,
    lazy: LazyAttention,
    layer: int,
    head: int,
    w: np.ndarray,
    q0: int,
    k0: int,
    key: str,
    masked: np.ndarray | None = None,
    log: bool = False,
) -> None:
    """PNG, SVG, CSV and JSON of the exact window shown; its `masked` cells grey in the PNG and SVG, as drawn, and on
    the page's log colour scale where it draws one (`log`)."""
    from attnviz.figures import export

    r, c = w.shape
    rows, cols = lazy.target_tokens[q0 : q0 + r], lazy.source_tokens[k0 : k0 + c]
    title = f"{lazy.model} — layer {layer + 1}, head {head + 1}, queries {q0 + 1}–{q0 + r}, keys {k0 + 1}–{k0 + c}"
    panel = Panel(title, w, rows, cols, masked=masked)
    options = {
        "window_queries": [q0 + 1, q0 + r],
        "window_keys": [k0 + 1, k0 + c],
        "long_text": True,
        "log_colours": log,
    }

    def bundle() -> str:
        meta = widgets.manifest(inputs, lazy, lazy.kind, layer + 1, head + 1, options)
        pieces = (lazy.target.pieces[q0 : q0 + r], lazy.source.pieces[k0 : k0 + c])
        return export.bundle_json(w, rows, cols, meta, pieces, masked)

    widgets.download_row(
        f"attnviz_L{layer + 1}_H{head + 1}_q{q0 + 1}_k{k0 + 1}",
        key,
        lambda fmt: export.figure_bytes(export.panels_figure([panel], title, cmap=inputs.style.cmap, log=log), fmt),
        lambda: export.matrix_csv(w, rows, cols, q0, k0),
        bundle,
    )
