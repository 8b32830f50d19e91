"""The Pronoun resolution page: does any head link "it" to the right noun? Per head, on minimal pairs, on Winograd."""

from __future__ import annotations

import re
import zlib

import streamlit as st

from attnviz import api, escape
from attnviz.api import pronoun_cases, pronoun_files, pronoun_scores
from attnviz.figures import stat_charts
from attnviz.result import head_name, percent
from attnviz.ui import cache, controls, state, widgets
from attnviz.ui.controls import Inputs
from attnviz.ui.halt import halt

OWN = "Type your own…"
MAX_BENCHMARK_CASES = 2000  # the most cases one run of the benchmark scores (stated on the page)
CAUSAL_METRIC = (
    "This model is causal: a candidate written before the pronoun cannot attend to it, so the Maximum Attention "
    "Score (attention from each candidate to the pronoun) is not defined here. The head vote reads the other "
    "direction, from the pronoun back to the candidates it has already seen, and applies."
)
PRONOUNS = ("it", "he", "she", "they", "him", "her")
BEST_SHOWN = 5
CAVEAT = (
    "**A caveat worth teaching.** Whether attention weights explain a model's decisions is debated: Jain & "
    "Wallace (2019, *Attention is not Explanation*) found weights that can be changed without changing the "
    "output; Wiegreffe & Pinter (2019, *Attention is not not Explanation*) dispute how far that holds. Either way, "
    "a head that attends from *it* to *animal* shows where that head reads from, not what the model decided: the "
    "value vectors, the other heads, the feed-forward layers and every later layer all take part. Read these "
    "maps as evidence about heads, never as the model's reasoning."
)


def _label(i: int) -> str:
    """A lesson case as its menu lists it: its sentence (the question quotes it whole, where a phone's box cuts it)."""
    return pronoun_cases.LESSON[i].text


def pick_case() -> tuple[pronoun_cases.PronounCase | None, int | None]:
    """A built-in case (and its index) or one the person types; (None, None) while theirs is incomplete."""
    options = [*range(len(pronoun_cases.LESSON)), OWN]
    state.restore("pr.case", "case", 0, lambda v: v == OWN or v in range(len(pronoun_cases.LESSON)))
    choice = st.selectbox("Case", options, key="pr.case", format_func=lambda o: o if o == OWN else _label(o))
    if choice != OWN:
        state.remember("case", choice)
        return pronoun_cases.LESSON[choice], choice
    text = st.text_input("Your sentence", "The dog chased the cat because it was bored.", key="pr.own_text")
    words = list(dict.fromkeys(re.findall(r"\w+(?:'\w+)?", text)))
    if len(words) < 3:
        st.warning("Type a sentence with a pronoun and at least two nouns.")
        return None, None
    row = widgets.control_row("pr-own")  # in three columns, at 900 px, the chosen candidates scrolled out of sight
    default_pron = next((w for w in words if w.lower() in PRONOUNS), words[-1])
    narrow, wide = widgets.control_px(0.6), widgets.control_px(1.5)
    pron = row.selectbox("Pronoun", words, index=words.index(default_pron), key="pr.own_pron", width=narrow)
    others = [w for w in words if w != pron]
    cands = row.multiselect("Candidates", others, max_selections=4, key="pr.own_cands", width=wide)
    if len(cands) < 2:
        st.info("Pick at least two candidates the pronoun could refer to.")
        return None, None
    answer = row.selectbox("Right answer", cands, key="pr.own_answer", width=narrow)
    try:
        case = pronoun_cases.PronounCase(text, pron, tuple(cands), answer)
        pronoun_cases.locate(case)
    except ValueError as err:
        st.warning(escape.md(err))
        return None, None
    return case, None


def score_or_stop(
    inputs: Inputs, case: pronoun_cases.PronounCase, method: pronoun_scores.Method = "vote"
) -> pronoun_scores.CaseResult:
    """The case scored on the cached attention of its text, or a message and the page stops."""
    results = cache.attention_or_stop(inputs.model, inputs.backend, case.text)
    try:
        return pronoun_scores.score_result(results.main, case, method)
    except ValueError as err:
        st.warning(escape.md(err))
        halt()


