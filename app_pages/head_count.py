"""The One head vs many page: 1/2/4/8-head models on the same task, and the cost of heads."""

from attnviz.ui.pages import head_count

head_count.render()
