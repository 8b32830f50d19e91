"""The Compare page: self, masked and cross attention side by side, on one colour scale."""

from __future__ import annotations

import streamlit as st

from attnviz import api, escape
from attnviz.figures import panel_maps
from attnviz.figures.panel_maps import Panel
from attnviz.result import Attention, Results
from attnviz.ui import cache, controls, state, widgets
from attnviz.ui.controls import Inputs
from attnviz.ui.halt import halt

SOURCES = {
    "dates": "Our encoder-decoder, trained from scratch (dates)",
    "llm": "Two real models: BERT's self-attention and a decoder's masked self-attention",
    "bert": "BERT: bidirectional vs causal, and a cross-attention what-if",
    "hub": "A Hugging Face encoder-decoder (Marian, T5, BART)",
}
LLM = (
    "Both maps are real attention of trained models on the same sentence: BERT was trained to see every token "
    "(self-attention), {decoder} to see only what came before (masked self-attention: the grey triangle is its "
    "mask). Each model cuts the text into its own tokens. Cross-attention needs an encoder-decoder: pick the "
    "dates model above. The decoder is the sidebar's when it is one of the bundled decoders (SmolLM2, Gemma 3 "
    "270M), else SmolLM2."
)
HUB_EXAMPLE = "Helsinki-NLP/opus-mt-en-de"
DATE_EXAMPLES = ["saturday 22 november 2026", "Nov 22, 2026", "22/11/2026", "the 3rd of march 1999", "1st of May 1990"]
EXPLAIN = {
    "self": "**Self-attention** (encoder): every source token looks at every source token, before and after it.",
    "causal": "**Masked self-attention** (decoder): each output position looks only at itself and what was "
    "already written. The grey triangle is the mask: the future is hidden, not just unlikely.",
    "cross": "**Cross-attention** (decoder → encoder): each output position looks at the source. Rows are "
    "what the decoder is writing, columns the input it reads from.",
}
BERT_WHAT_IF = (
    "The same BERT weights, run twice: once as trained (every token sees every token), once with a causal "
    "mask in every layer, as a GPT-style decoder would have. Red cells lost attention to the mask, blue "
    "cells gained it: each row must still sum to 1. The last row sees everything either way, so in the "
    "first layer it is unchanged."
)
NEVER_TRAINED = (
    "**A what-if, not a model.** BERT was never trained with a causal mask: in layer 1 the inputs are the ones "
    "it always saw, but from layer 2 on every layer reads hidden states the mask changed, which it never saw in "
    "training."
)
CROSS_NEVER_TRAINED = (
    "**A what-if, not something BERT does.** BERT was pre-trained on sentence pairs, so its layers have matched one "
    "sentence's queries with the other's keys, but always in one pass over both, where each sentence's hidden "
    "states had already read the other. What is new here: each sentence is run through BERT alone, and B's queries "
    "then read A's keys and values, as a decoder's cross-attention reads an encoder."
)


def source_picker(inputs: Inputs) -> str:
    """Which model to compare with, in the URL. By default a real model's own attention of each kind: our
    encoder-decoder's self, masked and cross attention (a bundled decoder's masked attention beside BERT's when the
    sidebar shows one). It opened on BERT's what-ifs, whose first words were "A what-if, not a model"; they are one
    click away."""
    default = "llm" if inputs.model in api.BUNDLED_DECODERS else "dates"
    return state.bound(
        st.radio,
        "Model",
        list(SOURCES),
        url="source",
        key="cmp.source",
        default=default,
        valid=lambda v: v in SOURCES,
        format_func=SOURCES.get,
        horizontal=True,
    )


def pickers(n_layers: int, n_heads: int, prefix: str = "", label: str = "") -> tuple[int, int]:
    """Layer (the last by default) and head, 0-based; their values live in the URL (keys prefixed by `prefix`)."""
    a, b = st.columns(2)
    layer = widgets.pick(f"{label}Layer", "cmp", f"{prefix}layer", n_layers, default=n_layers, where=a)
    return layer, widgets.pick(f"{label}Head", "cmp", f"{prefix}head", n_heads, where=b)