def predict_then_reveal(case: pronoun_cases.PronounCase, res: pronoun_scores.CaseResult, key: str) -> bool:
    """Ask for a guess first; reveal the heads' votes once one is made. True once revealed. Each case on each model is
    a question of its own (`key` names the model; the case is added): a minimal pair's twin, with the same candidates,
    is guessed again, and so is the same case on another model."""
    guess = widgets.predict(
        f"“{escape.md(case.text)}” {res.scores.shape[0] * res.scores.shape[1]} heads each look from "
        f"*{escape.md(case.pronoun)}* at the candidates. Which word do you think most of them look at most?",
        case.candidates,
        f"{key}.{zlib.crc32(repr(case).encode()):08x}",
        format_func=escape.md,
    )
    if guess is not None:
        votes = pronoun_scores.vote_counts(res.scores)
        tally = ", ".join(f"{int(v)} pick **{escape.md(c)}**" for c, v in zip(case.candidates, votes, strict=True))
        right = "the right answer" if res.correct else f"not the right answer ({escape.md(case.answer)})"
        predicted = escape.md(res.predicted)
        if res.tie:
            widgets.verdict(
                f"{tally}: the heads are split evenly, so neither guess wins. By their total attention the pick is "
                f"**{predicted}**, {right}.",
                None,
            )
        else:
            called = guess == res.predicted
            verdict = "You called it." if called else f"Not what you guessed ({escape.md(guess)})."
            widgets.verdict(f"{tally}. Most heads pick **{predicted}**, {right}. {verdict}", called)
    return guess is not None


def draw_case(inputs: Inputs, case: pronoun_cases.PronounCase, res: pronoun_scores.CaseResult) -> None:
    """Each head's attention on the right answer and its pick; the best heads; where the pronoun looks in the best."""
    share = res.scores[..., res.answer_index]  # (L, H)
    picks = pronoun_scores.head_picks(res.scores)
    names = [[case.candidates[int(c)] for c in row] for row in picks]
    right = int((picks == res.answer_index).sum())
    st.markdown(
        f"**{right} of {share.numel()} heads** attend from *{escape.md(case.pronoun)}* more to "
        f"**{escape.md(case.answer)}** than to any other candidate. The heads' vote: "
        f"**{escape.md(res.predicted)}** ({'right' if res.correct else 'wrong'})."
    )
    st.caption(
        f"Each cell: the attention from {escape.quoted(case.pronoun)} to {escape.quoted(case.answer)} (its largest "
        "on any of the word's pieces), and the candidate that head picks. The Benchmark tab also scores the other "
        "direction, from the candidates to the pronoun: the Maximum Attention Score of Klein & Nabi (2019)."
    )
    grid = stat_charts.stat_grid(share.numpy(), names, f"on {case.answer}", style=inputs.style)
    with widgets.stat_box("pr"):
        st.plotly_chart(grid, key="pr.grid")
    best = pronoun_scores.best_heads(share, BEST_SHOWN)
    st.markdown(
        f"The heads that attend most to **{escape.md(case.answer)}** here: "
        + ", ".join(f"layer {lay + 1} head {h + 1} ({v:.2f})" for lay, h, v in best)
        + ". Picked on this sentence, so the best case, not a typical head: the Benchmark tab picks a head on half "
        "the cases and scores it on the other half."
    )
    layer, head, _ = best[0]
    state.show_head(layer, head)
    result = cache.attention(inputs.model, inputs.backend, case.text).main
    row = pronoun_scores.pronoun_row(result, case, layer, head).numpy()
    title = f"where '{case.pronoun}' looks in the best head (layer {layer + 1}, head {head + 1})"
    st.plotly_chart(stat_charts.bars(row, result.source_tokens, title, style=inputs.style), key="pr.bars")


def draw_pair(inputs: Inputs, index: int) -> None:
    """Both cases of a minimal pair: which heads flip their pick with the one word."""
    a, b = pronoun_cases.LESSON[index - index % 2], pronoun_cases.LESSON[index - index % 2 + 1]
    ra, rb = score_or_stop(inputs, a), score_or_stop(inputs, b)
    categories = pronoun_scores.flip_categories(ra, rb)
    st.markdown(
        f"*{escape.md(a.text)}* → **{escape.md(a.answer)}**  \n*{escape.md(b.text)}* → **{escape.md(b.answer)}**"
    )
    causal = cache.load_engine_or_stop(inputs.model, inputs.backend).kinds == ("causal",)
    if causal and pronoun_cases.differ_after_pronoun(a, b) and pronoun_scores.same_scores(ra.scores, rb.scores):
        st.info(
            f"This model reads left to right: when it reaches *{escape.md(a.pronoun)}*, the word that tells the two "
            f"sentences apart has not come yet, so every head's attention from *{escape.md(a.pronoun)}* is the same "
            "in both (checked here: equal to 1e-5), and no head can flip. A decoder can only use that word later, "
            "after the pronoun. BERT reads the whole sentence both ways: its heads can flip."
        )
        st.button(
            "Show this pair with BERT", key="pr.pair.bert", on_click=state.choose_model, args=(api.DEFAULT_MODEL,)
        )
        return
    # the key in words beside the chart, its title short: a one-line title of this length ran 850 px past a phone
    st.caption(
        "Green: the head's choice flips with the one word, both times right. Grey: it picks the same word both "
        "times. Orange: its choice changes, but not to the right word both times."
    )
    title = "How each head's pick moves"
    fig = stat_charts.flip_grid(categories.numpy(), pronoun_scores.FLIP_NAMES, title, style=inputs.style)
    st.plotly_chart(fig, key="pr.pair")
    st.markdown(
        f"**{int((categories == 2).sum())} of {categories.numel()} heads** follow the word that flips the answer."
    )


