"""Widgets and drawing for the Pronoun resolution page."""

from __future__ import annotations

import re

import numpy as np
import plotly.graph_objects as go
import streamlit as st
import torch

from attnviz.analysis import pronouns
from attnviz.analysis.pronouns import PronounCase
from attnviz.figures import interactive
from attnviz.ui import cache, state
from attnviz.ui.controls import Inputs

OWN = "Type your own…"
CAVEAT = (
    "**A caveat worth teaching.** Attention weights are not explanations (Jain & Wallace 2019; Wiegreffe & "
    "Pinter 2019). A head that attends from *it* to *animal* shows where that head reads from, not what the "
    "model decided: the value vectors, the other heads, the feed-forward layers and every later layer all "
    "take part. Read these maps as evidence about heads, never as the model's reasoning."
)


def _label(i: int) -> str:
    c = pronouns.LESSON[i]
    return f"{c.text}  →  {c.pronoun} = {c.answer}"


def pick_case() -> tuple[PronounCase | None, int | None]:
    options = [*range(len(pronouns.LESSON)), OWN]
    state.restore("pr.case", "case", 0, lambda v: v in range(len(pronouns.LESSON)))
    choice = st.selectbox("Case", options, key="pr.case", format_func=lambda o: o if o == OWN else _label(o))
    if choice != OWN:
        state.remember("case", choice)
        return pronouns.LESSON[choice], choice
    text = st.text_input("Your sentence", "The dog chased the cat because it was bored.", key="pr.own_text")
    words = list(dict.fromkeys(re.findall(r"\w+(?:'\w+)?", text)))
    if len(words) < 3:
        st.warning("Type a sentence with a pronoun and at least two nouns.")
        return None, None
    a, b, c = st.columns(3)
    default_pron = next((w for w in words if w.lower() in ("it", "he", "she", "they", "him", "her")), words[-1])
    pron = a.selectbox("Pronoun", words, index=words.index(default_pron), key="pr.own_pron")
    cands = b.multiselect("Candidates", [w for w in words if w != pron], max_selections=4, key="pr.own_cands")
    if len(cands) < 2:
        st.info("Pick at least two candidates the pronoun could refer to.")
        return None, None
    answer = c.selectbox("Right answer", cands, key="pr.own_answer")
    try:
        case = PronounCase(text, pron, tuple(cands), answer)
        pronouns.locate(case)
    except ValueError as err:
        st.warning(str(err))
        return None, None
    return case, None


@st.cache_data(show_spinner=False, max_entries=128)
def _score(model: str, engine: str, case: PronounCase) -> pronouns.CaseResult:
    return pronouns.score_case(cache.engine(model, engine), case)


def score_or_stop(inputs: Inputs, case: PronounCase) -> pronouns.CaseResult:
    cache.load_engine_or_stop(inputs.model, inputs.engine)
    try:
        return _score(inputs.model, inputs.engine, case)
    except ValueError as err:
        st.warning(str(err))
        st.stop()


def predict_then_reveal(case: PronounCase, res: pronouns.CaseResult, key: str) -> bool:
    st.markdown(
        f"**Predict first.** {res.scores.shape[0] * res.scores.shape[1]} heads each look from *{case.pronoun}* "
        "at the candidates. Which word do you think most of them look at most?"
    )
    guess = st.radio("Your guess", case.candidates, index=None, key=f"{key}.guess", horizontal=True)
    revealed = st.session_state.get(f"{key}.revealed", False)
    if st.button("Reveal", key=f"{key}.reveal", disabled=guess is None):
        st.session_state[f"{key}.revealed"] = revealed = True
    if revealed and guess is not None:
        votes = torch.bincount(res.scores.argmax(-1).flatten(), minlength=len(case.candidates))
        tally = ", ".join(f"{int(v)} pick **{c}**" for c, v in zip(case.candidates, votes, strict=True))
        verdict = "You called it." if guess == res.predicted else f"Most heads looked at {res.predicted} instead."
        right = "the right answer" if res.correct else f"not the right answer ({case.answer})"
        st.success(f"{tally}. Most heads pick **{res.predicted}**, {right}. {verdict}")
    return revealed


def _best(res: pronouns.CaseResult) -> tuple[int, int]:
    share = res.scores[..., res.case.candidates.index(res.case.answer)]  # (L, H)
    flat = int(share.argmax())
    return flat // share.shape[1], flat % share.shape[1]


def draw_case(inputs: Inputs, case: PronounCase, res: pronouns.CaseResult) -> None:
    answer = case.candidates.index(case.answer)
    share = res.scores[..., answer].numpy()  # (L, H)
    picks = [
        [case.candidates[int(res.scores[layer, h].argmax())] for h in range(share.shape[1])]
        for layer in range(share.shape[0])
    ]
    right = sum(p == case.answer for row in picks for p in row)
    st.markdown(
        f"**{right} of {share.size} heads** attend from *{case.pronoun}* more to **{case.answer}** than to "
        f"any other candidate. Maximum Attention Score vote: **{res.predicted}** "
        f"({'right' if res.correct else 'wrong'})."
    )
    st.caption(
        f"Each cell: the share of the pronoun's attention on '{case.answer}', and the candidate that head picks."
    )
    st.plotly_chart(interactive.stat_grid(share, picks, f"share on {case.answer}", style=inputs.style), key="pr.grid")
    order = np.argsort(-share, axis=None)[:5]
    st.markdown(
        "Best heads: "
        + ", ".join(
            f"layer {i // share.shape[1] + 1} head {i % share.shape[1] + 1} ({share.flat[i]:.2f})" for i in order
        )
    )
    layer, head = _best(res)
    result = next(iter(cache.attention(inputs.model, inputs.engine, case.text).values()))
    offsets = cache.engine(inputs.model, inputs.engine).encode(case.text).offsets
    pron_span, _ = pronouns.locate(case)
    q = pronouns.pieces(offsets, pron_span)
    row = result.weights[layer, head, q].mean(0).numpy()
    title = f"where '{case.pronoun}' looks in the best head (layer {layer + 1}, head {head + 1})"
    st.plotly_chart(interactive.bars(row, result.source_tokens, title, style=inputs.style), key="pr.bars")


