"""attnviz: see, head by head, where a transformer's attention goes."""

__version__ = "0.1.0"
