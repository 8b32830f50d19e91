"""The Inside page: one layer of the typed text, step by step, on the from-scratch engine; sizes; cost."""

from attnviz.ui.pages import inside

inside.render()
