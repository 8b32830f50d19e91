"""What the model itself answers to a class poll: a pure function of a result and the poll's view."""

from __future__ import annotations

from torch import Tensor

from attnviz.analysis import head_stats
from attnviz.result import Attention, head_name
from attnviz.tokens import plain_labels

HEAD_TYPES = head_stats.LABELS


def head_names(n_layers: int, n_heads: int) -> list[str]:
    """Every head as people name it, 1-based: L1H1, L1H2, ..., the options of a "which head" poll."""
    return [head_name(layer, head) for layer in range(n_layers) for head in range(n_heads)]


def which_head(importance: Tensor) -> tuple[list[float], str]:
    """A "which head matters most here?" poll: each head's loss increase when it alone is knocked out (L, H), in the
    options' order, and the head with the largest (interventions.ablation.importance on the poll's text)."""
    values = importance.flatten().tolist()
    names = head_names(*importance.shape)
    return values, names[max(range(len(values)), key=values.__getitem__)]


Drawn = list[float] | str | float  # what a poll's figure draws as the model's answer: a row, a label, a share


def model_answer(result: Attention, form: str, view: dict) -> tuple[Drawn, str]:
    """(what the figure draws, the model's own answer as students would have written it).

    "token": the head's attention row from view["query"] (a list over the keys), and the key it weighs most;
    "head type": the head's label from head_stats (the Model overview's rule), twice;
    "number": the percentage of view["query"]'s attention on view["key"], twice (as a number and as text).
    Layers, heads and tokens in `view` are 0-based.
    """
    layer, head, query = int(view.get("layer", 0)), int(view.get("head", 0)), int(view.get("query", 0))
    if form == "head type":
        stats, uniform = head_stats.with_sink(result.stats(), result), head_stats.uniform_entropy(result)
        label = head_stats.labels(stats, uniform, result.kind)[layer][head]
        return label, label
    row = result.rows([query])[layer, head, 0]
    if form == "token":
        keys = plain_labels(result.source_tokens)
        return row.tolist(), keys[int(row.argmax())]
    if form == "number":
        share = 100.0 * float(row[int(view.get("key", 0))])
        return share, f"{share:.1f}"
    raise ValueError(f"unknown poll form {form!r}")
