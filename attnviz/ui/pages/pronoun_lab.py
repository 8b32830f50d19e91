"""The Pronoun resolution page: does any head link "it" to the right noun? Per head, on minimal pairs, on Winograd."""

from __future__ import annotations

import re

import streamlit as st

from attnviz.analysis import pronouns
from attnviz.analysis.pronouns import CaseResult, PronounCase
from attnviz.engines.base import Backend
from attnviz.figures import interactive
from attnviz.ui import cache, controls, state
from attnviz.ui.controls import Inputs

OWN = "Type your own…"
PRONOUNS = ("it", "he", "she", "they", "him", "her")
BEST_SHOWN = 5
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
    """A built-in case (and its index) or one the person types; (None, None) while theirs is incomplete."""
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
    default_pron = next((w for w in words if w.lower() in PRONOUNS), words[-1])
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


def score_or_stop(inputs: Inputs, case: PronounCase) -> CaseResult:
    """The case scored on the cached attention of its text, or a message and the page stops."""
    results = cache.attention_or_stop(inputs.model, inputs.backend, case.text)
    try:
        return pronouns.score_result(next(iter(results.values())), case)
    except ValueError as err:
        st.warning(str(err))
        st.stop()


def predict_then_reveal(case: PronounCase, res: CaseResult, key: str) -> bool:
    """Ask for a guess first; reveal the heads' votes once one is made. True once revealed."""
    st.markdown(
        f"**Predict first.** {res.scores.shape[0] * res.scores.shape[1]} heads each look from *{case.pronoun}* "
        "at the candidates. Which word do you think most of them look at most?"
    )
    guess = st.radio("Your guess", case.candidates, index=None, key=f"{key}.guess", horizontal=True)
    revealed = st.session_state.get(f"{key}.revealed", False)
    if st.button("Reveal", key=f"{key}.reveal", disabled=guess is None):
        st.session_state[f"{key}.revealed"] = revealed = True
    if revealed and guess is not None:
        votes = pronouns.vote_counts(res.scores)
        tally = ", ".join(f"{int(v)} pick **{c}**" for c, v in zip(case.candidates, votes, strict=True))
        verdict = "You called it." if guess == res.predicted else f"Most heads looked at {res.predicted} instead."
        right = "the right answer" if res.correct else f"not the right answer ({case.answer})"
        st.success(f"{tally}. Most heads pick **{res.predicted}**, {right}. {verdict}")
    return revealed


def draw_case(inputs: Inputs, case: PronounCase, res: CaseResult) -> None:
    """Each head's share on the right answer and its pick; the best heads; where the pronoun looks in the best."""
    share = res.scores[..., case.candidates.index(case.answer)]  # (L, H)
    picks = pronouns.head_picks(res.scores)
    names = [[case.candidates[int(c)] for c in row] for row in picks]
    right = int((picks == case.candidates.index(case.answer)).sum())
    st.markdown(
        f"**{right} of {share.numel()} heads** attend from *{case.pronoun}* more to **{case.answer}** than to "
        f"any other candidate. Maximum Attention Score vote: **{res.predicted}** "
        f"({'right' if res.correct else 'wrong'})."
    )
    st.caption(
        f"Each cell: the share of the pronoun's attention on '{case.answer}', and the candidate that head picks."
    )
    grid = interactive.stat_grid(share.numpy(), names, f"share on {case.answer}", style=inputs.style)
    st.plotly_chart(grid, key="pr.grid")
    best = pronouns.best_heads(share, BEST_SHOWN)
    st.markdown("Best heads: " + ", ".join(f"layer {lay + 1} head {h + 1} ({v:.2f})" for lay, h, v in best))
    layer, head, _ = best[0]
    result = next(iter(cache.attention(inputs.model, inputs.backend, case.text).values()))
    row = pronouns.pronoun_row(result, case, layer, head).numpy()
    title = f"where '{case.pronoun}' looks in the best head (layer {layer + 1}, head {head + 1})"
    st.plotly_chart(interactive.bars(row, result.source_tokens, title, style=inputs.style), key="pr.bars")


def draw_pair(inputs: Inputs, index: int) -> None:
    """Both cases of a minimal pair: which heads flip their pick with the one word."""
    a, b = pronouns.LESSON[index - index % 2], pronouns.LESSON[index - index % 2 + 1]
    ra, rb = score_or_stop(inputs, a), score_or_stop(inputs, b)
    categories = pronouns.flip_categories(ra, rb)
    st.markdown(f"*{a.text}* → **{a.answer}**  \n*{b.text}* → **{b.answer}**")
    title = (
        "Green: the head's choice flips with the one word, both times right. Grey: it picks the same word both times."
    )
    fig = interactive.flip_grid(categories.numpy(), pronouns.FLIP_NAMES, title, style=inputs.style)
    st.plotly_chart(fig, key="pr.pair")
    st.markdown(
        f"**{int((categories == 2).sum())} of {categories.numel()} heads** follow the word that flips the answer."
    )


@st.cache_data(show_spinner=False, max_entries=8)
def _benchmark(model: str, backend: Backend, cases: tuple[PronounCase, ...]) -> pronouns.Benchmark:
    bar = st.progress(0.0, text=f"Scoring {len(cases)} cases…")

    def score(case: PronounCase) -> CaseResult:
        return pronouns.score_result(next(iter(cache.attention(model, backend, case.text).values())), case)

    bench = pronouns.evaluate_with(score, cases, lambda i: bar.progress(i / len(cases), text=f"{i}/{len(cases)} cases"))
    bar.empty()
    return bench


def draw_benchmark(inputs: Inputs) -> None:
    """Score a set of cases (built-in or uploaded) with the Maximum Attention Score."""
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
    if st.button("Run the benchmark", key="pr.run", type="primary"):
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
        cache.load_engine_or_stop(inputs.model, inputs.backend)
        st.session_state["pr.bench"] = _benchmark(inputs.model, inputs.backend, tuple(cases[: int(limit)]))
    bench = st.session_state.get("pr.bench")
    if bench is None:
        return
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


def render() -> None:
    """Draw the page."""
    inputs = controls.current()
    st.header("Pronoun resolution")
    lesson, benchmark = st.tabs(["Lesson", "Benchmark"])
    with lesson:
        case, index = pick_case()
        if case is not None:
            result = score_or_stop(inputs, case)
            if predict_then_reveal(case, result, "pr.predict"):
                draw_case(inputs, case, result)
                if index is not None:
                    st.subheader("The minimal pair: one word flips the answer")
                    draw_pair(inputs, index)
    with benchmark:
        draw_benchmark(inputs)
    st.markdown(CAVEAT)