def _benchmark(
    model: str, backend: api.Backend, cases: tuple[pronoun_cases.PronounCase, ...], method: pronoun_scores.Method
):
    """Every case scored, kept by the cases themselves (a file uploaded again is not scored again) in the heavy
    memo; admitted as heavy work. Each case runs without the memo: 2,000 cases never push a class's sentences out.
    Leaving the page stops it (the next update of its bar ends the run)."""
    eng = cache.load_engine_or_stop(model, backend)

    bar = st.empty()

    def progress(i: int) -> None:
        bar.progress(i / len(cases), text=f"{i}/{len(cases)} cases")

    got = cache.get(api.benchmark_work(eng, cases, method, progress))
    bar.empty()
    return got


def _read_upload(upload) -> list[pronoun_cases.PronounCase]:
    """The cases of an uploaded file; a ValueError saying what is wrong with it."""
    data = upload.getvalue()
    if upload.name.lower().endswith(".xml"):
        return pronoun_files.read_winograd_xml(data)
    try:
        return pronoun_files.read_jsonl(data.decode("utf-8").splitlines())
    except UnicodeDecodeError as err:
        raise ValueError("the file is not UTF-8 text") from err


def draw_benchmark(inputs: Inputs) -> None:
    """Score a set of cases (built-in or uploaded) with the method chosen, beside chance and two baselines."""
    st.markdown(
        "Score many cases at once. **Maximum Attention Score** (Klein & Nabi 2019; docs/pronouns.md lists where "
        "attnviz's "
        "choice of tokens differs from the authors' code): "
        "the attention from each candidate to the pronoun; each head gives its largest value to its top "
        "candidate, and the candidate with the largest sum wins. **Head vote**: the attention from the pronoun "
        "to each candidate; each head votes for its top candidate, most votes wins."
    )
    causal = cache.load_engine_or_stop(inputs.model, inputs.backend).kinds == ("causal",)
    methods = ("vote",) if causal else pronoun_scores.METHODS
    if causal:
        st.info(CAUSAL_METRIC)
    if st.session_state.get("pr.method") not in methods:
        st.session_state["pr.method"] = methods[0]
    a, b = st.columns(2)
    method = a.radio("Method", methods, format_func=pronoun_scores.METHOD_NAMES.get, key="pr.method", horizontal=True)
    limit = b.number_input(
        f"Cases to score (at most {MAX_BENCHMARK_CASES:,} a run)", 1, MAX_BENCHMARK_CASES, 273, key="pr.limit"
    )
    upload = st.file_uploader(
        "A Winograd XML (WSCollection.xml format) or a JSONL file; empty: the built-in set",
        type=["xml", "jsonl"],
        key="pr.upload",
    )
    if st.button("Run the benchmark", key="pr.run", type="primary"):
        try:
            cases = pronoun_cases.LESSON if upload is None else _read_upload(upload)
        except ValueError as err:
            st.error(f"That file could not be read: {escape.md(err)}")
            return
        cache.load_engine_or_stop(inputs.model, inputs.backend)
        try:
            st.session_state["pr.bench"] = _benchmark(inputs.model, inputs.backend, tuple(cases[: int(limit)]), method)
        except ValueError as err:  # the Maximum Attention Score on a causal model
            st.warning(escape.md(err))
            return
    if "pr.bench" not in st.session_state:
        return
    bench, (held_out, picked), permuted = st.session_state["pr.bench"]
    if not bench.n:
        st.warning(f"None of the {len(bench.skipped)} cases could be scored: {escape.md(bench.skipped[0][1])}.")
        return
    draw_scores(inputs, bench, held_out, picked, permuted)
    undecided = bench.undecided_at_pronoun() if causal else 0
    if undecided:
        st.info(
            f"{undecided} of these {bench.n} cases read word for word like a twin with another answer up to the "
            "pronoun: what decides between them comes after it, which this model's pronoun has not read yet. Its "
            "vote is the same on both twins, so at most one of the two is right."
        )


