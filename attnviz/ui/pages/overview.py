"""The Model overview page: head statistics and labels, rollout and flow, where a token draws from."""

from __future__ import annotations

import unicodedata

import streamlit as st

from attnviz import api, escape
from attnviz.api import head_stats, induction_scores, rollout, runs
from attnviz.figures import interactive, panel_maps, stat_charts
from attnviz.figures.panel_maps import Panel
from attnviz.result import Attention, AttentionResult, percent
from attnviz.ui import cache, controls, state, widgets
from attnviz.ui.controls import Inputs
from attnviz.ui.halt import halt
from attnviz.ui.progress import TimedProgress

STAT_NAMES = head_stats.NAMES
INDUCTION_N = 50
INDUCTION_NAME = "induction score (on repeated random sequences, not this text)"


def _induction(inputs: Inputs):
    """(L, H) induction scores for a decoder attnviz can run with hooks (the Induction heads page's default run);
    None for other models."""
    eng = cache.engine(inputs.model, inputs.backend)
    if not runs.can_intervene(eng):
        return None
    with st.spinner(f"Scoring induction heads on {induction_scores.BATCH} repeated random sequences…"):
        return cache.get(api.induction_work(eng, INDUCTION_N, 0)).induction  # the Induction page's run


MAX_LISTED = 24  # punctuation tokens named in the caption; a long text has hundreds


def self_result_or_stop(inputs: Inputs) -> Attention:
    """The self (or causal) attention of the sidebar's text; a message if the model has neither."""
    results = cache.attention_or_stop(inputs.model, inputs.backend, inputs.text, long_ok=True)
    result = results.get("self") or results.get("causal")
    if result is None:
        st.warning("This page needs self-attention.")
        halt()
    return result


def _corpus_stats(model: str, excludes: str) -> tuple[dict, float] | None:
    """Statistics averaged over the built-in sentences, read from a corpus run of them (api.sentences_work: kept
    for every session), and the uniform-attention entropy averaged over them; None (with a message) for a model a
    corpus run does not cover."""
    try:
        with st.spinner(f"Averaging over the {len(head_stats.CORPUS)} built-in sentences (a corpus run)…"):
            return cache.get(api.sentences_work(model, excludes))
    except ValueError as err:
        st.info(escape.md(err))
        return None


def stats_of(result: Attention, excludes: str, long: bool) -> dict:
    """The statistics: kept from the first pass, or (another choice of what confidence leaves out) a new pass, with a
    progress bar for a long text."""
    if long and not result.has_stats(excludes):
        bar = TimedProgress({api.ANALYSING: 1.0})
        result.stats(bar.phase(api.ANALYSING), confidence_excludes=excludes)
        bar.done()
    return result.stats(confidence_excludes=excludes)


def stats_section(inputs: Inputs, result: Attention) -> None:
    """The layer x head grid coloured by a statistic, clickable, and the table of every head."""
    shown = head_stats.shown_stats(result)  # a decoder: no [CLS]; a text without [SEP]: none
    names = {k: v for k, v in STAT_NAMES.items() if k in shown}
    induction = _induction(inputs)
    if induction is not None:
        names["induction"] = INDUCTION_NAME
    if result.sinks:
        names["sink"] = STAT_NAMES["sink"]
    stat, corpus, excludes = stat_controls(names)
    averaged = _corpus_stats(inputs.model, excludes) if corpus else None
    if averaged is not None:
        stats, uniform = averaged
    else:
        long = cache.request_is_long(inputs.model, inputs.backend, inputs.text)
        stats, uniform = stats_of(result, excludes, long), head_stats.uniform_entropy(result)
        stats = head_stats.with_sink(stats, result)  # gpt-oss's learned sinks: a statistic of their own
    unlabelled = averaged is not None and result.sinks  # a corpus run measures no learned sink's share
    if unlabelled:
        st.info(SINKS_UNMEASURED)
        stat = "entropy" if stat == "sink" else stat
    labels = head_stats.labels(stats, uniform, result.kind)
    labels = [[""] * len(row) for row in labels] if unlabelled else labels
    if induction is not None:  # a decoder's induction heads, from the repeated random sequence (not this text)
        stats = {**stats, "induction": induction}
        above = induction > induction_scores.THRESHOLD  # (L, H)
        labels = [["induction" if above[i, h] else lab for h, lab in enumerate(row)] for i, row in enumerate(labels)]
    st.caption(labels_caption(result, uniform, averaged is not None, induction is not None))
    with widgets.stat_box("ov"):
        event = st.plotly_chart(
            stat_charts.stat_grid(stats[stat].numpy(), labels, head_stats.SHORT.get(stat, stat), style=inputs.style),
            key="ov.grid",
            on_select="rerun",
            selection_mode="points",
        )
    points = event.get("selection", {}).get("points", []) if event else []
    if points:
        widgets.open_head(*stat_charts.head_at(points[0]))
    row = widgets.control_row("ov-open")
    layer = row.number_input("Layer", 1, result.n_layers, 1, key="ov.open_layer", width=widgets.control_px(0.5))
    head = row.number_input("Head", 1, result.n_heads, 1, key="ov.open_head", width=widgets.control_px(0.5))
    if row.button("Open this head on the Heads page", key="ov.open"):
        widgets.open_head(layer, head)
    rows = head_stats.table(stats, labels, shown)
    wide = {"label": st.column_config.TextColumn("label", width="medium")}  # "previous-token" whole, not cut
    places = {k: 4 for k in rows[0] if k not in ("layer", "head", "label")}  # every statistic: 0.0470, not 0.047
    widgets.fixed_table(rows, places, columns=wide, key="ov.table")


