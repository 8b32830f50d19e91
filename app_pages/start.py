"""The Start here page: a first lesson in seven steps, on "...because it was too tired / too wide"."""

from attnviz.ui.pages import start

start.render()