def export_panels(
    inputs: Inputs, panels: list[Panel], text: str, result: Attention, layer: int, head: int, key: str
) -> None:
    """PNG, SVG and JSON of the panels shown; CSV of the last panel (the cross-attention)."""
    from attnviz.figures import export

    kinds = " | ".join(p.title.split("\n")[0] for p in panels)
    # Only the panels (one head each) and strings are kept for the buttons, never the whole result.
    meta = export.Manifest(
        result.model, inputs.backend, result.device, text, kinds, layer + 1, head + 1, {"view": "side by side"}
    )
    title = f"{api.titled(result.model)}: layer {layer + 1}, head {head + 1}"
    last = panels[-1]
    fig = lambda fmt: export.figure_bytes(export.panels_figure(panels, title, cmap=inputs.style.cmap), fmt)  # noqa: E731
    csv = lambda: export.matrix_csv(last.matrix, last.rows, last.cols)  # noqa: E731
    widgets.download_row("attnviz_compare", key, fig, csv, lambda: export.panels_json(panels, meta), "CSV (last panel)")


def three_panels(results: Results, layer: int, head: int) -> list[Panel]:
    """Encoder self, decoder masked self, and cross attention of one layer and head."""
    s, c, x = results.eager("self"), results.eager("causal"), results.eager("cross")
    enc_layer, enc_head = min(layer, s.n_layers - 1), min(head, s.n_heads - 1)
    return [
        panel_maps.panel(s, enc_layer, enc_head, f"encoder self-attention\nlayer {enc_layer + 1}, head {enc_head + 1}"),
        panel_maps.panel(c, layer, head, f"decoder masked self-attention\nlayer {layer + 1}, head {head + 1}"),
        panel_maps.panel(x, layer, head, f"cross-attention (decoder → encoder)\nlayer {layer + 1}, head {head + 1}"),
    ]


def explain() -> None:
    """One paragraph per kind of attention, under its panel."""
    for col, kind in zip(st.columns(3), ("self", "causal", "cross"), strict=True):
        col.markdown(EXPLAIN[kind])


def draw_three(inputs: Inputs, results: Results, text: str, key: str) -> None:
    """Pickers, the three panels and their export."""
    layer, head = pickers(results["cross"].n_layers, results["cross"].n_heads)
    panels = three_panels(results, layer, head)
    with widgets.grid_box(key):
        st.plotly_chart(panel_maps.side_by_side(panels, style=inputs.style), key=f"{key}.chart")
        with widgets.under(key):
            explain()
    export_panels(inputs, panels, text, results["cross"], layer, head, f"{key}.export")


def draw_dates(inputs: Inputs) -> None:
    """Our date model: a date typed (or picked) and the three kinds of attention."""
    st.selectbox(
        "Examples",
        DATE_EXAMPLES,
        index=None,
        key="cmp.example",
        placeholder="Pick an example…",
        on_change=lambda: st.session_state.update({"cmp.date": st.session_state["cmp.example"]}),
    )
    text = state.bound(st.text_input, "A date, written any way", url="date", key="cmp.date", default=DATE_EXAMPLES[0])
    results = cache.attention_or_stop("dates", "scratch", text)
    st.markdown(f"**{escape.md(text)}** → **{escape.md(api.decoded(results['causal']))}**")  # its own output
    draw_three(inputs, results, text, "cmp.dates")


def draw_llm(inputs: Inputs) -> None:
    """BERT's real self-attention beside a decoder's real masked self-attention (the sidebar's, if it is a bundled
    decoder; else SmolLM2), on the same sentence."""
    decoder = inputs.model if inputs.model in api.BUNDLED_DECODERS else "smollm2"
    name = api.shown_name(decoder)
    bert = cache.attention_or_stop(api.DEFAULT_MODEL, "hf", inputs.text).eager("self")
    llm = cache.attention_or_stop(decoder, "hf", inputs.text).eager("causal")
    a, b = st.columns(2)
    with a:
        bl, bh = pickers(bert.n_layers, bert.n_heads, "bert_", "BERT: ")
    with b:
        ll, lh = pickers(llm.n_layers, llm.n_heads, "", f"{name}: ")
    panels = [
        panel_maps.panel(bert, bl, bh, f"BERT self-attention\nlayer {bl + 1}, head {bh + 1}"),
        panel_maps.panel(llm, ll, lh, f"{name} masked self-attention\nlayer {ll + 1}, head {lh + 1}"),
    ]
    with widgets.grid_box("cmp-llm"):  # each panel's row labels stay off the panel to its left
        st.plotly_chart(panel_maps.side_by_side(panels, style=inputs.style), key="cmp.llm.chart")
    export_panels(inputs, panels, inputs.text, llm, ll, lh, "cmp.llm.export")
    st.markdown(LLM.format(decoder=escape.md(name)))


