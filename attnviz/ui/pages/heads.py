"""The Heads page: every head of a layer, one head large, and the whole model at a glance."""

from __future__ import annotations

import streamlit as st

from attnviz.analysis import view_options
from attnviz.figures import interactive
from attnviz.result import AttentionResult
from attnviz.ui import cache, controls, state, widgets

VIEWS = ("Layer", "Head", "Overview")


def render() -> None:
    """Draw the page."""
    inputs = controls.current()
    st.header("Where does each token look?")
    results = cache.attention_or_stop(inputs.model, inputs.backend, inputs.text)
    kind = next(iter(results))
    if len(results) > 1:
        kind = st.radio("Attention", list(results), horizontal=True, key="heads.kind")
    opts = widgets.options("heads")
    result = widgets.prepared(results[kind], opts)
    model, backend, text = inputs.model, inputs.backend, inputs.text

    def fetch() -> AttentionResult:  # names, not tensors: see widgets.Fetch
        fresh = cache.attention_with_notice(model, backend, text, None, None)[0][kind]
        return view_options.prepare(fresh, hide_special=opts.hide_special, merge_words=opts.merge_words)

    if result.truncated:
        st.info(f"The text was cut to fit the model: {result.truncated} tokens at the end were dropped.")

    state.restore("heads.view", "view", VIEWS[0], lambda v: v in VIEWS)
    view = st.segmented_control("View", VIEWS, key="heads.view", required=True) or VIEWS[0]
    state.remember("view", view)
    layer = widgets.pick("Layer", "heads", "layer", result.n_layers) if view != "Overview" else None

    if view == "Layer":
        st.caption("Rows are queries (the token looking), columns are keys (the token looked at). One colour scale.")
        st.plotly_chart(interactive.head_grid(result, layer, style=inputs.style), key="heads.chart.grid")
        widgets.export_buttons(inputs, fetch, layer, None, opts, "heads.export.layer")
    elif view == "Head":
        head = widgets.pick("Head", "heads", "head", result.n_heads)
        st.plotly_chart(interactive.head_map(result, layer, head, style=inputs.style), key="heads.chart.head")
        widgets.export_buttons(inputs, fetch, layer, head, opts, "heads.export.head")
    else:
        st.caption("Every layer (rows) and head (columns) as a small map. Hover to see which is which.")
        st.plotly_chart(interactive.overview(result, style=inputs.style), key="heads.chart.overview")
        widgets.export_overview(inputs, fetch, opts, "heads.export.overview")
