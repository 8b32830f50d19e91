"""Masks and their cost: full, causal, padding, sliding window, strided, block-sparse, on the model's own Q and K;
what a masked dense computation costs against kernels that skip the masked blocks, measured live."""

from __future__ import annotations

from functools import partial

import streamlit as st

from attnviz import api, escape
from attnviz.api import cost, kernels
from attnviz.figures import export, interactive, layout, lesson_charts
from attnviz.figures.style import Style
from attnviz.tokens import display_labels
from attnviz.ui import cache, controls, state, widgets

HOW = {
    "full": "every token sees every token (BERT's self-attention).",
    "causal": "a token sees itself and the tokens before it (GPT, Llama): the upper triangle is 0.",
    "padding": "a batch pads short texts to one length; no token may look at the padding.",
    "sliding window": (
        "a token sees itself and the w − 1 tokens before it (and the w − 1 after it, if not causal): Longformer, "
        "Mistral."
    ),
    "strided": "the last s tokens plus every s-th token before them (Child et al. 2019): far tokens in few hops.",
    "block-sparse": (
        "b × b blocks: each block reads itself, its neighbour on each side and the first (global) block: like "
        "BigBird's window and global blocks, with one global block where BigBird's has two (the first and the "
        "last), and without its random ones."
    ),
}
HONEST = (
    "A dense computation with a mask still computes all N² scores and then throws most of them away: masking "
    "changes the weights, not the cost. Only a kernel that skips the masked blocks saves anything. attnviz has "
    "two (lessons.kernels): a blocked sliding window that gives each block of queries only the keys its window "
    "reaches, and a block-sparse one that gathers only its layout's key blocks. Both give the same weights as "
    "dense + mask (tested within 1e-5); both are plain PyTorch, not fused kernels."
)
GPU_FIGURES = (
    "On an NVIDIA H100 (bench/lessons.py, three runs, bench/RESULTS.md), causal window w = 64, 8 heads: at N = 1,024 "
    "dense + mask was still faster (the blocked kernel took 2.3–3.3× its time: the GPU does N² small work at once), "
    "at N = 4,096 the blocked window took 0.20–0.31× the dense time and at N = 8,192 0.06–0.07×, with a peak of "
    "153 MB against 4,160 MB."
)