SINKS_UNMEASURED = (
    "This model's learned sinks take a share of every row that a corpus run does not measure: averaged over the "
    "built-in sentences, its heads are not labelled and the sink's share is not drawn (turn the average off to see "
    "both on the typed text)."
)


def stat_controls(names: dict[str, str]) -> tuple[str, bool, str]:
    """What colours the grid, whether to average over the built-in sentences, and which keys confidence leaves
    out; each kept in the URL."""
    row = widgets.control_row("ov")
    stat = state.bound(
        row.selectbox,
        "Colour by",
        list(names),
        url="stat",
        key="ov.stat",
        default="entropy",
        valid=lambda v: v in names,
        format_func=lambda s: names[s],
        width=widgets.control_px(),
    )
    corpus = state.bound(
        row.toggle,
        f"Corpus average ({len(head_stats.CORPUS)} sentences)",
        url="corpus",
        key="ov.corpus",
        default=False,
        help="Average every statistic over the built-in sentences instead of the typed text: a corpus run over them "
        "(the Corpus page lists it), each sentence measured as this page measures a text.",
    )
    excludes = state.bound(
        row.selectbox,
        "Confidence leaves out",
        list(head_stats.CONFIDENCE_EXCLUDES),
        url="confidence",
        key="ov.conf",
        default="end",
        valid=lambda v: v in head_stats.CONFIDENCE_EXCLUDES,
        format_func=lambda e: head_stats.CONFIDENCE_EXCLUDES[e],
        width=widgets.control_px(),
        help="Which keys each row's largest weight may not be: Voita et al. (2019) leave out the end token.",
    )
    return stat, bool(corpus), excludes


def _punctuation_mark(token: str) -> str:
    """A punctuation token as the caption lists it: quoted, and a single character named too (an apostrophe between
    quotes, ‘'’, is hard to read on a projector)."""
    mark = token.strip()
    name = unicodedata.name(mark, "") if len(mark) == 1 else ""
    return escape.quoted(token) + (f" ({name.lower()})" if name else "")


def labels_caption(result: Attention, uniform: float, averaged: bool, induction: bool) -> str:
    """How the labels are given: the thresholds, what a decoder's sink changes, what counts as punctuation."""
    seen = "i + 1 keys for query i, from the third (causal)" if result.kind == "causal" else "every key"
    marks = head_stats.punctuation_tokens(result.source)
    punct = ", ".join(_punctuation_mark(t) for t in marks[:MAX_LISTED]) or "none in this text"
    if len(marks) > MAX_LISTED:
        punct += f" and {len(marks) - MAX_LISTED:,} more"
    shown = head_stats.shown_stats(result)  # a decoder is never next-token, nor [SEP] where its text has none
    *some, last = [label for k, label in head_stats.share_labels(result.kind).items() if k in shown]
    named = f"{', '.join(some)} or {last}"
    sink = (
        " A decoder's first token is where its heads park attention (a sink), not a [CLS]. A decoder's head is judged "
        "on the attention it gives to the other tokens (each share divided by what the sink leaves), and is a sink "
        f"when the sink takes more than {head_stats.SHARE_THRESHOLD:.0%} and nothing else names it, or less than "
        f"{head_stats.SINK_REST:.0%} is left. Its first two queries count in no statistic: the first sees only itself, "
        "the second's previous token is the first."
        + (
            " This model also has a learned sink in every head, a logit in each row's softmax with no token: the "
            "share it takes is a statistic of its own (typed text), counts as the sink's in the labels, and each "
            "row's weights over the tokens sum to the rest (less than 1)."
            if result.sinks
            else ""
        )
        if result.kind == "causal"
        else ""
    )
    return (
        f"Labels: a head is {named} when more than {head_stats.SHARE_THRESHOLD:.0%} of its attention goes there; "
        f"broad when its entropy is at least {head_stats.BROAD_THRESHOLD:.0%} of uniform attention's over the keys "
        f"each query can see ({seen}: "
        f"{uniform:.2f} nats{', averaged over the corpus sentences' if averaged else ''}); "
        f"other otherwise.{sink} "
        f"Punctuation counts tokens whose characters are all Unicode punctuation: {punct}."
        + (
            f" A decoder's head is induction when its induction score is above {induction_scores.THRESHOLD:.1f} on "
            f"{induction_scores.BATCH} repeated random sequences ({INDUCTION_N} tokens twice, seed 0; the Induction "
            "heads page), whatever the "
            "text; that label comes first."
            if induction
            else ""
        )
    )


