"""The Positions page: attention alone does not know order; how sinusoidal, learned and rotary positions tell it."""

from __future__ import annotations

from functools import partial

import numpy as np
import streamlit as st

from attnviz import api, escape
from attnviz.api import encodings
from attnviz.figures import export, interactive, layout, lesson_charts
from attnviz.figures.style import Style
from attnviz.result import percent
from attnviz.ui import cache, controls, state, widgets
from attnviz.ui.controls import Inputs

D_MODELS = (16, 32, 64, 128, 256, 384, 512)
SMOLLM2_HEAD_DIM, SMOLLM2_THETA = 64, 100000.0  # SmolLM2-135M's config: head_dim 64, rope_theta 100000
WHY = (
    "Attention compares every query with every key, and a sum over keys does not care in which order they come: "
    "shuffle the words and every token gets the same weights on the same words. Order has to be put into the "
    "vectors. Three ways, each drawn below from the package's own numbers (attnviz.lessons.encodings)."
)
SINUSOIDAL = (
    "**Sinusoidal** (Vaswani et al. 2017): PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), "
    "PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)). Every position gets its own pattern; the first columns swing "
    "fast (a wavelength of 2π ≈ 6.3 positions), the last ones slowly (up to 2π·10000). Nothing is learned, so it "
    "gives an encoding for any length."
)


def _dims(d: int) -> list[str]:
    """A vector's dimensions as a map's column labels: d1, d2, ..."""
    return [f"d{i + 1}" for i in range(d)]


def _pair(name: str, style: Style) -> tuple:
    """Two figures side by side on a laptop (stacked on a phone, as its columns are); on a projector one under the
    other, each at the main column's width: side by side, a projector's labels and its colour bar left a square map
    about 110 px wide."""
    if style.projector and not style.phone:
        return st.container(), st.container()
    a, b = widgets.wide_columns(name, 2)
    return a, b


def _figure_px(style: Style) -> int:
    """The px a figure of a _pair is laid out for: half the laptop's main column, a projector's or a phone's whole."""
    return layout.main_px(style) if style.projector else layout.column_px(style)


def _square(where, fig, style: Style, key: str) -> None:
    """A square map at the width it was laid out for (plotly holds its cells square: stretched across a wider column,
    a 1920x1080 projector's, it stood narrower than its plot, its colour bar far off); a phone's fills its column."""
    where.plotly_chart(fig, key=key, width="stretch" if style.phone else _figure_px(style))


