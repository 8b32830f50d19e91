"""Widgets and drawing for the Compare page: self, masked and cross attention side by side."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz.engines import registry, seq2seq
from attnviz.figures.interactive import Panel, Style, side_by_side
from attnviz.result import AttentionResult
from attnviz.ui import cache, state
from attnviz.ui.controls import Inputs
from attnviz.ui.views import download_row

SOURCES = {
    "dates": "Our encoder-decoder, trained from scratch (dates)",
    "bert": "BERT: bidirectional vs causal, and a cross-attention what-if",
    "hub": "A Hugging Face encoder-decoder (Marian, T5, BART)",
}
DATE_EXAMPLES = ["saturday 22 november 2026", "Nov 22, 2026", "22/11/2026", "the 3rd of march 1999", "1st of May 1990"]
EXPLAIN = {
    "self": "**Self-attention** (encoder): every source token looks at every source token, before and after it.",
    "causal": "**Masked self-attention** (decoder): each output position looks only at itself and what was "
    "already written. The grey triangle is the mask: the future is hidden, not just unlikely.",
    "cross": "**Cross-attention** (decoder → encoder): each output position looks at the source. Rows are "
    "what the decoder is writing, columns the input it reads from.",
}


def source_picker() -> str:
    state.restore("cmp.source", "source", "dates", lambda v: v in SOURCES)
    source = st.radio("Model", list(SOURCES), format_func=SOURCES.get, key="cmp.source", horizontal=True)
    state.remember("source", source)
    return source


def pickers(n_layers: int, n_heads: int) -> tuple[int, int]:
    state.restore("cmp.layer", "layer", n_layers, lambda v: 1 <= v <= n_layers)  # the last layer by default
    state.restore("cmp.head", "head", 1, lambda v: 1 <= v <= n_heads)
    a, b = st.columns(2)
    layer = a.slider("Layer", 1, n_layers, key="cmp.layer") if n_layers > 1 else 1
    head = b.slider("Head", 1, n_heads, key="cmp.head") if n_heads > 1 else 1
    state.remember("layer", layer)
    state.remember("head", head)
    return layer - 1, head - 1


def _upper(n: int) -> np.ndarray:
    return np.triu(np.ones((n, n), dtype=bool), k=1)


def export_panels(
    panels: list[Panel], text: str, result: AttentionResult, engine: str, layer: int, head: int, key: str
) -> None:
    """PNG, SVG and JSON of the panels shown; CSV of the cross-attention (the last panel)."""
    from attnviz.figures import export

    kinds = " | ".join(p.title.split("<br>")[0] for p in panels)
    manifest = export.Manifest(
        result.model, engine, result.device, text, kinds, layer + 1, head + 1, {"view": "side by side"}
    )
    title = f"{result.model}: layer {layer + 1}, head {head + 1}"
    last = panels[-1]
    fig = lambda fmt: export.figure_bytes(export.panels_figure(panels, title), fmt)  # noqa: E731
    csv = lambda: export.matrix_csv(last.matrix, last.rows, last.cols)  # noqa: E731
    download_row("attnviz_compare", key, fig, csv, lambda: export.panels_json(panels, manifest), "CSV (last panel)")


def three_panels(results: dict[str, AttentionResult], layer: int, head: int, style: Style):
    """Encoder self, decoder masked self, and cross attention of one layer and head, one colour scale."""
    enc_layer = min(layer, results["self"].n_layers - 1)
    enc_head = min(head, results["self"].n_heads - 1)
    s, c, x = results["self"], results["causal"], results["cross"]
    panels = [
        Panel(
            f"encoder self-attention<br>layer {enc_layer + 1}, head {enc_head + 1}",
            s.head(enc_layer, enc_head).numpy(),
            s.target_tokens,
            s.source_tokens,
        ),
        Panel(
            f"decoder masked self-attention<br>layer {layer + 1}, head {head + 1}",
            c.head(layer, head).numpy(),
            c.target_tokens,
            c.source_tokens,
            masked=_upper(len(c.target_tokens)),
        ),
        Panel(
            f"cross-attention (decoder → encoder)<br>layer {layer + 1}, head {head + 1}",
            x.head(layer, head).numpy(),
            x.target_tokens,
            x.source_tokens,
        ),
    ]
    return side_by_side(panels, style=style), panels


def explain() -> None:
    cols = st.columns(3)
    for col, kind in zip(cols, ("self", "causal", "cross"), strict=True):
        col.markdown(EXPLAIN[kind])


def draw_dates(style: Style) -> None:
    state.restore("cmp.date", "date", DATE_EXAMPLES[0])
    st.selectbox(
        "Examples",
        DATE_EXAMPLES,
        index=None,
        key="cmp.example",
        placeholder="Pick an example…",
        on_change=lambda: st.session_state.update({"cmp.date": st.session_state["cmp.example"]}),
    )
    text = st.text_input("A date, written any way", key="cmp.date")
    state.remember("date", text)
    results = cache.attention_or_stop("dates", "scratch", text)
    st.markdown(f"**{text}** → **{seq2seq.decoded(results['causal'])}**")  # the decoder's own output
    layer, head = pickers(results["cross"].n_layers, results["cross"].n_heads)
    fig, panels = three_panels(results, layer, head, style)
    st.plotly_chart(fig, key="cmp.dates.chart")
    export_panels(panels, text, results["cross"], "scratch", layer, head, "cmp.dates.export")
    explain()


def draw_bert(inputs: Inputs, style: Style) -> None:
    text = inputs.text
    bi = cache.attention_or_stop(registry.DEFAULT, "scratch", text)["self"]
    ca = cache.attention_or_stop(registry.DEFAULT, "scratch", text, causal=True)["causal"]
    layer, head = pickers(bi.n_layers, bi.n_heads)
    b, c = bi.head(layer, head).numpy(), ca.head(layer, head).numpy()
    panels = [
        Panel("bidirectional<br>(what BERT does)", b, bi.target_tokens, bi.source_tokens),
        Panel(
            "causal mask, same weights<br>(what-if)",
            c,
            ca.target_tokens,
            ca.source_tokens,
            masked=_upper(len(ca.target_tokens)),
        ),
        Panel("causal − bidirectional", c - b, bi.target_tokens, bi.source_tokens, signed=True),
    ]
    st.plotly_chart(side_by_side(panels, style=style), key="cmp.bert.chart")
    export_panels(panels, text, bi, "scratch", layer, head, "cmp.bert.export")
    st.markdown(
        "The same BERT weights, run twice: once as trained (every token sees every token), once with a causal "
        "mask in every layer, as a GPT-style decoder would have. Red cells lost attention to the mask, blue "
        "cells gained it: each row must still sum to 1. The last row sees everything either way, so in the "
        "first layer it is unchanged."
    )
    st.subheader("Cross-attention what-if")
    state.restore("cmp.b", "b", "The creature was exhausted after the long walk.")
    other = st.text_input("Sentence B (the queries); sentence A (keys and values) is the sidebar's text", key="cmp.b")
    state.remember("b", other)
    engine = cache.load_engine_or_stop(registry.DEFAULT, "scratch")
    try:
        cross = _cross_what_if(engine, text, other)
    except ValueError as err:
        st.warning(str(err))
        return
    m = cross.head(layer, head).numpy()
    fig = side_by_side(
        [
            Panel(
                f"sentence B → sentence A, BERT's own W_Q, W_K, W_V<br>layer {layer + 1}, head {head + 1} (what-if)",
                m,
                cross.target_tokens,
                cross.source_tokens,
            )
        ],
        style=style,
    )
    st.plotly_chart(fig, key="cmp.bert.cross")
    st.caption("BERT never attends across two sentences run apart: this computes what its heads would do if it did.")


@st.cache_data(show_spinner=False, max_entries=64)
def _cross_what_if(_engine, text_a: str, text_b: str) -> AttentionResult:
    return _engine.cross_what_if(text_a, text_b)  # the leading underscore keeps the engine out of the cache key


def draw_hub(style: Style) -> None:
    state.restore("cmp.hub", "hub", "Helsinki-NLP/opus-mt-en-de")
    state.restore("cmp.target", "target", "")
    a, b = st.columns(2)
    model = a.text_input("Encoder-decoder model (hub id)", key="cmp.hub").strip()
    target = b.text_input("Target text (empty: the model's own output)", key="cmp.target")
    state.remember("hub", model)
    state.remember("target", target)
    engine = cache.load_engine_or_stop(model, "hf")
    if engine.architecture != "encoder-decoder":
        st.warning(f"'{model}' is not an encoder-decoder ({engine.architecture}); it has no cross-attention.")
        st.stop()
    text = st.session_state["inputs"].text
    results = cache.attention_or_stop(model, "hf", text, target or None)
    layer, head = pickers(results["cross"].n_layers, results["cross"].n_heads)
    fig, panels = three_panels(results, layer, head, style)
    st.plotly_chart(fig, key="cmp.hub.chart")
    export_panels(panels, text, results["cross"], "hf", layer, head, "cmp.hub.export")
    explain()
