"""The Class page: start or join a class, polls, the class's answers beside the model's."""

from attnviz.ui.pages import classroom

classroom.render()
