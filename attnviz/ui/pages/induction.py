"""The Induction heads page: a repeated random sequence, the drop in loss on its second copy, and the heads that
look back to the token after the current token's earlier occurrence (ARENA's lesson, on a real LLM, by clicking)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz import escape, service
from attnviz.analysis.head_stats import SHARE_THRESHOLD
from attnviz.figures import interactive, lesson_charts
from attnviz.interventions import induction_scores
from attnviz.result import AttentionResult
from attnviz.tokens import TokenAxis
from attnviz.ui import cache, controls, state, widgets

INTRO = (
    "An **induction head** finishes patterns it has seen: after `… A B … A`, it looks back at the token that came "
    "after the earlier `A` (that is, `B`) and helps predict `B` again (Olsson et al. 2022). The test, as ARENA's "
    "course runs it: a sequence of random tokens, then the same tokens again. Nothing predicts the first copy; "
    "a model that copies predicts the second."
)
SCORES = (
    "**Scores** (each head's attention on this sequence, n random tokens a copy): *induction* is the mean of the "
    "diagonal n − 1 tokens back, A[q, q − n + 1] over every query it has, exactly as ARENA's detector computes it "
    "(`torch.diagonal(pattern, offset=-n+1).mean()`; the diagonal also holds the first copy's last query or two); "
    "*prefix matching* averages the same attention over the second copy's queries only (Olsson et al.'s "
    "definition); *duplicate token* is the diagonal n back (attention to the earlier occurrence of the same token). "
    f"The Model overview labels a head *induction* above {induction_scores.THRESHOLD:.1f}."
)


def _labels(values: np.ndarray, name: str, threshold: float) -> list[list[str]]:
    return [[name if v > threshold else "" for v in row] for row in values]


def _result(run: induction_scores.Induction, axis: TokenAxis) -> AttentionResult:
    return AttentionResult(run.patterns, axis, axis, "causal", run.model)


def render() -> None:
    """Draw the page."""
    inputs = controls.current()
    st.header("Induction heads")
    st.markdown(INTRO)
    eng = cache.decoder_or_stop(inputs.model, inputs.backend)
    state.restore("ind.n", "length", 50, lambda v: 10 <= v <= 100)
    state.restore("ind.seed", "seed", 0, lambda v: 0 <= v <= 9999)
    a, b = st.columns(2)
    n = a.slider("Random tokens in each copy (n)", 10, 100, key="ind.n")
    seed = b.number_input("Seed", 0, 9999, key="ind.seed")
    state.remember("length", n)
    state.remember("seed", seed)
    guess = widgets.predict(
        "On the second copy, the model's loss per token will…", ["go down", "stay about the same", "go up"], "ind.q"
    )
    key = ("induction", eng.name, eng.backend, n, seed)
    with st.spinner(f"Reading {2 * n} random tokens through the model…"):
        run = service.kept(key, lambda: induction_scores.run(eng, n, int(seed)))
    axis = eng.tokenizer.plain_axis(run.ids)  # the tokens as text, their raw pieces in the hover
    if guess is None:
        st.caption("Make a guess and press Reveal to see the loss and the heads.")
        return
    first, second = run.first_copy_loss, run.second_copy_loss
    st.success(
        f"You guessed {escape.md(guess)}. Mean loss on the first copy {first:.2f} nats, on the second "
        f"{second:.2f} nats: the model {'copies' if second < first - 0.5 else 'does not copy much'}."
    )
    start = run.offset + n - 1  # the loss index of the first prediction of the second copy
    positions = np.arange(1, len(run.ids))  # the loss at index i is the token at position i + 1 (1-based: i + 2)
    series = {
        "first copy": (positions[:start].tolist(), run.loss[:start].tolist()),
        "second copy": (positions[start:].tolist(), run.loss[start:].tolist()),
    }
    st.plotly_chart(
        lesson_charts.lines(series, "Loss of each token, predicted from the ones before it", "position of the token "
                            "predicted", "cross-entropy (nats)", style=inputs.style),
        key="ind.loss",
    )  # fmt: skip
    st.markdown(SCORES)
    ind = run.induction.numpy()
    st.plotly_chart(
        interactive.stat_grid(ind, _labels(ind, "induction", induction_scores.THRESHOLD), "induction score",
                              style=inputs.style),
        key="ind.grid", on_select="ignore",
    )  # fmt: skip
    c1, c2 = st.columns(2)
    for col, values, name in ((c1, run.prefix.numpy(), "prefix matching"), (c2, run.duplicate.numpy(), "duplicate")):
        col.plotly_chart(
            interactive.stat_grid(values, _labels(values, "", 1.0), name, style=inputs.style, show_values=False),
            key=f"ind.{name}", on_select="ignore",
        )  # fmt: skip
    st.subheader("The best heads' maps")
    st.caption(f"The offset diagonal, n − 1 = {n - 1} tokens back from each query of the second copy, is the mark.")
    result = _result(run, axis)
    best = run.best(5)
    names = [f"layer {layer + 1}, head {head + 1} (induction {score:.2f})" for layer, head, score in best]
    pick = st.selectbox("Head", range(len(best)), format_func=names.__getitem__, key="ind.head")
    layer, head, score = best[pick]
    st.plotly_chart(
        interactive.head_map(result, layer, head, style=inputs.style, note=f"induction {score:.2f}"), key="ind.map"
    )
    st.subheader("The previous-token heads that induction needs")
    prev = result.stats()["prev"].numpy()  # the Model overview's statistic, on this sequence
    found = [(lay, h, prev[lay, h]) for lay in range(prev.shape[0]) for h in range(prev.shape[1])
             if prev[lay, h] > SHARE_THRESHOLD]  # fmt: skip
    st.markdown(
        "An induction head needs to know which token came before each key: a **previous-token head** in an earlier "
        "layer writes that in (the Model overview's *previous-token* label: more than "
        f"{SHARE_THRESHOLD:.0%} of its attention on the token before). On this sequence: "
        + (", ".join(f"layer {lay + 1} head {h + 1} ({p:.0%})" for lay, h, p in found[:12]) or "none above it")
        + "."
    )
    rows = [{"layer": lay + 1, "head": h + 1, "induction": round(float(ind[lay, h]), 4),
             "prefix": round(float(run.prefix[lay, h]), 4), "duplicate": round(float(run.duplicate[lay, h]), 4),
             "previous": round(float(prev[lay, h]), 4)}
            for lay in range(ind.shape[0]) for h in range(ind.shape[1])]  # fmt: skip
    widgets.csv_button("Scores (CSV)", lambda: widgets.rows_csv(rows), "attnviz_induction.csv", "ind.csv")
