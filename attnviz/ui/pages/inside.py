"""The Inside page: one layer of the typed text, step by step (BERT and Llama on the from-scratch engine, the other
decoder families on their own layers with attnviz's attention function: engines/decoder_steps.py); sizes; cost."""

from __future__ import annotations

import math
from functools import partial

import streamlit as st

from attnviz import api, escape
from attnviz.api import cost
from attnviz.figures import interactive
from attnviz.figures.style import Style
from attnviz.tokens import TokenAxis, display_labels
from attnviz.ui import cache, controls, state, widgets

D_MODELS = (32, 64, 128, 256, 384, 512, 768)
HEAD_COUNTS = (1, 2, 4, 6, 8, 12, 16)
BERT_NEVER_CAUSAL = (
    "BERT was never trained with a causal mask: its first layer sees the words it always saw, but from layer 2 "
    "on every layer reads hidden states it never saw in training. This shows the arithmetic of the mask, not "
    "what a causal model would learn."
)
INTRO = (
    "{model}'s own weights, run on attnviz's from-scratch engine: **project** X into Q, K, V; **split** them "
    "into heads; **score** every query against every key (QKᵀ/√d_k); **mask**; **softmax** each row; "
    "**mix** the values; **concatenate** the heads; **project** with W_O."
)
LAYERS = (
    "{model}'s own layers as transformers builds them, with attnviz's own attention function in each: the layer "
    "**projects** X into Q, K, V and **splits** them into heads; attnviz's function **scores** every query against "
    "every key, **masks**, takes the **softmax** of each row and **mixes** the values; the layer **concatenates** the "
    "heads and **projects** with W_O. The steps before the scores are computed again here from the layer's own "
    "matrices and checked against what the attention function received."
)
COUNTS = ("nothing", "one thing", "two things", "three things", "four things", "five things", "six things")


def decoder_parts(eng: api.SteppingEngine, s: api.AttentionSteps, layer: int) -> str:
    """What this decoder's layer adds to the textbook's attention, from what its steps hold (each drawn below)."""
    parts = []
    if s.x_normed is not None:
        parts.append(f"**{s.norm}** scales each token's vector to a steady size first")
    if s.q_normed is not None:
        parts.append("each head's Q and K get an **RMSNorm of their own** before they are scored")
    if s.q_rotated is not None:
        parts.append(
            "**rotary positions** turn each pair of Q and K dimensions by an angle that grows with the position "
            "(so a score depends on how far apart two tokens are)"
        )
    heads, kv = s.q_heads.shape[1], s.k_heads.shape[1]
    if kv == 1 < heads:
        parts.append(f"**one key/value head** that all {heads} query heads share: they differ only in their queries")
    elif s.group > 1:
        parts.append(f"**grouped-query attention**: {heads} query heads share {kv} key/value heads, {s.group} to each")
    windows = tuple(getattr(eng, "windows", ()))
    full, n = sum(not w for w in windows), s.scores.shape[-1]
    if s.window:
        fits = f" (this text's {n} tokens all fit in it: here the mask is the causal one)" if n <= s.window else ""
        rest = f"; {full} of the {len(windows)} layers see every earlier token" if full else ""
        parts.append(
            f"a **sliding window**: in layer {layer + 1} each token sees itself and at most the {s.window - 1} tokens "
            f"before it{fits}{rest}"
        )
    elif any(windows):
        parts.append(
            f"layer {layer + 1} sees every earlier token, while {len(windows) - full} of the {len(windows)} layers "
            f"see only a **sliding window** of the last {max(windows)}"
        )
    if s.softcap:
        parts.append(f"**soft-capping**: each score s becomes {s.softcap:g}·tanh(s / {s.softcap:g}), never past it")
    if s.sinks is not None:
        parts.append(
            "a learned **sink** for each head: a score with no token behind it that joins every row's softmax, so a "
            "row's weights over the tokens sum to less than 1"
        )
    return (
        f"A {escape.md(api.family_title(eng.family))} layer adds {COUNTS[min(len(parts), 6)]} to that, drawn below: "
        + "; ".join(parts)
        + ". The causal mask is the model's own: it was trained with it."
    )


def model_name(eng: api.Engine) -> str:
    """Whose weights the step-by-step view runs, for the intro: the bundled models by name, others by family and
    the name they were given (escaped)."""
    if eng.name in api.BUNDLED_MODELS:
        return api.shown_name(eng.name, start=True)
    return f"The {escape.md(api.family_title(eng.family))} model {escape.quoted(eng.name)}"


