"""The Start here page: a first lesson in seven short steps, on the pair "...because it was too tired / too wide".

A student alone, or a class led by its teacher (the step is in the URL, so a follower's page takes the teacher's),
reads the sentence, then one head large with the pronoun's row outlined, then where that row looks as bars, then the
same head after one word changes, then every head of the layer, then answers a question read off a map, and ends
with where to go next. The head shown is picked on the two sentences it is shown on (the head whose "it" moves most
from one noun to the other with the word), and the page says so. It reads the sidebar's model where that model reads
the sentence as one text and its "it" can see the word that changes (BERT); the date model does not read it as one
text, and a decoder's "it" comes before the word (every head's scores equal in both sentences): on those the lesson
says why and shows BERT.
"""

from __future__ import annotations

import streamlit as st

from attnviz import api, escape
from attnviz.api import pronoun_cases, pronoun_scores
from attnviz.figures import interactive, stat_charts
from attnviz.result import Attention, percent
from attnviz.ui import cache, controls, routes, state, widgets
from attnviz.ui.controls import Inputs

TIRED, WIDE = pronoun_cases.LESSON[0], pronoun_cases.LESSON[1]  # it = animal, it = street
STEPS = {
    1: "The sentence",
    2: "One head, one row",
    3: "Where it looks",
    4: "Change one word",
    5: "Every head",
    6: "Your turn",
    7: "Where next",
}
BLIND = (
    "{model} reads left to right: its “it” comes before “tired” and “wide”, so where its “it” looks is the same in "
    "both sentences (checked: every head's, to 1e-5) and this lesson's word could not move it. The lesson shows the "
    "bundled BERT, which reads the sentence both ways; the Pronoun resolution page shows {model} on the same pair."
)
QUESTION_OPTIONS = 4  # words offered in step 6: the row's heaviest, in the sentence's order


def _result(inputs: Inputs, case: pronoun_cases.PronounCase) -> tuple[Attention, bool]:
    """The case's attention on the sidebar's model, or on BERT where that model does not read it as one text; and
    whether it fell back."""
    results = cache.attention_or_stop(inputs.model, inputs.backend, case.text)
    main = results.main
    if main.kind in ("self", "causal"):
        try:
            pronoun_scores.scores(main, case, "vote")
            return main, False
        except ValueError:
            pass
    return cache.attention_or_stop(api.DEFAULT_MODEL, "hf", case.text).main, True


def lesson_results(inputs: Inputs):
    """Both sentences' attention and the pronoun's scores (L, H, 2) on the sidebar's model; on BERT, with a notice,
    where that model does not read a sentence as one text or (a decoder) its "it" cannot see the word that changes."""
    tired, fell_back = _result(inputs, TIRED)
    wide, _ = _result(inputs, WIDE)
    scores_tired = pronoun_scores.scores(tired, TIRED, "vote")
    scores_wide = pronoun_scores.scores(wide, WIDE, "vote")
    if fell_back:
        st.info("This lesson reads one sentence at a time: it shows the bundled BERT, not the sidebar's model.")
    elif pronoun_scores.same_scores(scores_tired, scores_wide):  # "it" comes before the word: no head's "it" moves
        st.info(BLIND.format(model=cache.named(inputs.model)))
        tired, wide = (cache.attention_or_stop(api.DEFAULT_MODEL, "hf", c.text).main for c in (TIRED, WIDE))
        scores_tired = pronoun_scores.scores(tired, TIRED, "vote")
        scores_wide = pronoun_scores.scores(wide, WIDE, "vote")
    return tired, wide, scores_tired, scores_wide


def moving_head(tired, wide) -> tuple[int, int]:
    """The head (layer, head, 0-based) whose pronoun moves most with the word: its share on animal over street in
    the first sentence plus street over animal in the second (scores (L, H, 2): pronoun -> animal, street)."""
    follows = (tired[..., 0] - tired[..., 1]) + (wide[..., 1] - wide[..., 0])  # (L, H)
    best = int(follows.flatten().argmax())
    return best // follows.shape[1], best % follows.shape[1]


def pronoun_at(result: Attention, case: pronoun_cases.PronounCase) -> int:
    """The pronoun's row (its first piece) in the result's tokens."""
    return pronoun_cases.pronoun_piece(result.source, pronoun_cases.locate(case).pronoun)


