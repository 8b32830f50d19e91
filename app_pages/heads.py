"""The Heads page: every head of a layer, one head large, and the whole model at a glance."""

from attnviz.ui.pages import heads

heads.render()