def step_controls(eng: api.SteppingEngine, decoder: bool) -> tuple[int, int, bool]:
    """Layer, head (0-based) and the causal toggle (always on for a decoder); their values live in the URL."""
    row = widgets.control_row("inside")
    layer = state.bound(
        row.slider,
        "Layer",
        1,
        eng.n_layers,
        url="layer",
        key="inside.layer",
        default=1,
        valid=lambda v: 1 <= v <= eng.n_layers,
        width=widgets.control_px(),
    )
    head = state.bound(
        row.slider,
        "Head",
        1,
        eng.n_heads,
        url="head",
        key="inside.head",
        default=1,
        valid=lambda v: 1 <= v <= eng.n_heads,
        width=widgets.control_px(),
    )
    help_text = "A decoder is trained with the mask: it is always on." if decoder else "Hide every later token"
    if decoder:
        st.session_state["inside.causal"] = True
    causal = state.bound(
        row.toggle, "Causal mask", url="causal", key="inside.causal", default=False, help=help_text, disabled=decoder
    )
    state.show_head(layer - 1, head - 1)
    return layer - 1, head - 1, causal


def shape_trail(s: api.AttentionSteps, head: int, phone: bool = False) -> str:
    """The forward pass's shapes, step by step, as print(shape) would show them; on a phone each shape under its step
    (a phone's code block is about 38 characters wide: a column of shapes beside the steps would be off its edge)."""
    trace = s.trace()
    width = max(len(name) for name, _ in trace) + 1
    lines = [f"{name}\n    {shape}" if phone else f"{name:<{width}}{shape}" for name, shape in trace]
    share = f"each K head is read by {s.group} Q heads;" + ("\n " if phone else " ") if s.group > 1 else ""
    return "\n".join(lines) + f"\n({share}the maps below show head {head + 1})"


def whole_pass_trace(inputs) -> None:
    """The chosen engine's whole forward pass, module by module: print(shape) without editing the model."""
    eng = cache.load_engine_or_stop(inputs.model, inputs.backend)
    with st.expander(
        f"The whole forward pass of {escape.md(api.shown_name(eng.name))} ({eng.backend}), module by module"
    ):
        if cache.request_is_long(inputs.model, inputs.backend, inputs.text):
            st.info("The trace is for texts short enough for this page; shorten the text to see it.")
            return
        trace, repeated = api.shape_trace(eng, inputs.text)
        st.code(trace, language=None)
        folded = "; ".join(f"{name}.1 … {name}.{n - 1} repeat {name}.0's shapes" for name, n in repeated.items())
        st.caption(
            "Each line is one module's call, in the order the calls returned (a module after its parts), with the "
            "shapes it returned, from forward hooks on the real model: nothing in it was edited. "
            + (escape.md(folded) + "." if folded else "")
        )


def dim_names(matrix) -> list[str]:
    """d1 … dN for a (T, N) map's columns: its axis names them as every map of vectors does."""
    return [f"d{i + 1}" for i in range(matrix.shape[-1])]


def draw_decoder_parts(s: api.AttentionSteps, labels: list[str], head: int, style: Style) -> None:
    """What a modern decoder's layer adds, where it has it: the norm before attention, the norm of each head's Q and
    K, their rotation by position, and the key/value head this query head shares."""
    m = lambda t: t[0].float().cpu().numpy()  # noqa: E731  (drop the batch of 1)
    kv = s.kv_head(head)
    sharing = [h + 1 for h in range(s.q_heads.shape[1]) if s.kv_head(h) == kv]
    dims = [f"d{i + 1}" for i in range(s.q_heads.shape[-1])]
    per_row, px = interactive.maps_a_row(labels, 0, style, most=4)
    by_dim = partial(interactive.matrix, rows=labels, cols=dims, style=style, width=px)
    figs = []
    if s.x_normed is not None:
        x = m(s.x_normed)
        figs.append(interactive.matrix(x, f"{s.norm}(X)", rows=labels, cols=dim_names(x), style=style, width=px))
    if s.q_normed is not None and s.k_normed is not None:
        figs += [by_dim(m(s.q_normed)[head], f"Q, head {head + 1}, after its RMSNorm")]
        figs += [by_dim(m(s.k_normed)[kv], f"K, K/V head {kv + 1}, after its RMSNorm")]
    if s.q_rotated is not None and s.k_rotated is not None:
        if s.q_normed is None:
            figs.append(by_dim(m(s.q_heads)[head], f"Q, head {head + 1}, before RoPE"))
        figs += [by_dim(m(s.q_rotated)[head], f"Q, head {head + 1}, after RoPE")]
        figs += [by_dim(m(s.k_rotated)[kv], f"K, K/V head {kv + 1}, after RoPE")]
    widgets.map_rows(figs, min(per_row, len(figs)), [f"in.llama{i}" for i in range(len(figs))])
    st.caption(
        f"Query head {head + 1} reads key/value head {kv + 1}, which query heads {', '.join(map(str, sharing))} "
        f"share: {s.group} query heads to each key/value head."
        if s.group > 1
        else f"Query head {head + 1} has its own key/value head."
    )
    if s.angles is None:  # no rotary positions read at this layer: nothing turned
        return
    pairs = [f"pair {i + 1}" for i in range(s.angles.shape[-1])]
    angle_fig = interactive.matrix(
        s.angles.cos().cpu().numpy(),
        "cos(angle) each pair of dimensions has turned, per position",
        rows=labels,
        cols=pairs,
        style=style,
    )
    st.plotly_chart(angle_fig, key="in.angles")
    st.caption(
        "Pair 1 turns by one radian per position; each later pair turns more slowly (θ^(−2i/d)): fast pairs tell "
        "neighbours apart, slow ones far-apart tokens."
    )