def draw_pair(inputs: Inputs, index: int) -> None:
    a, b = pronouns.LESSON[index - index % 2], pronouns.LESSON[index - index % 2 + 1]
    ra, rb = score_or_stop(inputs, a), score_or_stop(inputs, b)
    pick_a = ra.scores.argmax(-1)  # (L, H) candidate index per head
    pick_b = rb.scores.argmax(-1)
    ia, ib = a.candidates.index(a.answer), b.candidates.index(b.answer)
    flips = (pick_a == ia) & (pick_b == ib)
    category = np.where(flips, 2, np.where(pick_a == pick_b, 1, 0))  # 2 flips right, 1 never moves, 0 other
    names = {2: "flips with the word", 1: "same pick both times", 0: "flips the wrong way"}
    text = [[names[int(c)] for c in row] for row in category]
    st.markdown(f"*{a.text}* → **{a.answer}**  \n*{b.text}* → **{b.answer}**")
    fig = go.Figure(
        go.Heatmap(
            z=category,
            text=text,
            colorscale=[[0, "#d95f02"], [0.5, "#dddddd"], [1, "#1b9e77"]],
            zmin=0,
            zmax=2,
            showscale=False,
            hovertemplate="layer %{y}, head %{x}: %{text}<extra></extra>",
            x=[f"H{h + 1}" for h in range(category.shape[1])],
            y=[f"L{layer + 1}" for layer in range(category.shape[0])],
            xgap=2,
            ygap=2,
        )
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(
        height=360,
        title="Green: the head's choice flips with the one word, both times right. "
        "Grey: it picks the same word both times.",
        font={"size": inputs.style.font_size},
    )
    st.plotly_chart(fig, key="pr.pair")
    st.markdown(f"**{int(flips.sum())} of {flips.numel()} heads** follow the word that flips the answer.")


def draw_benchmark(inputs: Inputs) -> None:
    st.markdown(
        "Score many cases at once with the Maximum Attention Score (Klein & Nabi 2019): every head votes "
        "for the candidate it attends to most from the pronoun; most votes wins."
    )
    upload = st.file_uploader(
        "A Winograd XML (WSCollection.xml format) or a JSONL file; empty: the built-in set",
        type=["xml", "jsonl"],
        key="pr.upload",
    )
    limit = st.number_input("At most this many cases", 1, 2000, 273, key="pr.limit")
    if not st.button("Run the benchmark", key="pr.run", type="primary"):
        if "pr.bench" not in st.session_state:
            return
    else:
        try:
            if upload is None:
                cases = pronouns.LESSON
            elif upload.name.lower().endswith(".xml"):
                cases = pronouns.read_winograd_xml(upload.getvalue())
            else:
                cases = pronouns.read_jsonl(upload.getvalue().decode("utf-8").splitlines())
        except (ValueError, SyntaxError, UnicodeDecodeError) as err:
            st.error(f"That file could not be read: {err}")
            return
        cases = cases[: int(limit)]
        engine = cache.load_engine_or_stop(inputs.model, inputs.engine)
        bar = st.progress(0.0, text=f"Scoring {len(cases)} cases…")
        bench = pronouns.evaluate(engine, cases, lambda i: bar.progress(i / len(cases), text=f"{i}/{len(cases)} cases"))
        bar.empty()
        st.session_state["pr.bench"] = bench
    bench = st.session_state["pr.bench"]
    if not bench.n:
        st.warning("No case could be scored.")
        return
    layer, head, best = bench.best_head
    a, b, c = st.columns(3)
    a.metric(
        "Maximum Attention Score accuracy", f"{bench.accuracy:.1%}", f"{bench.accuracy - bench.chance:+.1%} vs chance"
    )
    b.metric("Chance", f"{bench.chance:.1%}")
    c.metric(f"Best single head (L{layer + 1} H{head + 1})", f"{best:.1%}")
    st.caption(
        f"{bench.n} cases scored, {len(bench.skipped)} skipped (a word not found in the text). Published, "
        f"bert-base-uncased with the same method: about {pronouns.PUBLISHED['WSC273']:.0%} on WSC273 and "
        f"{pronouns.PUBLISHED['PDP-60']:.0%} on PDP-60."
    )
    acc = bench.per_head.numpy()
    labels = [[f"{acc[i, j]:.0%}" for j in range(acc.shape[1])] for i in range(acc.shape[0])]
    st.plotly_chart(interactive.stat_grid(acc, labels, "accuracy", style=inputs.style), key="pr.bench.grid")
