"""One head vs many: the shipped 1/2/4/8-head models' training and attention; the cost of heads, measured live."""

from __future__ import annotations

import io
from functools import partial

import streamlit as st

from attnviz import api, escape
from attnviz.api import cost, head_models
from attnviz.figures import interactive, layout, lesson_charts
from attnviz.figures.style import Style
from attnviz.result import percent
from attnviz.ui import cache, controls, state, widgets

_END = head_models.LENGTH + 1  # positions count from 1, as the maps' labels do ("3:2" is the 3rd digit)
TASK_TEXT = {
    "reversal": f"write the digits backwards: the answer at position i is the digit at position {_END} − i "
    f"(positions 1 to {head_models.LENGTH})",
    "mirror-sum": "at position i, add the previous digit and the mirrored one: "
    f"(x[i−1] + x[{_END}−i]) mod 10 (positions 1 to {head_models.LENGTH}; x[0] = 0)",
}
REPEATS = 15
GPU_FIGURES = (
    "On an NVIDIA H100 (bench/lessons.py, three runs, bench/RESULTS.md) the loop over heads took 3.1–8.5× the "
    "batched time at 8 heads and 4.7–6.3× at 16, while the batched pass took about the same time for 1, 8 or 16 "
    "heads: the GPU runs the heads side by side, a Python loop one after another."
)


def curves_section(task: str, style: Style) -> None:
    """The training curves, the held-out accuracies recomputed now, and the curves as CSV."""
    record = head_models.shipped(task)
    series_acc = {
        heads_word(m["heads"]): (m["curve"]["steps"], m["curve"]["held_out_accuracy"]) for m in record["models"]
    }
    series_loss = {heads_word(m["heads"]): (m["curve"]["steps"], m["curve"]["train_loss"]) for m in record["models"]}
    a, b = st.columns(2)
    a.plotly_chart(
        lesson_charts.lines(
            series_acc,
            "held-out digit accuracy",
            "training step",
            "accuracy",
            style=style,
            width=layout.column_px(style),
        ),
        key="hc.acc",
    )
    b.plotly_chart(
        lesson_charts.lines(
            series_loss,
            "training loss",
            "training step",
            "cross-entropy",
            style=style,
            log_y=True,
            width=layout.column_px(style),
        ),
        key="hc.loss",
    )
    with st.spinner("Scoring the four models on the held-out sequences…"):
        now = cache.get(api.held_out_work(task))
    rows = [
        {
            "heads": m["heads"],
            "d_k = 32 / heads": 32 // m["heads"],
            "digit accuracy": f"{m['accuracy']:.2%}",
            "whole sequences right": f"{m['sequence_accuracy']:.2%}",
            "training steps": m["steps"],
        }
        for m in now["models"]
    ]
    st.dataframe(rows, hide_index=True)
    st.caption(
        f"Recomputed now on {now['held_out']:,} held-out sequences (never seen in training), one seed, "
        f"{record['recipe']['steps']} steps of {record['recipe']['batch']} sequences, d_model 32, one layer. The "
        "same numbers come from `python -m attnviz eval-heads --task " + task + "`."
    )

    def csv() -> str:
        out = io.StringIO()
        out.write("heads,step,train_loss,held_out_accuracy,held_out_loss\n")
        for m in record["models"]:
            c = m["curve"]
            for row in zip(c["steps"], c["train_loss"], c["held_out_accuracy"], c["held_out_loss"], strict=True):
                out.write(",".join(map(str, (m["heads"], *row))) + "\n")
        return out.getvalue()

    widgets.csv_button("Training curves (CSV)", csv, f"attnviz_heads_{task}.csv", "hc.csv")


