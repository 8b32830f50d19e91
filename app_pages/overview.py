"""The Model overview page: head statistics and labels, rollout and flow, where a token draws from."""

from attnviz.ui.pages import overview

overview.render()
