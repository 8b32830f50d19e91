"""The Induction heads page: a repeated random sequence, the drop in loss on its second copy, and the heads that
look back to the token after the current token's earlier occurrence (ARENA's lesson, on a real LLM, by clicking)."""

from __future__ import annotations

import math

import numpy as np
import streamlit as st

from attnviz import api, escape
from attnviz.api import head_stats, induction_scores
from attnviz.figures import interactive, lesson_charts, stat_charts
from attnviz.result import AttentionResult, percent
from attnviz.tokens import TokenAxis
from attnviz.ui import cache, controls, state, widgets

INTRO = (
    "An **induction head** finishes patterns it has seen: after `… A B … A`, it looks back at the token that came "
    "after the earlier `A` (that is, `B`) and helps predict `B` again (Olsson et al. 2022). The test, as ARENA's "
    "course runs it: a sequence of random tokens, then the same tokens again. Nothing predicts the first copy; "
    "a model that copies predicts the second."
)
COPIES = 0.5  # nats: a second copy's mean loss this much lower is the model copying; within it, "about the same"
SCORES = (
    "**Scores.** Each head's attention A (queries × keys) on a sequence `[start] r₁ … rₙ r₁ … rₙ` (the start "
    "token where the tokenizer names one), averaged over "
    f"{induction_scores.BATCH} sequences drawn from the seed (ARENA averages a batch of 10); ± is the standard "
    "deviation over them.  \n"
    "*Induction*: the mean of the diagonal n − 1 tokens back, A[q, q − n + 1] over every query it has, exactly as "
    "ARENA's detector (chapter 1.2: `pattern.diagonal(-n + 1).mean()`). For a query of the second copy that key is "
    "the token after its first occurrence. The diagonal also holds the first copy's last two queries, and the "
    "first of them looks at the start token itself (an attention sink: many heads put most of their attention "
    "there), so a head that only watches the start token still gets 1/(n + 2) of a point from that entry.  \n"
    "*Prefix matching*: the same attention over the second copy's n queries only (Olsson et al.'s definition; "
    'ARENA\'s chapter 1.4 `get_attn_scores(…, "induction")`).  \n'
    "*Duplicate token*: attention from each of the second copy's n queries to the earlier occurrence of its own "
    "token, A[q, q − n], as ARENA's chapter 1.4 `get_attn_scores(…, \"duplicate\")`; ARENA's sequences have no "
    "start token, ours keep it (for the induction score), which moves every position by one and changes nothing "
    "else in the formula.  \n"
    f"The Model overview labels a head *induction* above {induction_scores.THRESHOLD:.1f}."
)


def _ranked(run: induction_scores.Induction, k: int) -> list[str]:
    """The k best heads as people read them, each with its spread, and a ranking inside the noise said so."""
    best, sd = run.best(k), run.spread("induction")
    out = []
    for i, (layer, head, score) in enumerate(best):
        text = f"layer {layer + 1}, head {head + 1}: {score:.2f} ± {float(sd[layer, head]):.2f}"
        if i and not run.separated(best[i - 1][:2], (layer, head)):
            text += " (not told apart from the head above: their gap is within the noise of the sequences)"
        out.append(text)
    return out


def _labels(values: np.ndarray, name: str, threshold: float) -> list[list[str]]:
    return [[name if v > threshold else "" for v in row] for row in values]


def _result(run: induction_scores.Induction, axis: TokenAxis) -> AttentionResult:
    return AttentionResult(run.patterns, axis, axis, "causal", run.model, sinks=run.sinks)


def sequence_controls() -> tuple[int, int]:
    """The random sequences' length (n tokens in each copy) and seed, kept in the URL."""
    a, b = st.columns(2)
    n = state.bound(
        a.slider,
        "Random tokens in each copy (n)",
        10,
        100,
        url="length",
        key="ind.n",
        default=50,
        valid=lambda v: 10 <= v <= 100,
    )
    seed = state.bound(
        b.number_input,
        f"Seed (of the {induction_scores.BATCH} sequences)",
        0,
        9999,
        url="seed",
        key="ind.seed",
        default=0,
        valid=lambda v: 0 <= v <= 9999,
    )
    return n, int(seed)


