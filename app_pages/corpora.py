"""The Corpus page: what each head does across many texts (a corpus run's tables)."""

from attnviz.ui.pages import corpora

corpora.render()