def attention_section(task: str, style: Style, revealed: bool) -> None:
    """Typed digits: every head's map, with its share on the positions the answer needs, and (once the guess above is
    revealed) each model's answer and score: shown before it, "12/12 digits right" answered the question asked."""
    digits = state.bound(
        st.text_input,
        f"{head_models.LENGTH} digits",
        url="digits",
        key="hc.digits",
        default=head_models.sample_digits(),
        valid=lambda v: isinstance(v, str) and len(v) < 100,
        max_chars=60,
    )
    try:
        ids = head_models.parse_digits(digits)
    except ValueError as err:
        st.warning(escape.md(err))
        return
    right = head_models.answer(ids[None], task)[0].tolist()
    labels = [f"{i + 1}:{d}" for i, d in enumerate(ids.tolist())]
    st.markdown(f"The right answer: `{''.join(map(str, right))}`")
    st.caption(
        "Each map's rows and columns are the digits by position: “3:2” is the 3rd digit, a 2."
        + ("" if revealed else " Each model's own answer shows once you have made your guess above and revealed it.")
    )
    for count in head_models.HEAD_COUNTS:
        model = cache.get(api.head_model_work(task, count))
        answer, weights = head_models.attention_on(model, digits)  # (T,), (1, H, T, T)
        ok = sum(int(a == b) for a, b in zip(answer.tolist(), right, strict=True))
        shares = head_models.lookup_shares(weights[0])
        needs = "mirror" if task == "reversal" else "mirror + previous"
        share_text = ", ".join(
            f"head {h + 1}: {percent(float(mirror))} mirror, {percent(float(previous))} previous"
            for h, (mirror, previous) in enumerate(zip(shares["mirror"], shares["previous"], strict=True))
        )
        said = (
            f"answer `{''.join(map(str, answer.tolist()))}`, {ok}/{head_models.LENGTH} digits right. "
            if revealed
            else ""
        )
        st.markdown(f"**{heads_word(count)}** {said}The answer needs: {needs}. Where the heads look: {share_text}.")
        per_row, px = interactive.maps_a_row(labels, len(labels), style, most=4)  # the same size for every count
        square = partial(interactive.matrix, rows=labels, cols=labels, style=style, signed=False, height=230, width=px)
        figs = [square(weights[0, h].numpy(), f"head {h + 1}") for h in range(count)]
        widgets.map_rows(figs, per_row, [f"hc.map{count}.{h}" for h in range(count)], px)


def cost_section(style: Style) -> None:
    """Heads batched vs looped and grouped-query variants, measured on this server when asked."""
    dev = api.resolve_device()
    n = state.bound(
        st.select_slider,
        "tokens N",
        (128, 256, 512, 1024),
        url="n",
        key="hc.n",
        default=512,
        valid=lambda v: v in (128, 256, 512, 1024),
    )
    st.markdown(
        f"One self-attention pass at d_model 512 and N = {n} for 1, 8 and 16 heads: **batched** (one (1, h, N, "
        "d/h) product for every head at once) and a **Python loop over heads** (the same numbers, head by head). "
        "Then 16 query heads sharing 4 key/value heads (grouped-query attention) and 1 (multi-query): the weights "
        "stay 16 maps, but K and V, what a decoder keeps for every token it has read, shrink 4× and 16×."
    )
    if st.button(f"Measure on this server ({api.describe_device(dev)})", key="hc.measure"):
        with st.spinner(f"Timing 8 kinds of pass × {REPEATS} repeats…"):
            st.session_state["hc.cost"] = cache.heavy(
                "timing heads",
                api.GRID_BYTES,
                lambda: cost.heads_cost(512, n, kv_heads={16: (4, 1)}, repeats=REPEATS, device=dev),
            )
    rows = st.session_state.get("hc.cost")
    if not rows or rows[0].n != n:
        st.caption("Press the button: the timing runs on this server's own engine device, now.")
        return
    st.plotly_chart(lesson_charts.heads_cost_chart(rows, style=style), key="hc.chart")
    batched = {(r.heads, r.kv_heads): r.ms for r in rows if r.method == "batched"}
    table = [
        {
            "query heads": r.heads,
            "K/V heads": r.kv_heads,
            "method": r.method,
            "ms": round(r.ms, 3),
            "× batched": round(r.ms / batched[(r.heads, r.kv_heads)], 2),
            **({} if r.peak_mb is None else {"peak GPU MB": round(r.peak_mb, 1)}),
            "weights MB": round(r.weights_mb, 1),
            "K+V MB": round(r.kv_mb, 2),
        }
        for r in rows
    ]
    widgets.fixed_table(table, {"ms": 3, "× batched": 2, "peak GPU MB": 1, "weights MB": 1, "K+V MB": 2})
    loop16 = next(r.ms for r in rows if r.heads == 16 and r.method != "batched") / batched[(16, 16)]
    where = "GPU" if dev.type == "cuda" else "CPU"
    note = (
        f"Measured just now on this {where}, median of {REPEATS} passes: the loop over 16 heads took "
        f"{loop16:.1f}× the batched time."
    )
    if dev.type != "cuda":
        note += (
            " On a CPU the gap is small: its few cores work through the heads one after another either way, and "
            "a loop only adds Python's overhead per head. " + GPU_FIGURES
        )
    st.caption(note)
    widgets.csv_button(
        "Measurements (CSV)",
        lambda: widgets.rows_csv(table),
        "attnviz_heads_cost.csv",
        "hc.cost_csv",
    )