def draw_scores(inputs: Inputs, bench: pronoun_scores.Benchmark, held_out: float, picked, permuted: float) -> None:
    """The benchmark's accuracy, its baselines and each head's accuracy."""
    layer, head, best = bench.best_head
    row = widgets.control_row("pr-scores", "top")  # each figure as wide as its words: four columns cut them at 900 px
    name = pronoun_scores.METHOD_NAMES[bench.method]
    row.metric(name, f"{bench.accuracy:.1%}", f"{bench.accuracy - bench.chance:+.1%} vs chance", width="content")
    row.metric("Chance", f"{bench.chance:.1%}", width="content")
    row.metric(
        "Best head, held out",
        f"{held_out:.1%}",
        help="The best head picked on one half of the cases and scored on the other, and the reverse, averaged "
        "(a schema and its twins stay together: neighbouring cases with the same candidates or texts 80% alike). "
        "No choice is made on the cases it is scored on, so compare it with chance. The heads picked: "
        f"{', '.join(head_name(lay, h) for lay, h in picked)}.",
        width="content",
    )
    row.metric(
        "Best head, random answers",
        f"{permuted:.1%}",
        help=f"What the best of {bench.per_head.numel()} heads reaches when every answer is drawn at random "
        f"(the mean of {pronoun_scores.PERMUTATIONS:,} runs): the yardstick for the best head picked on these very "
        "cases; a best head below this has found nothing.",
        width="content",
    )
    skipped = "; ".join(f"{n} because the {escape.md(why)}" for why, n in bench.skip_reasons().items())
    st.caption(
        f"{bench.n} cases scored, {len(bench.skipped)} skipped{': ' + skipped if skipped else ''}. "
        f"{bench.ties} predictions won a tie; {bench.head_ties:,} heads gave their top score to two candidates or more "
        f"(the first in the file's order took it). The best head picked on these very cases, {head_name(layer, head)}, "
        f"is right on {best:.1%} of them: compare it with the random-answer baseline, not with chance. "
        "Published, bert-base-uncased with the Maximum Attention Score: about "
        f"{pronoun_scores.PUBLISHED['WSC273']:.0%} on WSC273 and {pronoun_scores.PUBLISHED['PDP-60']:.0%} on PDP-60 "
        "(the authors encode a sentence pair split at "
        "the pronoun; attnviz one segment)."
    )
    acc = bench.per_head.numpy()
    labels = [[percent(float(acc[i, j])) for j in range(acc.shape[1])] for i in range(acc.shape[0])]
    st.caption("Each head's own accuracy on these cases (its top candidate against the answer).")
    grid = stat_charts.stat_grid(acc, labels, "accuracy", style=inputs.style, show_values=False)
    with widgets.stat_box("pr-bench"):
        st.plotly_chart(grid, key="pr.bench.grid")
    stem = f"attnviz_pronouns_{bench.method}"
    heads = [
        {"layer": i + 1, "head": j + 1, "accuracy": float(acc[i, j])}
        for i in range(acc.shape[0])
        for j in range(acc.shape[1])
    ]
    with widgets.control_row("pr-bench-csv"):
        widgets.csv_button("Every case (CSV)", lambda: widgets.rows_csv(bench.rows()), f"{stem}_cases.csv", "pr.csv")
        widgets.csv_button("Each head's accuracy (CSV)", lambda: widgets.rows_csv(heads), f"{stem}_heads.csv", "pr.h")


def render() -> None:
    """Draw the page."""
    inputs = controls.current()
    st.header("Pronoun resolution")
    lesson, benchmark = st.tabs(["Lesson", "Benchmark"])
    with lesson:
        case, index = pick_case()
        if case is not None:
            result = score_or_stop(inputs, case)
            if predict_then_reveal(case, result, f"pr.predict.{inputs.model}.{inputs.backend}"):
                draw_case(inputs, case, result)
                if index is not None:
                    st.subheader("The minimal pair: one word flips the answer")
                    draw_pair(inputs, index)
    with benchmark:
        draw_benchmark(inputs)
    st.markdown(CAVEAT)