def sinusoidal_section(style: Style) -> None:
    """The PE matrix, PE·PE, predict-then-reveal on relative position, the mean by offset, CSV."""
    a, b = st.columns(2)
    d = state.bound(
        a.select_slider, "d_model", D_MODELS, url="d_model", key="pos.d", default=64, valid=lambda v: v in D_MODELS
    )
    n = state.bound(
        b.slider, "positions", 8, 256, url="positions", key="pos.n", default=48, valid=lambda v: 8 <= v <= 256
    )
    pe = encodings.sinusoidal(n, d)
    sim = encodings.similarity(pe)
    rows = [str(p) for p in range(n)]
    c1, c2 = _pair("pos-sinusoidal", style)
    c1.plotly_chart(
        interactive.matrix(
            pe.numpy(),
            f"PE: {n} positions × {d} dimensions",
            rows=rows,
            cols=_dims(d),
            style=style,
            height=360,
            width=_figure_px(style),
        ),
        key="pos.pe",
    )
    pe_pe = interactive.matrix(
        sim.numpy(),
        "PE(i)·PE(j)",
        rows=rows,
        cols=rows,
        style=style,
        signed=False,
        unit="dot product",
        width=_figure_px(style),
        square=True,
    )
    _square(c2, pe_pe, style, "pos.sim")
    guess = widgets.predict(
        "Is PE(10)·PE(12) the same number as PE(30)·PE(32)? (Both pairs are two positions apart.)",
        ["the same", "different"],
        "pos.q1",
    )
    if guess is not None:
        asked = encodings.similarity(encodings.sinusoidal(33, d))  # the question's pairs, whatever the slider says
        shown = f"PE(10)·PE(12) = {float(asked[10, 12]):.4f}, PE(30)·PE(32) = {float(asked[30, 32]):.4f}"
        verdict = "You called it." if guess == "the same" else "Not what you guessed: they are the same."
        widgets.verdict(
            f"{verdict} Measured here: {shown}. sin(a)sin(b) + cos(a)cos(b) = cos(a − b), so PE(i)·PE(j) = "
            f"Σ cos((i − j)·w) over the {d // 2} frequencies: it depends on the offset i − j only, every diagonal of "
            f"the map is constant. That is the *relative position* the formula gives for free (2 apart is always "
            "the same number).",
            guess == "the same",
        )
        offsets = encodings.by_offset(sim, min(n - 1, 40))
        xs = list(range(-(len(offsets) // 2), len(offsets) // 2 + 1))
        st.plotly_chart(
            lesson_charts.lines(
                {"PE(i)·PE(i+k)": (xs, offsets.tolist())},
                "mean over i of PE(i)·PE(i+k)",
                "offset k",
                "dot product",
                style=style,
            ),
            key="pos.offsets",
        )
    widgets.csv_button(
        "PE matrix (CSV)",
        lambda: export.matrix_csv(pe.numpy(), rows, [f"d{i}" for i in range(d)]),
        f"attnviz_sinusoidal_{n}x{d}.csv",
        "pos.csv",
    )


def learned_section(inputs: Inputs, style: Style) -> None:
    """BERT's learned position table and its cosine similarity beside the sinusoidal one."""
    st.markdown(
        "**Learned** (BERT): a table of 512 vectors, one per position, trained with the rest of the model. Here the "
        "bundled BERT's table, and the cosine similarity of its positions beside the sinusoidal one's at the same "
        "size: learned, yet neighbours still come out alike."
    )
    eng = cache.load_engine_or_stop(inputs.model, inputs.backend)
    if not api.has_learned_positions(eng):  # a rotary decoder's page shows the bundled BERT's table
        eng = cache.load_engine_or_stop("default", inputs.backend)
    try:
        table = encodings.learned_positions(eng)
    except ValueError as err:
        st.info(escape.md(err))
        return
    n = st.slider("positions shown", 16, min(256, table.shape[0]), 64, key="pos.learned_n")
    rows = [str(p) for p in range(n)]
    learned = encodings.similarity(table[:n], cosine=True)
    sinus = encodings.similarity(encodings.sinusoidal(n, table.shape[1]), cosine=True)
    c1, c2 = _pair("pos-learned", style)  # the table's rows run long: the two cosines, compared, beside it
    shown = table[:n].numpy()
    clip = float(np.percentile(np.abs(shown), 99))  # a few large dimensions would wash the rest out
    name = api.shown_name(eng.name).removeprefix("the ")
    c1.plotly_chart(
        interactive.matrix(
            shown,
            f"{name}: learned positions ({n} × {table.shape[1]}), colour clipped at the 99th percentile",
            rows=rows,
            cols=_dims(table.shape[1]),
            style=style,
            height=340,
            bound=clip,
            width=_figure_px(style),
        ),
        key="pos.table",
    )
    cosine = partial(interactive.matrix, rows=rows, cols=rows, style=style, width=_figure_px(style), square=True)
    _square(c2, cosine(learned.numpy(), "learned: cosine(P(i), P(j))"), style, "pos.learned_sim")
    _square(c2, cosine(sinus.numpy(), f"sinusoidal (d = {table.shape[1]}): cosine"), style, "pos.sinus_sim")
    near = float(np.mean([learned.diagonal(k).mean() for k in (1, 2)]))
    far = float(learned.diagonal(min(n - 1, 40)).mean())
    st.caption(
        f"Measured on this table: positions 1–2 apart have a mean cosine of {near:.2f}, positions "
        f"{min(n - 1, 40)} apart {far:.2f}. Unlike the formula's, the learned map's diagonals are not constant: "
        "nothing forces a purely relative pattern, and positions past the longest training text stay untrained."
    )


THETAS = (10000.0, 100000.0, 500000.0, 1000000.0)  # Llama 2's, SmolLM2's, Llama 3's, Gemma 3's full layers'
KIND_NAMES = {"sliding_attention": "windowed layers", "full_attention": "full layers"}


def rotary_model(inputs: Inputs) -> tuple[str, encodings.Rotary]:
    """The model whose rotary numbers the section shows: the sidebar's, where it has plain rotary positions, else
    SmolLM2's (the bundled BERT has none)."""
    eng = cache.load_engine_or_stop(inputs.model, inputs.backend)
    own = encodings.rotary_of(eng)
    if own is not None:
        return cache.named(inputs.model, start=False), own
    return "SmolLM2", encodings.Rotary(SMOLLM2_HEAD_DIM, {"": SMOLLM2_THETA}, {"": 30})


def rotary_section(inputs: Inputs) -> None:
    """Each pair's rotary angle per position, and q·k against distance, at the sidebar's model's head size and θ."""
    style = inputs.style
    name, rot = rotary_model(inputs)
    st.markdown(
        "**Rotary** (RoPE, Su et al. 2021; SmolLM2, Llama, Gemma 3): nothing is added to the token vectors. Instead "
        "each pair of dimensions of every query and key is turned by an angle pos · θ^(−2i/d_head). A query at "
        "position p and a key at q then score by how far apart they are, p − q, whatever p is."
    )
    own = "; ".join(
        f"θ {t:,.0f}" + (f" on its {rot.layers.get(k, 0)} {KIND_NAMES.get(k, k)}" if k else "")
        for k, t in rot.thetas.items()
    )
    st.caption(f"Drawn with {escape.md(name)}'s numbers: heads of {rot.head_dim} dimensions, {own}.")
    a, b = st.columns(2)
    n = a.slider("positions", 8, 512, 64, key="pos.rope_n")
    theta = b.select_slider(
        "θ (SmolLM2: 100,000; Llama 2: 10,000; Gemma 3: 10,000 on its windowed layers, 1,000,000 on its full ones)",
        sorted({*THETAS, *rot.thetas.values()}),
        rot.theta,
        key=f"pos.theta.{rot.head_dim}.{rot.theta:.0f}",  # another model's: its own θ again, not the last one's
        format_func=lambda v: f"{v:,.0f}",
    )
    d = rot.head_dim
    angles = encodings.rotary_angles(n, d, theta)
    pairs = [f"pair {i + 1}" for i in range(d // 2)]
    rows = [str(p) for p in range(n)]
    c1, c2 = widgets.wide_columns("pos-rope", 2)
    c1.plotly_chart(
        interactive.matrix(
            np.cos(angles.numpy()),
            f"cos(angle) of each pair, head size {d}",
            rows=rows,
            cols=pairs,
            style=style,
            height=360,
        ),
        key="pos.rope",
    )
    score = encodings.rotary_score_by_offset(d, theta, min(n, 256))
    c2.plotly_chart(
        lesson_charts.lines(
            {"q·k": (list(range(len(score))), score.tolist())},
            "turned: q·k against their distance",  # short: plotly's buttons, on hover, stand at its right
            "distance (positions)",
            "q·k",
            style=style,
            height=360,
        ),
        key="pos.rope_decay",
    )
    st.caption(
        f"Pair 1 turns one radian per position; pair {d // 2} turns θ^(−{d - 2}/{d}) = {angles[1, -1].item():.2e} "
        f"radians. The right-hand curve is Σ 2·cos(distance · w_i) for a query and key that were the same vector: it "
        "falls (unevenly) with distance, the long-term decay the RoPE paper describes. The Inside page shows the same "
        "rotation on a model's real Q and K."
    )


def positional_heads_section(inputs: Inputs) -> None:
    """The heads the Model overview's statistics call previous- or next-token, each with a link to it."""
    st.markdown(
        "**Positional heads**: heads that attend by where a token is, not what it is, like the previous or the "
        "next token. Found with the Model overview's statistics, averaged over its built-in sentences "
        f"(more than {encodings.SHARE_THRESHOLD:.0%} of a head's attention on that neighbour)."
    )
    try:
        with st.spinner("Averaging over the built-in sentences (a corpus run)…"):
            stats, _ = cache.get(api.sentences_work(inputs.model, "end"))
    except ValueError as err:  # a model a corpus run does not cover
        st.info(escape.md(err))
        return
    found = encodings.positional_heads(stats)
    if not found:
        model = cache.named(inputs.model, start=False)
        st.info(f"No head of {model} puts more than half its attention on a neighbour.")
        return
    for i, h in enumerate(found[:12]):
        row = widgets.control_row(f"pos-open{i}", "center")  # the button whole beside its line, or under it
        said = f"Layer {h.layer + 1}, head {h.head + 1}: **{h.kind}**, {percent(h.share)} of its attention"
        row.markdown(said, width="content")
        if row.button("Open in Heads", key=f"pos.open{i}"):
            widgets.open_head(h.layer + 1, h.head + 1)
    if len(found) > 12:
        st.caption(f"…and {len(found) - 12} more (the Model overview lists every head).")


def render() -> None:
    """Draw the page."""
    inputs = controls.current()
    st.header("Positions: how a transformer knows word order")
    st.markdown(WHY)
    st.subheader("Sinusoidal positions")
    st.markdown(SINUSOIDAL)
    sinusoidal_section(inputs.style)
    st.subheader("Learned positions (BERT)")
    learned_section(inputs, inputs.style)
    st.subheader("Rotary positions (SmolLM2, Gemma 3)")
    rotary_section(inputs)
    st.subheader("Heads that attend by position")
    positional_heads_section(inputs)