def loss_section(run: induction_scores.Induction, n: int, eng: api.InterveningEngine, style) -> None:
    """The loss of each token on both copies: the drop on the second copy is induction at work."""
    start = run.offset + n - 1  # the loss index of the first prediction of the second copy
    loss = run.loss.tolist()
    st.plotly_chart(
        lesson_charts.loss_lines(
            {"first copy": (0, loss[:start]), "second copy": (start, loss[start:])},
            "Loss of each token",  # short: a title this long ran 80 px past a phone's screen; the rest is below
            style=style,
        ),
        key="ind.loss",
    )
    uniform = float(np.log(len(eng.tokenizer.hf)))
    st.caption(
        f"Each token's loss is its prediction from the tokens before it, the mean of {run.batch} sequences. "
        "Loss is cross-entropy in nats: −ln of the probability the model gave the right token (0 = certain and "
        f"right; ln of the vocabulary's size, about {uniform:.1f}, = a uniform guess)."
        + worse_than_uniform(run.first_copy_loss, uniform)
    )


def worse_than_uniform(first: float, uniform: float) -> str:
    """A sentence for a first copy whose mean loss is above a uniform guess's (Gemma 3: 16.3 nats against 12.5), which
    reads as a mistake without one; nothing where it is not."""
    if first <= uniform:
        return ""
    return (
        f" The first copy's mean, {first:.1f}, is above that: on random tokens the model does worse than a uniform "
        f"guess (the right token's probability, as a geometric mean, is 1 in {math.exp(first):,.0f}): it spends its "
        "probability on other tokens, as a model trained on text expects text."
    )


def render() -> None:
    """Draw the page: a guess, then the loss, the scores, the best heads and the previous-token heads."""
    inputs = controls.current()
    st.header("Induction heads")
    st.markdown(INTRO)
    eng = cache.decoder_or_stop(inputs.model, inputs.backend)
    n, seed = sequence_controls()
    guess = widgets.predict(
        "On the second copy, the model's loss per token will…",
        ["go down", "stay about the same", "go up"],
        f"ind.q.{inputs.model}.{inputs.backend}",  # another model: a question asked again
    )
    with st.spinner(f"Reading {induction_scores.BATCH} sequences of {2 * n} random tokens through the model…"):
        run = cache.get(api.induction_work(eng, n, seed))
    axis = eng.tokenizer.plain_axis(run.ids)  # the tokens as text, their raw pieces in the hover
    if guess is None:
        st.caption("Make a guess and press Reveal to see the loss and the heads.")
        return
    first, second = run.first_copy_loss, run.second_copy_loss
    went = "go down" if second < first - COPIES else "go up" if second > first + COPIES else "stay about the same"
    said = {"go down": "went down", "go up": "went up", "stay about the same": f"moved less than {COPIES} nats"}
    widgets.verdict(
        f"You guessed {escape.md(guess)}. Mean loss on the first copy {first:.2f} nats, on the second "
        f"{second:.2f} nats (averaged over {run.batch} sequences): it {said[went]}, so the model "
        f"{'copies' if went == 'go down' else 'does not copy much'}. "
        f"{'You called it.' if guess == went else 'Not what you guessed.'}",
        guess == went,
    )
    loss_section(run, n, eng, inputs.style)
    scores_section(run, inputs.style)
    best_section(run, n, axis, inputs.style)


def scores_section(run: induction_scores.Induction, style) -> None:
    """Every head's induction, prefix-matching and duplicate-token scores."""
    st.markdown(SCORES)
    ind = run.induction.numpy()
    with widgets.stat_box("ind"):
        st.plotly_chart(
            stat_charts.stat_grid(
                ind, _labels(ind, "induction", induction_scores.THRESHOLD), "induction score", style=style
            ),
            key="ind.grid",
            on_select="ignore",
        )
    c1, c2 = widgets.two_places(style.projector, "ind")
    for col, values, name in ((c1, run.prefix.numpy(), "prefix matching"), (c2, run.duplicate.numpy(), "duplicate")):
        col.plotly_chart(
            stat_charts.stat_grid(values, _labels(values, "", 1.0), name, style=style, show_values=False),
            key=f"ind.{name}",
            on_select="ignore",
        )