def row_outlined(result: Attention, layer: int, head: int, row: int, inputs: Inputs):
    """One head large (figures.interactive.head_map) with one row outlined."""
    fig = interactive.head_map(result, layer, head, style=inputs.style)  # type: ignore[arg-type]
    n_keys = len(result.source_tokens)
    return fig.add_shape(
        type="rect",
        xref="x",
        yref="y",
        x0=-0.5,
        x1=n_keys - 0.5,
        y0=row - 0.5,
        y1=row + 0.5,
        line={"color": "#d62728", "width": 4 if inputs.style.projector else 3},
    )


def shares(result: Attention, case: pronoun_cases.PronounCase, layer: int, head: int) -> dict[str, float]:
    """What the pronoun gives each candidate in one head (the largest over the candidate's pieces, as the
    Pronoun page's vote reads it)."""
    s = pronoun_scores.scores(result, case, "vote")[layer, head]
    return {c.strip(): float(v) for c, v in zip(case.candidates, s, strict=True)}


def _bars(result: Attention, case: pronoun_cases.PronounCase, layer: int, head: int, inputs: Inputs, key: str) -> None:
    row = pronoun_scores.pronoun_row(result, case, layer, head).numpy()
    title = f"Where “{case.pronoun}” looks: layer {layer + 1}, head {head + 1}"
    st.plotly_chart(stat_charts.bars(row, result.source_tokens, title, style=inputs.style), key=key)


def question(result: Attention, case: pronoun_cases.PronounCase, layer: int, head: int) -> tuple[list[int], int]:
    """Step 6's question on one head: the QUESTION_OPTIONS keys the pronoun's row weighs most, in the sentence's
    order, and the right answer (the heaviest; ties: the first)."""
    row = pronoun_scores.pronoun_row(result, case, layer, head)
    top = row.argsort(descending=True, stable=True)[:QUESTION_OPTIONS].tolist()
    return sorted(top), top[0]


def _step_buttons(step: int) -> None:
    def go(to: int) -> None:
        st.session_state["start.step"] = to

    a, b, _ = st.columns([1, 1, 3])
    a.button("Back", key="start.back", disabled=step == 1, on_click=go, args=(step - 1,), use_container_width=True)
    b.button(
        "Next",
        key="start.next",
        type="primary",
        disabled=step == len(STEPS),
        on_click=go,
        args=(step + 1,),
        use_container_width=True,
    )


def render() -> None:
    """Draw the page."""
    inputs = controls.current()
    st.header("Start here: what does “it” look at?")
    step = state.bound(
        st.segmented_control,
        "Step",
        list(STEPS),
        url="step",
        key="start.step",
        default=1,
        valid=lambda v: v in STEPS,
        format_func=lambda i: f"{i}. {STEPS[i]}",
    )
    step = step if step in STEPS else 1  # a step clicked off again: the first
    tired, wide, scores_tired, scores_wide = lesson_results(inputs)
    layer, head = moving_head(scores_tired, scores_wide)
    picked = (
        f"Layer {layer + 1}, head {head + 1} is the head of {tired.n_layers * tired.n_heads} whose “it” moves most "
        "from one noun to the other when the last word changes, picked on these two sentences (so it is the best "
        "case, not a typical head)."
    )
    {1: _sentence, 2: _one_head, 3: _where, 4: _change, 5: _every_head, 6: _your_turn, 7: _next}[step](
        inputs, tired, wide, layer, head, picked
    )
    _step_buttons(step)


def _sentence(inputs, tired, wide, layer, head, picked) -> None:
    st.markdown(f"### {escape.md(TIRED.text)}")
    st.markdown(
        "A model reads this one token at a time, and each token can *look at* the others: that is attention. "
        "Before looking at any model: what does **it** mean here?"
    )
    guess = st.radio("“it” means", ["the animal", "the street"], index=None, key="start.guess", horizontal=True)
    if guess == "the animal":
        st.success("Yes: an animal gets tired, a street does not. Next: where does the model's “it” look?")
    elif guess:
        st.warning("Read it again: what can be tired? (Change “tired” to “wide” and the answer changes: step 4.)")


