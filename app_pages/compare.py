"""The Compare page: self, masked and cross attention side by side, on one colour scale."""

from attnviz.ui.pages import compare

compare.render()
