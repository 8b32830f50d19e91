"""Figures for a class: the class's answers beside the model's own."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import cast

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attnviz.escape import html_text
from attnviz.figures.style import Style


def poll_figure(
    form: str,
    options: Sequence[str],
    answers: Counter,
    model: Sequence[float] | str | float,
    *,
    style: Style = Style(),
) -> go.Figure:
    """The class's answers as a histogram beside the model's actual answer.

    form "token": options are the tokens, `model` the head's attention from the question's word to each (a row);
    "which head": options are the heads, `model` each one's loss increase when it alone is knocked out;
    "head type": options are the labels, `model` the head's label; "number": `model` the actual percentage.
    """
    if form == "number":
        values = [float(a) for a, n in answers.items() for _ in range(n)]
        fig = go.Figure(go.Histogram(x=values, nbinsx=20, name="the class", marker_color="#1f77b4"))
        actual = float(cast(float, model))  # a number poll's model is the actual percentage
        fig.add_vline(
            x=actual,
            line_color="#d62728",
            line_width=3,
            annotation_text=f"the model: {actual:.1f}%",
            annotation_position="top",
        )
        fig.update_xaxes(title="answer (%)")
        fig.update_yaxes(title="students")
        return _layout(fig, "The class's answers, and the model's", style)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("The class", "The model"), horizontal_spacing=0.12)
    labels = [html_text(o) for o in options]
    fig.add_trace(
        go.Bar(
            x=labels,
            y=[answers.get(o, 0) for o in options],
            name="students",
            marker_color="#1f77b4",
            hovertemplate="%{x}<br>%{y} student(s)<extra></extra>",
        ),
        1,
        1,
    )
    if form in ("token", "which head"):
        row = [float(v) for v in cast(Sequence[float], model)]  # a value per option: weights, or loss increases
        what = "attention weight" if form == "token" else "loss increase (nats)"
        fig.add_trace(
            go.Bar(x=labels, y=row, name=what, marker_color="#d62728", hovertemplate="%{x}<br>%{y:.3f}<extra></extra>"),
            1,
            2,
        )
        fig.update_yaxes(title_text=what, row=1, col=2)
    else:
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[1.0 if o == model else 0.0 for o in options],
                name="the model's label",
                marker_color="#d62728",
                hovertemplate="%{x}<extra></extra>",
            ),
            1,
            2,
        )
        fig.update_yaxes(showticklabels=False, row=1, col=2)
    fig.update_yaxes(title_text="students", row=1, col=1)
    fig.update_xaxes(tickangle=-45)
    return _layout(fig, "", style)


def _layout(fig: go.Figure, title: str, style: Style) -> go.Figure:
    return fig.update_layout(
        title={"text": html_text(title)} if title else None,
        height=380,
        showlegend=False,
        font={"size": style.font_size},
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