def best_section(run: induction_scores.Induction, n: int, axis: TokenAxis, style) -> None:
    """The five best heads ranked (with when two can be told apart), one of them drawn, the previous-token heads
    that can feed them, and every score as CSV."""
    st.subheader("The best heads")
    st.markdown("By mean induction score:  \n" + "  \n".join(f"{i + 1}. {t}" for i, t in enumerate(_ranked(run, 5))))
    st.caption(
        "Two heads are told apart when their gap is more than twice the standard error of their paired difference "
        f"over the {run.batch} sequences; one random sequence alone can reverse a closer pair."
    )
    st.caption(
        f"The offset diagonal, n − 1 = {n - 1} tokens back from each query of the second copy, is the mark "
        "(the map is the first of the sequences)."
    )
    result = _result(run, axis)
    best = run.best(5)
    names = [f"layer {layer + 1}, head {head + 1} (induction {score:.2f})" for layer, head, score in best]
    pick = st.selectbox("Head", range(len(best)), format_func=names.__getitem__, key="ind.head")
    layer, head, score = best[pick]
    st.plotly_chart(
        interactive.head_map(result, layer, head, style=style, note=f"induction {score:.2f}"), key="ind.map"
    )
    prev = result.stats()["prev"].numpy()  # the Model overview's statistic, on the first sequence
    previous_section(run, prev)
    scores_csv(run, prev)


def previous_section(run: induction_scores.Induction, prev: np.ndarray) -> None:
    """The previous-token heads (Olsson et al.'s mechanism), before and after the first induction layer."""
    st.subheader("Previous-token heads")
    found = [
        (lay, h, prev[lay, h])
        for lay in range(prev.shape[0])
        for h in range(prev.shape[1])
        if prev[lay, h] > head_stats.SHARE_THRESHOLD
    ]
    above = (run.induction > induction_scores.THRESHOLD).nonzero().tolist()  # [[layer, head], ...]
    first_induction = min(layer for layer, _ in above) if above else None

    def listed(heads) -> str:
        return ", ".join(f"layer {lay + 1} head {h + 1} ({percent(float(p))})" for lay, h, p in heads[:12]) or "none"

    text = (
        "In the mechanism Olsson et al. describe, an induction head reads which token came before each key from a "
        "**previous-token head** in an earlier layer (the Model overview's *previous-token* label: more than "
        f"{head_stats.SHARE_THRESHOLD:.0%} of its attention on the token before). On this sequence, "
    )
    if first_induction is None:
        text += f"the heads above that share: {listed(found)}."
    else:
        before = [f for f in found if f[0] < first_induction]
        after = [f for f in found if f[0] >= first_induction]
        text += (
            f"before layer {first_induction + 1} (the first layer with an induction head above "
            f"{induction_scores.THRESHOLD:.1f}), where they can feed every induction head: {listed(before)}; "
            f"from layer {first_induction + 1} on, where they can feed only the induction heads of later "
            f"layers: {listed(after)}."
        )
    st.markdown(text)


def scores_csv(run: induction_scores.Induction, prev: np.ndarray) -> None:
    """Every head's scores and their spread over the sequences, as CSV."""
    ind = run.induction.numpy()
    sd = {name: run.spread(name) for name in induction_scores.SCORES}
    rows = [
        {
            "layer": lay + 1,
            "head": h + 1,
            "induction": round(float(ind[lay, h]), 4),
            "induction_sd": round(float(sd["induction"][lay, h]), 4),
            "prefix": round(float(run.prefix[lay, h]), 4),
            "prefix_sd": round(float(sd["prefix"][lay, h]), 4),
            "duplicate": round(float(run.duplicate[lay, h]), 4),
            "duplicate_sd": round(float(sd["duplicate"][lay, h]), 4),
            "previous": round(float(prev[lay, h]), 4),
        }
        for lay in range(ind.shape[0])
        for h in range(ind.shape[1])
    ]
    widgets.csv_button("Scores (CSV)", lambda: widgets.rows_csv(rows), "attnviz_induction.csv", "ind.csv")
