"""Model overview: head statistics and labels, rollout and flow, where a token draws from."""

import streamlit as st

from attnviz.ui import controls, overview

inputs = controls.current()
st.header("Model overview")
overview.draw(inputs, inputs.style)
