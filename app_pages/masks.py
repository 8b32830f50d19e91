"""The Masks page: masks on a model's own Q and K, and dense + mask against kernels that skip blocks."""

from attnviz.ui.pages import masks

masks.render()