def draw_steps(s: api.AttentionSteps, tokens: TokenAxis, head: int, style: Style) -> None:
    """X, Q, K, V, scores, mask, softmax, weights·V, concat and output, as heatmaps (and a Llama layer's parts)."""
    labels = display_labels(tokens.tokens)
    dims = [f"d{i + 1}" for i in range(s.q_heads.shape[-1])]
    # As many maps a row as leave every token its label: (T, Dh) maps label the tokens on one side, (T, T) on both.
    dim_row, dim_px = interactive.maps_a_row(labels, 0, style, most=4)
    token_row, token_px = interactive.maps_a_row(labels, len(labels), style, most=3)
    by_dim = partial(interactive.matrix, rows=labels, cols=dims, style=style, width=dim_px)  # (T, Dh) maps
    by_token = partial(interactive.matrix, rows=labels, cols=labels, style=style, width=token_px)  # (Tq, Tk) maps
    m = lambda t: t[0].float().cpu().numpy()  # noqa: E731  (drop the batch of 1)
    dh = len(dims)
    allowed = s.allowed().cpu().numpy()  # (Tq, Tk)
    if s.x_normed is not None or s.q_rotated is not None or s.q_normed is not None:
        draw_decoder_parts(s, labels, head, style)
    kv = s.kv_head(head)
    x = m(s.x_query)
    figs = [interactive.matrix(x, "X: token vectors", rows=labels, cols=dim_names(x), style=style, width=dim_px)]
    figs += [by_dim(m(s.q_heads)[head], f"Q of head {head + 1} (T × {dh})")]
    figs += [
        by_dim(m(t)[kv], f"{n} of {'K/V head ' + str(kv + 1) if s.group > 1 else 'head ' + str(head + 1)} (T × {dh})")
        for n, t in zip("KV", (s.k_heads, s.v_heads), strict=True)
    ]
    widgets.map_rows(figs, dim_row, [f"in.{n}" for n in "XQKV"])
    masked = "" if s.mask is None else ", masked (grey)"
    forbidden = None if s.mask is None else ~allowed  # grey on the scores and the weights alike
    figs = [
        by_token(m(s.scores)[head], f"scores QKᵀ/√{dh}{masked}", masked=forbidden),
        by_token(allowed.astype("float32"), "mask (1 = may attend)", signed=False, unit="may attend"),
        by_token(m(s.weights)[head], "softmax: attention weights", signed=False, masked=forbidden),
    ]
    widgets.map_rows(figs, token_row, [f"in.attn{i}" for i in range(3)], token_px)
    by_model = partial(interactive.matrix, rows=labels, style=style, width=dim_px)  # (T, d) maps
    concat, output = m(s.concat), m(s.output)
    figs = [
        by_dim(m(s.head_outputs)[head], f"weights·V of head {head + 1}"),
        by_model(concat, "concat of all heads", cols=dim_names(concat)),
        by_model(output, "output = concat·W_O", cols=dim_names(output)),
    ]
    widgets.map_rows(figs, min(3, dim_row), [f"in.out{i}" for i in range(3)])


