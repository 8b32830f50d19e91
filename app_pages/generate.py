"""The Generate page: a decoder writes after a prompt, greedily; see where each written token looked."""

from attnviz.ui.pages import generate

generate.render()
