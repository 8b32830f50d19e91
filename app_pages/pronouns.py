"""Pronoun resolution: does any head link "it" to the right noun? Per head, on minimal pairs, on Winograd."""

import streamlit as st

from attnviz.ui import controls, pronouns

inputs = controls.current()
st.header("Pronoun resolution")
lesson, benchmark = st.tabs(["Lesson", "Benchmark"])
with lesson:
    case, index = pronouns.pick_case()
    if case is not None:
        result = pronouns.score_or_stop(inputs, case)
        if pronouns.predict_then_reveal(case, result, "pr.predict"):
            pronouns.draw_case(inputs, case, result)
            if index is not None:
                st.subheader("The minimal pair: one word flips the answer")
                pronouns.draw_pair(inputs, index)
with benchmark:
    pronouns.draw_benchmark(inputs)
st.markdown(pronouns.CAVEAT)
