"""Widgets and drawing for the Model overview page."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from attnviz.analysis import head_stats, rollout
from attnviz.analysis.views import token_axis
from attnviz.figures import interactive
from attnviz.figures.interactive import Panel, Style
from attnviz.result import AttentionResult
from attnviz.ui import cache, state
from attnviz.ui.controls import Inputs

STAT_NAMES = {
    "entropy": "entropy (nats)",
    "distance": "mean attention distance (tokens)",
    "cls": "share on [CLS]",
    "sep": "share on [SEP]",
    "punct": "share on punctuation",
    "prev": "share on the previous token",
    "next": "share on the next token",
    "self": "share on itself",
    "confidence": "confidence (mean of each row's largest weight)",
}


def self_result_or_stop(inputs: Inputs) -> AttentionResult:
    results = cache.attention_or_stop(inputs.model, inputs.engine, inputs.text)
    result = results.get("self") or results.get("causal")
    if result is None:
        st.warning("This page needs self-attention.")
        st.stop()
    return result


def specials(inputs: Inputs, tokens) -> list[bool]:
    return list(token_axis(tokens, cache.engine(inputs.model, inputs.engine).special_tokens).special)


@st.cache_data(show_spinner=False, max_entries=16)
def _corpus_stats(model: str, engine: str) -> dict:
    """Statistics averaged over the built-in corpus, with a progress bar the first time."""
    bar = st.progress(0.0, text="Averaging over the built-in corpus…")
    per_text = []
    for i, text in enumerate(head_stats.CORPUS):
        r = next(iter(cache.attention(model, engine, text).values()))
        flags = token_axis(r.target_tokens, cache.engine(model, engine).special_tokens).special
        per_text.append(head_stats.head_stats(r, flags))
        bar.progress((i + 1) / len(head_stats.CORPUS), text=f"Averaging over the built-in corpus… {i + 1}/8")
    bar.empty()
    return head_stats.average(per_text)


def stats_section(inputs: Inputs, result: AttentionResult) -> None:
    state.restore("ov.stat", "stat", "entropy", lambda v: v in STAT_NAMES)
    state.restore("ov.corpus", "corpus", False)
    a, b = st.columns([3, 2])
    stat = a.selectbox("Colour by", list(STAT_NAMES), format_func=STAT_NAMES.get, key="ov.stat")
    corpus = b.toggle("Average over the built-in corpus (8 sentences)", key="ov.corpus")
    state.remember("stat", stat)
    state.remember("corpus", corpus)
    if corpus:
        stats = _corpus_stats(inputs.model, inputs.engine)
        n_tokens = 16  # the corpus sentences' typical length, for the "broad" threshold
    else:
        stats = head_stats.head_stats(result, specials(inputs, result.target_tokens))
        n_tokens = len(result.target_tokens)
    labels = head_stats.labels(stats, n_tokens)
    st.caption(
        f"Labels: a head is previous-token, next-token, [SEP], [CLS] or self when more than "
        f"{head_stats.SHARE_THRESHOLD:.0%} of its attention goes there; broad when its entropy is at least "
        f"{head_stats.BROAD_THRESHOLD:.0%} of ln n (uniform attention); other otherwise."
    )
    event = st.plotly_chart(
        interactive.stat_grid(stats[stat].numpy(), labels, stat, style=inputs.style),
        key="ov.grid",
        on_select="rerun",
        selection_mode="points",
    )
    points = event.get("selection", {}).get("points", []) if event else []
    if points:
        layer, head = int(str(points[0]["y"])[1:]), int(str(points[0]["x"])[1:])
        st.switch_page(
            "app_pages/heads.py", query_params={**_shared(inputs), "view": "Head", "layer": layer, "head": head}
        )
    _open_head(inputs, result)
    table = pd.DataFrame(
        [
            {
                "layer": layer + 1,
                "head": h + 1,
                "label": labels[layer][h],
                **{k: round(stats[k][layer, h].item(), 4) for k in head_stats.STATS},
            }
            for layer in range(result.n_layers)
            for h in range(result.n_heads)
        ]
    )
    st.dataframe(table, hide_index=True, key="ov.table")


def _shared(inputs: Inputs) -> dict:
    return {k: v for k, v in st.query_params.items() if k in ("model", "text", "palette", "projector")}


def _open_head(inputs: Inputs, result: AttentionResult) -> None:
    a, b, c = st.columns([1, 1, 2])
    layer = a.number_input("Layer", 1, result.n_layers, 1, key="ov.open_layer")
    head = b.number_input("Head", 1, result.n_heads, 1, key="ov.open_head")
    if c.button("Open this head on the Heads page", key="ov.open"):
        st.switch_page(
            "app_pages/heads.py", query_params={**_shared(inputs), "view": "Head", "layer": layer, "head": head}
        )


@st.cache_data(show_spinner=False, max_entries=32)
def _flow(model: str, engine: str, text: str, upto: int):
    r = next(iter(cache.attention(model, engine, text).values()))
    return rollout.flow(r, upto)


def rollout_section(inputs: Inputs, result: AttentionResult) -> None:
    state.restore("ov.layer", "layer", result.n_layers, lambda v: 1 <= v <= result.n_layers)
    layer = st.slider("Layer", 1, result.n_layers, key="ov.layer") - 1
    state.remember("layer", layer + 1)
    raw = rollout.residual_attention(result)[layer]  # (T, T)
    rolled = rollout.rollout(result)[layer]
    toks = result.target_tokens
    panels = [
        Panel(f"raw attention, layer {layer + 1}<br>(heads averaged, + residual)", raw.numpy(), toks, toks),
        Panel(f"rollout up to layer {layer + 1}", rolled.numpy(), toks, toks),
    ]
    state.restore("ov.flow", "flow", False)
    want_flow = st.toggle("Also compute attention flow (a few seconds of CPU per text)", key="ov.flow")
    state.remember("flow", want_flow)
    if want_flow:  # on demand: a classroom of new sentences would otherwise queue behind the max-flow solves
        try:
            with st.spinner("Solving the attention flow…"):
                flowed = _flow(inputs.model, inputs.engine, inputs.text, layer)
            panels.append(Panel(f"flow up to layer {layer + 1}", flowed.numpy(), toks, toks))
        except ValueError as err:
            st.info(str(err))
    st.plotly_chart(interactive.side_by_side(panels, style=inputs.style), key="ov.rollout")
    state.restore("ov.token", "token", 1, lambda v: 1 <= v <= len(toks))
    pick = st.selectbox(
        "Where does this token draw from?",
        range(1, len(toks) + 1),
        key="ov.token",
        format_func=lambda i: f"{toks[i - 1]} (position {i})",
    )
    state.remember("token", pick)
    fig = interactive.bars(
        rolled[pick - 1].numpy(),
        toks,
        f"'{toks[pick - 1]}' after layer {layer + 1}: rollout share per input token",
        style=inputs.style,
    )
    st.plotly_chart(fig, key="ov.bars")


def draw(inputs: Inputs, style: Style) -> None:
    result = self_result_or_stop(inputs)
    st.subheader("Every head at a glance")
    stats_section(inputs, result)
    st.subheader("Raw attention, rollout and flow")
    st.caption(
        "Rollout and flow follow attention through the layers, counting the residual connection "
        "(Abnar & Zuidema 2020). Flow is slower: it is computed for up to 32 tokens."
    )
    rollout_section(inputs, result)