def size_controls() -> tuple[int, int]:
    """d_model and the number of heads of the random engine; their values live in the URL."""
    a, b = st.columns(2)
    d_model = state.bound(
        a.select_slider,
        "d_model",
        D_MODELS,
        url="d_model",
        key="inside.d_model",
        default=384,
        valid=D_MODELS.__contains__,
    )
    options = [h for h in HEAD_COUNTS if d_model % h == 0]
    heads = state.bound(
        b.select_slider,
        "heads h",
        options,
        url="heads",
        key="inside.heads",
        default=12 if 12 in options else options[-1],
        valid=options.__contains__,
    )
    st.markdown(f"d_k = d_model / h = {d_model} / {heads} = **{d_model // heads}** numbers per head")
    return d_model, heads


def draw_random_engine(d_model: int, heads: int, tokens: TokenAxis, causal: bool, style: Style) -> None:
    """A seeded random engine of the chosen sizes over random token vectors: the shapes are what matter."""
    s, result = cost.demo_run(cache.get(api.demo_attention_work(d_model, heads)), tokens, causal)
    st.caption(
        f"Q split into heads: {tuple(s.q.shape)} → {tuple(s.q_heads.shape)}. Random weights: patterns mean nothing."
    )
    with widgets.grid_box("inside"):
        note = f"random weights: d_model {d_model}, {heads} heads"  # not the model's layer 1, which it would say
        grid = interactive.head_grid(result, 0, style=style, columns=min(heads, 6), note=note, pick=False)
        st.plotly_chart(grid, key="in.random")


def _measure(d_model: int, heads: int) -> list[cost.Cost]:
    """The engine's cost at N = 16 … 512, timed once per size for every session (heavy work: admitted)."""
    return cache.get(api.cost_work(d_model, heads))


def draw_cost(d_model: int, heads: int, style: Style) -> None:
    """Time and memory of one pass at N = 16 … 512, measured live, with what the formula says."""
    lengths = cost.DEFAULT_LENGTHS
    with st.spinner(f"Timing the engine at N = {lengths[0]} … {lengths[-1]}…"):
        costs = _measure(d_model, heads)
    st.markdown(
        "One pass costs **O(N²·d + N·d²)**: the scores QKᵀ and the mixing weights·V take N²·d multiplications, "
        "the four projections W_Q, W_K, W_V, W_O take N·d² (d = d_model). The weights themselves are H·N² numbers."
    )
    st.plotly_chart(interactive.cost_chart(costs, style=style), key="in.cost")
    first, last = costs[0], costs[-1]
    weights_growth, time_growth = last.weights_mb / first.weights_mb, last.ms / first.ms
    why = (
        "the time grew more slowly than the weights: while N is not far above d, the N·d² projections and fixed "
        "costs weigh as much as the N² part."
        if time_growth < weights_growth
        else "the time grew as fast as the weights: here the N² part dominates."
    )
    exactly_n2 = math.isclose(weights_growth, (last.n / first.n) ** 2)  # H·N² numbers: on the ∝ N² line, hiding it
    squared = " (N², so their line hides the ∝ N² line)" if exactly_n2 else ""
    st.caption(
        f"Measured live on this server ({'GPU' if first.peak_mb is not None else 'CPU'}), median of "
        f"{cost.DEFAULT_REPEATS} passes, d_model = {d_model}. From N = {first.n} to {last.n} "
        f"({last.n // first.n}× the tokens) the weights grew {weights_growth:.0f}×{squared} and the time "
        f"{time_growth:.0f}×: {why}"
    )


def render() -> None:
    """Draw the page."""
    inputs = controls.current()
    st.header("Inside multi-head attention")
    eng = cache.stepping_engine_or_stop(inputs.model, inputs.backend)
    st.markdown((INTRO if eng.backend == "scratch" else LAYERS).format(model=model_name(eng)))
    decoder = eng.architecture == "decoder"
    layer, head, causal = step_controls(eng, decoder)
    enc, steps = cache.steps_or_stop(eng, inputs.text, layer, causal)
    if decoder:
        st.markdown(decoder_parts(eng, steps, layer))
    st.code(shape_trail(steps, head, inputs.style.phone), language=None)
    whole_pass_trace(inputs)
    if causal and not decoder:
        st.caption(BERT_NEVER_CAUSAL)
    draw_steps(steps, enc.axis, head, inputs.style)

    st.subheader("Change the sizes: d_k = d_model / h")
    d_model, heads = size_controls()
    draw_random_engine(d_model, heads, enc.axis, causal, inputs.style)
    st.subheader("What it costs as the text grows")
    draw_cost(d_model, heads, inputs.style)