def _one_head(inputs, tired, wide, layer, head, picked) -> None:
    row = pronoun_at(tired, TIRED)
    st.plotly_chart(row_outlined(tired, layer, head, row, inputs), key="start.map")
    st.markdown(
        "This is one **head**: one of the model's many ways of looking. Each **row** is a token looking at every "
        "token (the columns); the brighter a cell, the more it looks there, and each row adds up to 1. The red "
        "outline is the row of **it**."
    )
    st.caption(escape.md(picked))


def _where(inputs, tired, wide, layer, head, picked) -> None:
    _bars(tired, TIRED, layer, head, inputs, "start.bars")
    got = shares(tired, TIRED, layer, head)
    st.markdown(
        f"The outlined row as bars. In this head “it” gives **{percent(got['animal'])}** of its attention to *animal* "
        f"and **{percent(got['street'])}** to *street*."
    )
    st.caption(escape.md(picked))


def _change(inputs, tired, wide, layer, head, picked) -> None:
    st.markdown(f"### {escape.md(WIDE.text)}")
    _bars(wide, WIDE, layer, head, inputs, "start.bars_wide")
    before, after = shares(tired, TIRED, layer, head), shares(wide, WIDE, layer, head)
    st.markdown(
        f"One word changed, and the same head's “it” now gives **{percent(after['street'])}** to *street* "
        f"({percent(before['street'])} before) and **{percent(after['animal'])}** to *animal* "
        f"({percent(before['animal'])} before). "
        "A street can be wide; an animal, here, cannot."
    )
    st.caption(escape.md(picked))


def _every_head(inputs, tired, wide, layer, head, picked) -> None:
    with widgets.grid_box("start"):
        st.plotly_chart(
            interactive.head_grid(tired, layer, style=inputs.style, pick=False),  # type: ignore[arg-type]
            key="start.grid",
        )
    counts = pronoun_scores.vote_counts(pronoun_scores.scores(tired, TIRED, "vote")).tolist()
    st.markdown(
        f"Every head of layer {layer + 1}, each looking its own way: some look at the token before, some at the "
        f"first token, a few at the nouns. Over all {tired.n_layers * tired.n_heads} heads, {counts[0]} look "
        f"more at *animal* than at *street* from “it”, and {counts[1]} the other way."
    )


def _your_turn(inputs, tired, wide, layer, head, picked) -> None:
    other = (head + 1) % tired.n_heads  # the next head of the same layer: one the lesson has not shown
    row = pronoun_at(tired, TIRED)
    st.plotly_chart(row_outlined(tired, layer, other, row, inputs), key="start.quiz_map")
    options, right = question(tired, TIRED, layer, other)
    words = {i: f"{tired.source_tokens[i]} (token {i + 1})" for i in options}
    pick = st.radio(
        f"In layer {layer + 1}, head {other + 1}: which token does “it” (the outlined row) look at most?",
        options,
        index=None,
        key=f"start.quiz.{layer}.{other}",
        format_func=words.get,
    )
    weights = pronoun_scores.pronoun_row(tired, TIRED, layer, other)
    if pick == right:
        rest = (
            " Many heads rest their attention on a marker like this one when nothing else in the sentence fits "
            "what they look for (an attention sink)."
            if tired.source.special[right]
            else ""
        )
        st.success(f"Right: {escape.md(words[right])}, with {percent(float(weights[right]))} of the row.{rest}")
    elif pick is not None:
        st.warning(
            f"Not quite: {escape.md(words[pick])} has {percent(float(weights[pick]))}; look for the brightest cell of "
            "the outlined row."
        )


def _next(inputs, tired, wide, layer, head, picked) -> None:
    st.markdown(
        "You have read a head the way researchers do. A caution worth keeping: a head that looks from *it* to "
        "*animal* shows where that head reads from, not what the model decided; the other heads and layers all "
        "take part. Where next:"
    )
    for stem, label in (
        ("heads", "Heads: type your own sentence and open any head"),
        ("pronouns", "Pronoun resolution: how many heads get it right, on many sentences"),
        ("overview", "Model overview: what every head does, in one grid"),
    ):
        st.page_link(routes.page_path(stem), label=label)