def heads_word(n: int) -> str:
    """ "1 head", "8 heads": a head count as the page says it."""
    return f"{n} head" if n == 1 else f"{n} heads"


def best_words(models: list[dict]) -> list[str]:
    """The head counts that reach the highest held-out accuracy, as the guesses say them."""
    top = max(m["accuracy"] for m in models)
    return [heads_word(m["heads"]) for m in models if m["accuracy"] == top]


def best_text(models: list[dict]) -> str:
    """The highest held-out accuracy, and every head count that reaches it (a tie is said to be one)."""
    top = max(m["accuracy"] for m in models)
    best = sorted(m["heads"] for m in models if m["accuracy"] == top)
    if len(best) == 1:
        return f"Highest held-out accuracy: {heads_word(best[0])}, {top:.2%} of digits right."
    counts = ", ".join(map(str, best[:-1])) + f" and {best[-1]}"
    return f"A tie: {counts} heads all reach the highest held-out accuracy, {top:.2%} of digits right."


def render() -> None:
    """Draw the page."""
    inputs = controls.current()
    st.header("One head vs many")
    st.markdown(
        "Tiny models on attnviz's from-scratch engine, the same in every way but the number of heads: 1, 2, 4 or 8 "
        "heads sharing d_model = 32 (so each head gets 32, 16, 8 or 4 dimensions). Each was trained by "
        "`python -m attnviz train-heads` (about a minute on two cores, seeded) on one task:"
    )
    task = state.bound(
        st.radio,
        "Task",
        head_models.TASKS,
        url="task",
        key="hc.task",
        default="mirror-sum",
        valid=lambda v: v in head_models.TASKS,
        horizontal=True,
        format_func=lambda t: f"{t}: {TASK_TEXT[t]}",
    )
    guess = widgets.predict(
        f"Which head count learns {task} best in the same number of steps?",
        [heads_word(c) for c in head_models.HEAD_COUNTS],
        f"hc.predict.{task}",
    )
    if guess is None:
        st.caption("Make a guess and press Reveal to see the training curves and accuracies.")
    else:
        models = cache.get(api.held_out_work(task))["models"]
        widgets.verdict(f"You guessed {escape.md(guess)}. {best_text(models)}", guess in best_words(models))
        curves_section(task, inputs.style)
    st.subheader("Where each model's heads look")
    attention_section(task, inputs.style, revealed=guess is not None)
    st.subheader("The cost of heads")
    cost_section(inputs.style)