def rollout_section(inputs: Inputs, result: AttentionResult) -> None:
    """Raw attention, rollout and (on demand) flow up to a layer; where one token draws from."""
    n = result.n_layers
    layer = state.bound(st.slider, "Layer", 1, n, url="layer", key="ov.layer", default=n, valid=lambda v: 1 <= v <= n)
    layer -= 1
    raw = rollout.residual_attention(result)[layer]  # (T, T)
    rolled = rollout.rollout(result)[layer]
    toks = result.target_tokens
    # A decoder's future is masked (grey) on all three; past a sliding window only in the layer's own attention: the
    # residual stream carries older tokens on through the layers, so rollout and flow reach beyond any one window.
    future = interactive.masked_cells(len(toks), len(toks)) if result.kind == "causal" else None
    panels = [
        Panel(
            f"raw attention, layer {layer + 1}\n(heads averaged, + residual)",
            raw.numpy(),
            toks,
            toks,
            masked=interactive.layer_masked(result, layer),
        ),
        Panel(f"rollout up to layer {layer + 1}", rolled.numpy(), toks, toks, masked=future),
    ]
    want_flow = state.bound(
        st.toggle,
        "Also compute attention flow (a few seconds of CPU per text)",
        url="flow",
        key="ov.flow",
        default=False,
    )
    if want_flow:  # on demand: a classroom of new sentences would otherwise queue behind the max-flow solves
        try:
            asked = cache.prepare_or_stop(inputs.model, inputs.backend, inputs.text)  # this run's request
            with st.spinner("Solving the attention flow…"):
                flowed = cache.get(api.flow_work(asked.key, result, layer))
            panels.append(Panel(f"flow up to layer {layer + 1}", flowed.numpy(), toks, toks, masked=future))
        except ValueError as err:
            st.info(escape.md(err))
    with widgets.grid_box("ov-rollout"):
        st.plotly_chart(panel_maps.side_by_side(panels, style=inputs.style), key="ov.rollout")
    pick = state.bound(
        st.selectbox,
        "Where does this token draw from?",
        range(1, len(toks) + 1),
        url="token",
        key="ov.token",
        default=len(toks) if result.kind == "causal" else 1,  # a decoder's first token sees only itself: its last
        valid=lambda v: 1 <= v <= len(toks),
        format_func=lambda i: f"{toks[i - 1][:40]} (position {i})",
    )
    title = f"'{toks[pick - 1]}' after layer {layer + 1}: rollout share per input token"
    st.plotly_chart(stat_charts.bars(rolled[pick - 1].numpy(), toks, title, style=inputs.style), key="ov.bars")
    pooled = rollout.first_token_share(rolled) if result.kind == "causal" else 0.0
    if pooled > 0.5:  # SmolLM2's every token "draws" 100% from "The" after its last layer, with no word why
        st.caption(
            f"On a decoder, rollout pools on the first token: after layer {layer + 1}, {percent(pooled)} of a token's "
            "rollout is on it, on average over this text's tokens. The first token is in every token's past, and many "
            "heads park their attention on it (a sink); multiplied layer after layer, that share grows until it is "
            "nearly all. It says little of what each token reads: an earlier layer's rollout, or the raw attention, "
            "shows more."
        )


def render() -> None:
    """Draw the page."""
    inputs = controls.current()
    st.header("Model overview")
    result = self_result_or_stop(inputs)
    widgets.truncation_notice(result)
    st.subheader("Every head at a glance")
    stats_section(inputs, result)
    st.subheader("Raw attention, rollout and flow")
    if cache.request_is_long(inputs.model, inputs.backend, inputs.text):
        eng = cache.engine(inputs.model, inputs.backend)
        st.info(
            "Rollout and flow multiply every layer's whole map, token by token: they are computed for texts up to "
            f"{api.eager_tokens(eng.n_layers, eng.n_heads):,} tokens on this model (this one has "
            f"{len(result.target):,}). "
            "The statistics above are exact for the whole text."
        )
        return
    st.caption(
        "Rollout and flow follow attention through the layers, counting the residual connection "
        f"(Abnar & Zuidema 2020). Flow is slower: it is computed for up to {rollout.MAX_FLOW_TOKENS} tokens."
    )
    rollout_section(inputs, cache.attention_or_stop(inputs.model, inputs.backend, inputs.text).eager(result.kind))
