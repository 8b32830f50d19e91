"""Inside multi-head attention: one layer of the typed text, step by step, on the from-scratch engine."""

import streamlit as st

from attnviz.ui import controls, inside

inputs = controls.current()
st.header("Inside multi-head attention")
st.markdown(
    "BERT's own weights, run on attnviz's from-scratch engine: **project** X into Q, K, V; **split** them "
    "into heads; **score** every query against every key (QKᵀ/√d_k); **mask**; **softmax** each row; "
    "**mix** the values; **concatenate** the heads; **project** with W_O."
)
engine = inside.scratch_engine_or_stop(inputs)
layer, head, causal = inside.step_controls(engine)
enc, steps = inside.steps_or_stop(engine, inputs.text, layer, causal)
st.code(inside.shape_trail(steps, head), language=None)
inside.draw_steps(steps, enc.tokens, head, inputs.style)

st.subheader("Change the sizes: d_k = d_model / h")
d_model, heads = inside.size_controls()
inside.draw_random_engine(d_model, heads, enc.tokens, causal, inputs.style)
st.subheader("What it costs: time and memory grow with N²")
inside.draw_cost(d_model, heads, inputs.style)
