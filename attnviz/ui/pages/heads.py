"""The Heads page: every head of a layer, one head large, and the whole model at a glance."""

from __future__ import annotations

import streamlit as st

from attnviz import api, lazy
from attnviz.analysis import view_options
from attnviz.figures import interactive, panel_maps
from attnviz.figures.panel_maps import Panel
from attnviz.result import AttentionResult
from attnviz.ui import cache, controls, lazy_views, state, widgets

VIEWS = ("Layer", "Head", "Overview")
NORM_TITLE = "||αf(x)||"


def request_for(p: api.Prepared, opts: widgets.Options) -> api.Prepared:
    """The request to read: on the scratch backend when value-weighting (its results carry the value norms)."""
    if opts.value_weight and p.request.backend == "hf" and api.can_rebuild(p.engine):
        return p.with_backend("scratch")
    return p


def value_panels(raw: AttentionResult, layer: int, head: int, opts: widgets.Options) -> list[Panel]:
    """One head's raw attention beside its ||αf(x)|| (Kobayashi et al. 2020), each on its own scale.

    ||αf(x)|| is always the head's own α times ||f(x)||: setting the first token aside leaves its row and
    column out of the picture but rescales nothing (renormalising α first would inflate every row by
    1 / (1 − α_first) and hide what the norm shows, that the sink's small ||f|| already discounts it).
    """
    plain = widgets.prepared(raw, widgets.Options(opts.hide_special, opts.merge_words, opts.first_aside))
    shown = widgets.prepared(raw, widgets.Options(False, False))  # norms, as positions, on the head's own α
    norms = view_options.value_weighted_norms(shown)[layer, head].numpy()
    rows, cols = shown.target_tokens, shown.source_tokens
    alpha_title, norm_title = "attention weights α", f"{NORM_TITLE}: α times the size of what the key sends"
    if opts.first_aside:
        norms, rows, cols = norms[1:, 1:], rows[1:], cols[1:]
        alpha_title += " (first token set aside, rows renormalised)"
        norm_title += " (first token left out, nothing rescaled)"
    return [
        panel_maps.panel(plain, layer, head, f"{alpha_title}\nlayer {layer + 1}, head {head + 1}"),
        Panel(f"{norm_title}\n(Kobayashi et al. 2020)", norms, rows, cols, own_scale=NORM_TITLE),
    ]


def view_picker() -> str:
    """Layer, Head or Overview; kept in the URL."""
    view = state.bound(
        st.segmented_control,
        "View",
        VIEWS,
        url="view",
        key="heads.view",
        default=VIEWS[0],
        valid=lambda v: v in VIEWS,
        required=True,
    )
    return view or VIEWS[0]


def render() -> None:
    """Draw the page."""
    inputs = controls.current()
    st.header("Where does each token look?")
    model, text = inputs.model, inputs.text
    asked = cache.prepare_or_stop(model, inputs.backend, text)  # resolved, loaded and long or not: once per run
    eng = asked.engine
    if cache.long_text(asked):
        lazy_views.options_note(eng.n_layers, eng.n_heads)
        held = lazy.of(cache.results_or_stop(asked, long_ok=True))
        lazy_views.intro(held)
        widgets.truncation_notice(held)
        lazy_views.heads(inputs, held, view_picker())
        return
    try:
        axis = asked.axis  # the options this text's tokens have: the held results', else the request's one encoding
    except ValueError:
        axis = None  # bad text: the results' step below says why
    opts = widgets.options("heads", axis, inputs.style.projector)
    read = request_for(asked, opts)
    backend = read.request.backend
    results = cache.results_or_stop(read)
    kind = next(iter(results))
    if len(results) > 1:
        kind = state.bound(  # in the URL: a class's poll asks about the kind the teacher shows
            st.radio,
            "Attention",
            list(results),
            url="kind",
            key="heads.kind",
            default=kind,
            valid=lambda v: v in results,
            horizontal=True,
        )
    result = widgets.prepared(results.eager(kind), opts)
    widgets.truncation_notice(result)
    if backend != inputs.backend:
        st.caption("Value-weighting reads the same weights on attnviz's own engine, which keeps the value vectors.")

    def fetch() -> AttentionResult:  # names, not tensors: see widgets.Fetch
        return widgets.prepared(read.results().eager(kind), opts)

    view = view_picker()
    note = opts.note()
    view_key: tuple
    if view == "Layer":
        layer = widgets.pick("Layer", "heads", "layer", result.n_layers)
        state.show_head(layer)
        st.caption("Rows are queries (the token looking), columns are keys (the token looked at). One colour scale.")
        view_key = ("heads", model, backend, text, kind, repr(opts), inputs.style, layer)
        fig = cache.chart(
            (*view_key, "grid"),
            lambda: interactive.head_grid(result, layer, style=inputs.style, note=note),
            "heads.chart.grid",
            theme=None,
        )
        widgets.export_buttons(inputs, fetch, layer, None, opts, "heads.export.layer")
        widgets.snapshot_row(
            inputs, {"view": "layer", "layer": layer + 1, **opts.as_dict()}, lambda: [fig], "heads.snap"
        )
    elif view == "Head":
        layer = widgets.pick("Layer", "heads", "layer", result.n_layers)
        head = widgets.pick("Head", "heads", "head", result.n_heads)
        state.show_head(layer, head)
        if opts.value_weight:
            panels = value_panels(results.eager(kind), layer, head, opts)
            fig = panel_maps.side_by_side(panels, style=inputs.style)
            st.plotly_chart(fig, key="heads.chart.head", theme=None)
        else:
            view_key = ("heads", model, backend, text, kind, repr(opts), inputs.style, layer, head)
            fig = cache.chart(
                view_key,
                lambda: interactive.head_map(result, layer, head, style=inputs.style, note=note),
                "heads.chart.head",
                theme=None,  # our fonts: Streamlit's theme would keep tick labels at 12 px in projector mode
            )
        widgets.export_buttons(inputs, fetch, layer, head, opts, "heads.export.head")
        snap = {"view": "head", "layer": layer + 1, "head": head + 1, **opts.as_dict()}
        widgets.snapshot_row(inputs, snap, lambda: [fig], "heads.snap")
        if kind != "cross":
            with st.expander("This head's query/key space"):
                widgets.qk_space(asked.source, [text], layer, head, inputs.style, "heads.qk", "this text's tokens")
    else:
        st.caption("Every layer (rows) and head (columns) as a small map. Hover to see which is which.")
        view_key = ("heads", model, backend, text, kind, repr(opts), inputs.style, "overview")
        cache.chart(
            view_key, lambda: interactive.overview(result, style=inputs.style, note=note), "heads.chart.overview"
        )
        widgets.export_overview(inputs, fetch, opts, "heads.export.overview")
