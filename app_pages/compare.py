"""Self vs masked vs cross attention, side by side, on one colour scale."""

import streamlit as st

from attnviz.ui import compare, controls

inputs = controls.current()
st.header("Self, masked and cross attention, side by side")
source = compare.source_picker()
if source == "dates":
    compare.draw_dates(inputs.style)
elif source == "bert":
    compare.draw_bert(inputs, inputs.style)
else:
    compare.draw_hub(inputs.style)
