"""Heads: every head of a layer, one head large, and the whole model at a glance."""

import streamlit as st

from attnviz.figures import interactive
from attnviz.ui import cache, controls, state, views

inputs = controls.current()
st.header("Where does each token look?")
results = cache.attention_or_stop(inputs.model, inputs.engine, inputs.text)
kind = (
    st.radio("Attention", list(results), horizontal=True, key="heads.kind") if len(results) > 1 else next(iter(results))
)
opts = views.options("heads")
result = views.prepared(inputs, results[kind], opts)
if result.truncated:
    st.info(f"The text was cut to fit the model: {result.truncated} tokens at the end were dropped.")

state.restore("heads.view", "view", "Layer", lambda v: v in ("Layer", "Head", "Overview"))
view = st.segmented_control("View", ["Layer", "Head", "Overview"], key="heads.view", required=True) or "Layer"
state.remember("view", view)
layer = views.pick("Layer", "heads", "layer", result.n_layers) if view != "Overview" else None

if view == "Layer":
    st.caption("Rows are queries (the token looking), columns are keys (the token looked at). One colour scale.")
    st.plotly_chart(interactive.head_grid(result, layer, style=inputs.style), key="heads.chart.grid")
    views.export_buttons(inputs, result, layer, None, opts, "heads.export.layer")
elif view == "Head":
    head = views.pick("Head", "heads", "head", result.n_heads)
    st.plotly_chart(interactive.head_map(result, layer, head, style=inputs.style), key="heads.chart.head")
    views.export_buttons(inputs, result, layer, head, opts, "heads.export.head")
else:
    st.caption("Every layer (rows) and head (columns) as a small map. Hover to see which is which.")
    st.plotly_chart(interactive.overview(result, style=inputs.style), key="heads.chart.overview")
    views.export_overview(inputs, result, opts, "heads.export.overview")