def mask_controls(n: int, decoder: bool) -> tuple[str, dict, bool]:
    """The mask, its size parameter and whether it is also causal (always, for a decoder); kept in the URL."""
    kind = state.bound(
        st.radio,
        "Mask",
        kernels.MASKS,
        url="mask",
        key="mk.kind",
        default="sliding window",
        valid=lambda v: v in kernels.MASKS,
        horizontal=True,
    )
    st.caption(escape.md(HOW[kind]))
    a, b, c = st.columns(3)
    params = {}
    if kind == "sliding window":
        params["width"] = a.slider("window w", 1, max(2, n), min(4, n), key="mk.w")
    if kind == "strided":
        params["stride"] = a.slider("stride s", 1, max(2, n), min(3, n), key="mk.s")
    if kind == "block-sparse":
        params["block"] = a.slider("block b", 1, max(2, n), min(3, n), key="mk.b")
    if kind == "padding":
        params["real"] = a.slider("tokens that are text (the rest is padding)", 1, n, max(1, (2 * n) // 3), key="mk.r")
    if decoder:
        c.caption("A decoder was trained causal: every mask here is and-ed with the causal one.")
        return kind, params, True
    causal = b.toggle("also causal", value=False, key="mk.causal", disabled=kind in ("full", "causal"))
    return kind, params, causal and kind != "full"


def weights_section(inputs, style: Style) -> None:
    """The mask, the model's own weights of a layer and head, and the same Q and K under the mask."""
    eng = cache.stepping_engine_or_stop(inputs.model, inputs.backend)
    decoder = eng.architecture == "decoder"
    a, b = st.columns(2)
    layer = a.slider("Layer", 1, eng.n_layers, min(3, eng.n_layers), key="mk.layer") - 1
    head = b.slider("Head", 1, eng.n_heads, 1, key="mk.head") - 1
    state.show_head(layer, head)
    enc, steps = cache.steps_or_stop(eng, inputs.text, layer, decoder)
    n = len(enc.ids)
    kind, params, causal = mask_controls(n, decoder)
    mask = kernels.make(kind, n, causal=causal, **params)
    weights = kernels.reweigh(steps, mask)[head].cpu().numpy()  # (T, T)
    labels = display_labels(enc.axis.tokens)
    own = steps.weights[0, head].float().cpu().numpy()
    forbidden = ~steps.allowed().cpu().numpy()  # the model's own mask (a decoder's future, beyond its window): grey
    per_row, px = interactive.maps_a_row(labels, len(labels), style, most=3)  # every token labelled on each
    square = partial(interactive.matrix, rows=labels, cols=labels, style=style, signed=False, height=360, width=px)
    figs = [
        square(mask.float().numpy(), f"mask: {kind} (1 = may attend)", unit="may attend"),
        square(own, f"the model's own weights, layer {layer + 1}, head {head + 1}", masked=forbidden),
        square(weights, f"the same Q and K under the {kind} mask", masked=~mask.numpy()),
    ]
    widgets.map_rows(figs, per_row, ["mk.mask", "mk.own", "mk.new"], px)
    name = api.shown_name(eng.name, start=True)
    st.caption(
        f"{escape.md(name)}'s own queries and keys at layer {layer + 1}: only the mask changed, so each row is "
        f"renormalised over the keys it may still see. This mask keeps {kernels.density(mask):.0%} of the {n}×{n} "
        "pairs. A model was trained with one mask; under another its weights are arithmetic, not what it would learn."
    )
    widgets.csv_button(
        "These weights (CSV)",
        lambda: export.matrix_csv(weights, enc.axis.tokens, enc.axis.tokens),
        f"attnviz_mask_{kind.replace(' ', '_')}_L{layer + 1}_H{head + 1}.csv",
        "mk.csv",
    )


WINDOW_CELLS = 16  # a side of the model's window masks: cells of n / 16 positions, each labelled by its first


def model_window_section(inputs, style: Style) -> None:
    """Where the sidebar's model has sliding windows (Gemma 3, a windowed Mistral): which layers use one, and the
    mask a windowed layer applies to a text twice the window long, beside a full layer's, pooled to cells (the share
    of a cell's pairs the mask lets through)."""
    eng = cache.load_engine_or_stop(inputs.model, inputs.backend)
    windows = tuple(getattr(eng, "windows", ()))  # a decoder on attnviz's attention states its layers' windows
    if not any(windows):
        return
    w = max(windows)
    sliding = [i + 1 for i, x in enumerate(windows) if x]
    full = [i + 1 for i, x in enumerate(windows) if not x]
    name = escape.md(api.shown_name(eng.name))
    st.subheader(f"{name}'s own sliding window")
    st.markdown(
        f"{len(sliding)} of {name}'s {len(windows)} layers use a **sliding window of {w:,} tokens**: a token sees "
        f"itself and the {w - 1:,} tokens before it, nothing earlier"
        + (f"; layers {', '.join(map(str, full))} see every earlier token (a full causal mask)." if full else ".")
        + " Below, the two masks on a text of "
        f"{2 * w:,} tokens, each cell {2 * w // WINDOW_CELLS:,} × {2 * w // WINDOW_CELLS:,} positions: its shade is "
        "the share of its pairs the mask lets through. On a windowed layer a key further back than the window gets "
        "exactly 0 (tested on this model), and the long path skips those blocks: its cost grows as N × window."
    )
    n = 2 * w
    f = n // WINDOW_CELLS
    labels = [str(i * f) for i in range(WINDOW_CELLS)]
    per_row, px = interactive.maps_a_row(labels, WINDOW_CELLS, style, most=2)
    figs = []
    for mask, title in (
        (kernels.make("sliding window", n, causal=True, width=w), f"a windowed layer (layer {sliding[0]}): w = {w:,}"),
        (kernels.make("causal", n), f"a full layer (layer {full[0]})" if full else "causal, no window"),
    ):
        cells = mask.float().reshape(WINDOW_CELLS, f, WINDOW_CELLS, f).mean((1, 3)).numpy()
        figs.append(
            interactive.matrix(
                cells, title, rows=labels, cols=labels, style=style, signed=False, height=360, width=px,
                unit="share allowed",
            )
        )  # fmt: skip
    widgets.map_rows(figs, per_row, ["mk.model_window", "mk.model_full"], px)
    st.caption(
        f"Rows are queries and columns keys, by position (each cell from its first position). The lesson's window "
        f"above is the same rule with a w you choose; {name} was trained with w = {w:,}."
    )


def cost_section(style: Style) -> None:
    """Dense + mask against the blocked kernels, measured on this server when asked."""
    dev = api.resolve_device()
    st.markdown(HONEST)
    lengths = (256, 512, 1024, 2048, 4096) if dev.type == "cuda" else (256, 512, 1024, 2048)
    if st.button(f"Measure on this server ({api.describe_device(dev)})", key="mk.measure"):
        with st.spinner(f"Timing three methods at N = {', '.join(map(str, lengths))}…"):
            st.session_state["mk.cost"] = cache.heavy(
                "timing three masks", 2 * api.GRID_BYTES, lambda: cost.mask_cost(lengths, device=dev)
            )
    rows = st.session_state.get("mk.cost")
    if not rows:
        st.caption("Press the button: causal sliding window w = 64, 8 heads of 64 dimensions, timed now.")
        return
    time_fig, mem_fig = lesson_charts.mask_cost_chart(rows, style=style, width=layout.column_px(style))
    a, b = st.columns(2)
    a.plotly_chart(time_fig, key="mk.time")
    b.plotly_chart(mem_fig, key="mk.mem")
    dense = {r.n: r.ms for r in rows if r.method == "dense + mask"}
    table = [
        {
            "N": r.n,
            "method": r.method,
            "ms": round(r.ms, 3),
            "× dense": round(r.ms / dense[r.n], 2),
            **({} if r.peak_mb is None else {"peak GPU MB": round(r.peak_mb, 1)}),  # a CPU's: no column of None
            "scores formed MB": round(r.scores_mb, 2),
        }
        for r in rows
    ]
    widgets.fixed_table(table, {"ms": 3, "× dense": 2, "peak GPU MB": 1, "scores formed MB": 2})
    last = max(dense)
    window = next(r for r in rows if r.n == last and r.method.startswith("sliding"))
    note = (
        f"Measured just now ({'GPU' if dev.type == 'cuda' else 'CPU'}, median of {cost.DEFAULT_REPEATS} passes): at "
        f"N = {last:,} the blocked window took {window.ms / dense[last]:.2f}× the dense time and formed "
        f"{window.scores_mb:.1f} MB of scores instead of {next(r.scores_mb for r in rows if r.n == last):.0f} MB."
    )
    if dev.type != "cuda":
        note += " " + GPU_FIGURES
    st.caption(note)
    widgets.csv_button(
        "Measurements (CSV)",
        lambda: widgets.rows_csv(table),
        "attnviz_mask_cost.csv",
        "mk.cost_csv",
    )


def render() -> None:
    """Draw the page."""
    inputs = controls.current()
    st.header("Masks and what they cost")
    st.markdown(
        "A mask says which keys each query may look at: the scores it forbids are set to the most negative number "
        "before the softmax, so their weights are exactly 0 and each row shares its attention among the keys left."
    )
    weights_section(inputs, inputs.style)
    model_window_section(inputs, inputs.style)
    st.subheader("What a mask costs: dense + mask against kernels that skip blocks")
    cost_section(inputs.style)
