"""attnviz: the frame. Page config, the shared sidebar, navigation over pages/."""

import streamlit as st

from attnviz.ui import controls, state

st.set_page_config(page_title="attnviz — see where attention goes", page_icon="🔍", layout="wide")
navigation = st.navigation(
    [
        st.Page("pages/heads.py", title="Heads", icon=":material/grid_view:", default=True),
        st.Page("pages/inside.py", title="Inside multi-head attention", icon=":material/calculate:"),
        st.Page("pages/compare.py", title="Self vs masked vs cross", icon=":material/compare:"),
    ]
)
controls.sidebar()  # after st.navigation: sidebar widgets drawn before it make Streamlit fall back to pages/ discovery
navigation.run()
controls.show_device()
state.publish()
