"""Widgets and drawing for the Inside page (kept out of the page so it stays a thin script)."""

from __future__ import annotations

import streamlit as st
import torch

from attnviz.analysis import cost
from attnviz.engines import registry
from attnviz.engines.scratch import AttentionSteps, causal_mask
from attnviz.figures import interactive
from attnviz.figures.interactive import Style
from attnviz.result import AttentionResult
from attnviz.tokens import display_labels
from attnviz.ui import cache, state
from attnviz.ui.controls import Inputs

D_MODELS = (32, 64, 128, 256, 384, 512, 768)


def scratch_engine_or_stop(inputs: Inputs):
    model = inputs.model
    engine = cache.load_engine_or_stop(model, "hf")
    if engine.architecture != "encoder" or engine.config.model_type != "bert":
        st.info(f"'{model}' is not a BERT encoder; the step-by-step view shows the bundled BERT instead.")
        model = registry.DEFAULT
    return cache.load_engine_or_stop(model, "scratch")


def step_controls(engine) -> tuple[int, int, bool]:
    cfg = engine.model.config
    state.restore("inside.layer", "layer", 1, lambda v: 1 <= v <= cfg.num_hidden_layers)
    state.restore("inside.head", "head", 1, lambda v: 1 <= v <= cfg.num_attention_heads)
    state.restore("inside.causal", "causal", False)
    a, b, c = st.columns([2, 2, 1])
    layer = a.slider("Layer", 1, cfg.num_hidden_layers, key="inside.layer")
    head = b.slider("Head", 1, cfg.num_attention_heads, key="inside.head")
    causal = c.toggle("Causal mask", key="inside.causal", help="Hide every later token from each query")
    for k, v in (("layer", layer), ("head", head), ("causal", causal)):
        state.remember(k, v)
    return layer - 1, head - 1, causal


def steps_or_stop(engine, text: str, layer: int, causal: bool):
    try:
        return engine.steps(text, layer, causal=causal)
    except ValueError as err:
        st.warning(str(err))
        st.stop()


def shape_trail(s: AttentionSteps, head: int) -> str:
    sh = lambda t: str(tuple(t.shape))  # noqa: E731
    return (
        f"X {sh(s.x_query)}  →  Q = X·W_Q {sh(s.q)}  →  split into heads {sh(s.q_heads)}\n"
        f"scores = Q·Kᵀ/√{s.q_heads.shape[-1]} {sh(s.scores)}  →  mask  →  softmax {sh(s.weights)}\n"
        f"weights·V {sh(s.head_outputs)}  →  concat {sh(s.concat)}  →  ·W_O {sh(s.output)}"
        f"      (showing head {head + 1})"
    )


def draw_steps(s: AttentionSteps, tokens, head: int, style: Style) -> None:
    labels = display_labels(tokens)
    dims = lambda n: [f"d{i + 1}" for i in range(n)]  # noqa: E731
    m = lambda t: t[0].float().cpu().numpy()  # noqa: E731
    dh = s.q_heads.shape[-1]
    row = st.columns(4)
    row[0].plotly_chart(interactive.matrix(m(s.x_query), "X: token vectors", rows=labels, style=style), key="in.x")
    for col, name, t in zip(row[1:], ("Q", "K", "V"), (s.q_heads, s.k_heads, s.v_heads), strict=True):
        fig = interactive.matrix(
            m(t)[head], f"{name} of head {head + 1} (T × {dh})", rows=labels, cols=dims(dh), style=style
        )
        col.plotly_chart(fig, key=f"in.{name}")
    row = st.columns(3)
    mask = s.mask if s.mask is not None else torch.ones_like(s.scores[0, 0], dtype=torch.bool)
    figs = (
        interactive.matrix(
            m(s.masked_scores)[head],
            f"scores QKᵀ/√{dh}" + (", masked (grey)" if s.mask is not None else ""),
            rows=labels,
            cols=labels,
            style=style,
        ),
        interactive.matrix(
            mask.float().cpu().numpy(), "mask (1 = may attend)", rows=labels, cols=labels, style=style, signed=False
        ),
        interactive.matrix(
            m(s.weights)[head], "softmax: attention weights", rows=labels, cols=labels, style=style, signed=False
        ),
    )
    for i, (col, fig) in enumerate(zip(row, figs, strict=True)):
        col.plotly_chart(fig, key=f"in.attn{i}")
    row = st.columns(3)
    figs = (
        interactive.matrix(
            m(s.head_outputs)[head], f"weights·V of head {head + 1}", rows=labels, cols=dims(dh), style=style
        ),
        interactive.matrix(m(s.concat), "concat of all heads", rows=labels, style=style),
        interactive.matrix(m(s.output), "output = concat·W_O", rows=labels, style=style),
    )
    for i, (col, fig) in enumerate(zip(row, figs, strict=True)):
        col.plotly_chart(fig, key=f"in.out{i}")


def size_controls() -> tuple[int, int]:
    state.restore("inside.d_model", "d_model", 384, lambda v: v in D_MODELS)
    a, b = st.columns(2)
    d_model = a.select_slider("d_model", D_MODELS, key="inside.d_model")
    options = [h for h in (1, 2, 4, 6, 8, 12, 16) if d_model % h == 0]
    state.restore("inside.heads", "heads", 12 if 12 in options else options[-1], lambda v: v in options)
    heads = b.select_slider("heads h", options, key="inside.heads")
    st.markdown(f"d_k = d_model / h = {d_model} / {heads} = **{d_model // heads}** numbers per head")
    state.remember("d_model", d_model)
    state.remember("heads", heads)
    return d_model, heads


@st.cache_resource(show_spinner=False, max_entries=16)
def _demo_engine(d_model: int, heads: int):
    """The seeded random engine of these sizes, built once, not on every widget change."""
    return cost.demo_attention(d_model, heads, device="cpu")


def draw_random_engine(d_model: int, heads: int, tokens, causal: bool, style: Style) -> None:
    """A seeded random engine of the chosen sizes over random token vectors: the shapes are what matter."""
    mha = _demo_engine(d_model, heads)
    torch.manual_seed(1)
    x = torch.randn(1, len(tokens), d_model)  # (1, T, D)
    mask = causal_mask(len(tokens)) if causal else None
    s = mha.steps(x, x, x, mask)
    kind = "causal" if causal else "self"
    result = AttentionResult(
        s.weights[0][None].contiguous(), tokens, tokens, kind, f"random d_model={d_model}, h={heads}"
    )
    st.caption(
        f"Q split into heads: {tuple(s.q.shape)} → {tuple(s.q_heads.shape)}. Random weights: patterns mean nothing."
    )
    st.plotly_chart(interactive.head_grid(result, 0, style=style, columns=min(heads, 6)), key="in.random")


@st.cache_data(show_spinner=False, max_entries=32)
def _measure(d_model: int, heads: int) -> list:
    return cost.measure(d_model, heads)


def draw_cost(d_model: int, heads: int, style: Style) -> None:
    with st.spinner("Timing the engine at N = 16 … 512…"):
        costs = _measure(d_model, heads)
    st.plotly_chart(interactive.cost_chart(costs, style=style), key="in.cost")
    st.caption(
        f"Measured live on this server ({'GPU' if costs[0].peak_mb is not None else 'CPU'}), median of 5 passes. "
        f"From N = {costs[0].n} to {costs[-1].n} ({costs[-1].n // costs[0].n}× the tokens) the weights grow "
        f"{costs[-1].weights_mb / costs[0].weights_mb:.0f}× and the time {costs[-1].ms / costs[0].ms:.0f}×."
    )
