"""The Positions page: sinusoidal, learned and rotary positions, and heads that attend by position."""

from attnviz.ui.pages import positions

positions.render()