def draw_bert(inputs: Inputs) -> None:
    """BERT bidirectional vs causal on the same weights, and a cross-attention what-if between two sentences."""
    text, style = inputs.text, inputs.style
    bi = cache.attention_or_stop(api.DEFAULT_MODEL, "scratch", text).eager("self")
    ca = cache.attention_or_stop(api.DEFAULT_MODEL, "scratch", text, what_if="causal").eager("causal")
    layer, head = pickers(bi.n_layers, bi.n_heads)
    both = panel_maps.panel(ca, layer, head, "causal mask, same weights\n(what-if)")
    b = bi.head(layer, head).numpy()
    panels = [
        panel_maps.panel(bi, layer, head, "bidirectional\n(what BERT does)"),
        both,
        Panel("causal − bidirectional", both.matrix - b, bi.target_tokens, bi.source_tokens, signed=True),
    ]
    st.warning(NEVER_TRAINED, icon=":material/science:")
    with widgets.grid_box("cmp-bert"):
        st.plotly_chart(panel_maps.side_by_side(panels, style=style), key="cmp.bert.chart")
    export_panels(inputs, panels, text, bi, layer, head, "cmp.bert.export")
    st.markdown(BERT_WHAT_IF)
    st.subheader("Cross-attention what-if")
    other = state.bound(
        st.text_input,
        "Sentence B (the queries); sentence A (keys and values) is the sidebar's text",
        url="b",
        key="cmp.b",
        default="The creature was exhausted after the long walk.",
    )
    cache.load_engine_or_stop(api.DEFAULT_MODEL, "scratch")
    try:
        cross = cache.cross_what_if(api.DEFAULT_MODEL, text, other)
    except ValueError as err:
        st.warning(escape.md(err))
        return
    title = f"sentence B → sentence A, BERT's own W_Q, W_K, W_V\nlayer {layer + 1}, head {head + 1} (what-if)"
    fig = panel_maps.side_by_side([panel_maps.panel(cross, layer, head, title)], style=style)
    st.warning(CROSS_NEVER_TRAINED, icon=":material/science:")
    st.plotly_chart(fig, key="cmp.bert.cross")


def _hub_from_url() -> None:
    """Seed the hub model from ?hub=... once per session, if this server offers it; else say so."""
    url_hub = st.query_params.get("hub")
    if "cmp.hub" in st.session_state:
        return
    if not url_hub:
        st.session_state["cmp.hub"] = HUB_EXAMPLE
        return
    try:
        st.session_state["cmp.hub"] = cache.policy().resolve(url_hub).name
    except api.ModelLoadError:
        st.info(f"The link asked for the model {escape.quoted(url_hub, 100)}, which this server does not offer.")
        st.session_state["cmp.hub"] = HUB_EXAMPLE


def draw_hub(inputs: Inputs) -> None:
    """A Hugging Face encoder-decoder this server offers."""
    _hub_from_url()
    state.restore("cmp.target", "target", "")
    a, b = st.columns(2)
    with a:
        model = controls.model_picker("Encoder-decoder model", "cmp.hub", "e.g. Helsinki-NLP/opus-mt-en-de, t5-small")
    target = b.text_input("Target text (empty: the model's own output)", key="cmp.target")
    if model is None:
        halt()
    state.remember("hub", model)
    state.remember("target", target)
    eng = cache.load_engine_or_stop(model, "hf")
    if eng.architecture != "encoder-decoder":
        st.warning(f"{cache.named(model)} is not an encoder-decoder ({eng.architecture}); it has no cross-attention.")
        halt()
    results = cache.attention_or_stop(model, "hf", inputs.text, target or None)
    draw_three(inputs, results, inputs.text, "cmp.hub")


def render() -> None:
    """Draw the page."""
    inputs = controls.current()
    st.header("Self, masked and cross attention, side by side")
    source = source_picker(inputs)
    if source == "dates":
        draw_dates(inputs)
    elif source == "llm":
        draw_llm(inputs)
    elif source == "bert":
        draw_bert(inputs)
    else:
        draw_hub(inputs)
