"""The Knock out and patch page: does a head matter? Remove heads and watch the loss and the next token; copy one
run's heads into another and see how much of the answer comes back."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz import api, escape
from attnviz.api import ablation, head_stats, patching, runs
from attnviz.figures import interactive, lesson_charts, stat_charts
from attnviz.result import AttentionResult, counted, head_index, head_name
from attnviz.ui import cache, controls, state, widgets
from attnviz.ui.controls import Inputs

WHY = (
    "Where a head looks is not what it does. Jain & Wallace (2019) and Wiegreffe & Pinter (2019) argue over whether "
    "attention explains a prediction; an experiment settles it for one head and one text: take the head out and "
    "see what changes (Michel et al. 2019), or put a clean run's head into a corrupted run and see what comes back "
    "(Wang et al. 2022; Meng et al. 2022)."
)
MODES: dict[api.Mode, str] = {
    "zero": "zero: the head's output before W_O set to 0",
    "mean": "mean: the head's output at every position replaced by its mean over a reference corpus",
}
MEAN = (
    "**Mean ablation's reference**: the head's output averaged over every position of the built-in corpus "
    f"({len(ablation.REFERENCE)} sentences, the Model overview's; the text scored here is left out if it is one of "
    "them), as Wang et al. (2022) take the mean over a reference dataset. It is not the mean over this text's own "
    "positions: that would carry what the later tokens wrote into the predictions of the earlier ones."
)
OWN = "your own pair"
PAIRS = (
    "The indirect-object pairs (Wang et al. 2022) and the pronoun lab's pairs, asked as continuations (\"… The word "
    "'it' means the\"). Whether a pair can be asked (each answer one token) or patched (both prompts the same length "
    "in tokens) depends on the model's tokenizer, and whether the model gets it right both ways on the model: the "
    "page says so for the pair chosen."
)
MEASURED_PAIRS = {  # bench/interventions.py --model NAME; bench/RESULTS.md
    "smollm2": (
        "Measured on SmolLM2: it gets the indirect-object pairs right both ways (+6.3 clean, −3.3 with the names "
        "swapped); of the 22 pronoun pairs one cannot be asked (' sofa' is two tokens), two cannot be patched (the "
        "river and the key), and it gets none of the other 19 right both ways, so the share restored is undefined "
        "for them. They are here to see that."
    ),
    "gemma3": (
        "Measured on Gemma 3 270M: it gets the indirect-object pairs right both ways (+5.3 clean, −5.4 with the names "
        "swapped); of the 22 pronoun pairs one cannot be patched (the river), and it gets none of the 22 right both "
        "ways, so the share restored is undefined for them. They are here to see that."
    ),
}
METRIC = (
    "**The metric.** d = logit(answer) − logit(wrong) at the last position; a head's share restored is "
    "(d_patched − d_corrupted) / (d_clean − d_corrupted), with the head's output at every position taken from the "
    "clean run: 1 when that head alone brings the answer back, 0 when it changes nothing, negative when it pushes "
    "the other way. It means something only where the model gets the pair right both ways (d_clean > 0 > "
    "d_corrupted); elsewhere it is undefined, and nothing is computed."
)


def _heads_label(heads: dict[int, list[int]]) -> str:
    return ", ".join(head_name(layer, h) for layer, hs in sorted(heads.items()) for h in hs)


def _pick_heads(eng: api.InterveningEngine, inputs: Inputs) -> dict[int, list[int]]:
    """Heads chosen by name, or the top k by a statistic of the Model overview (on the sidebar's text)."""
    n_l, n_h = eng.n_layers, eng.n_heads
    how = st.radio("Heads", ("by name", "the top k by a statistic"), horizontal=True, key="ko.how")
    if how == "by name":
        names = [head_name(layer, h) for layer in range(n_l) for h in range(n_h)]
        chosen = st.multiselect("Which heads (layer, head; 1-based)", names, default=names[:1], key="ko.names")
        heads: dict[int, list[int]] = {}
        for name in chosen:
            layer, head = head_index(name)
            heads.setdefault(layer, []).append(head)
        return heads
    a, b = st.columns(2)
    stat = a.selectbox(
        "Statistic", ("prev", "first", "self", "entropy"), key="ko.stat", format_func=lambda s: head_stats.NAMES[s]
    )
    k = b.slider("k", 1, min(32, n_l * n_h), 5, key="ko.k")
    stats = cache.attention_or_stop(inputs.model, inputs.backend, inputs.text).main.stats()
    flat = stats[stat].flatten()
    heads = {}
    for i in flat.topk(k).indices.tolist():
        heads.setdefault(i // n_h, []).append(i % n_h)
    st.caption(f"The {counted(k, 'head')} with the highest {escape.md(stat)} on this text: {_heads_label(heads)}.")
    return heads


def knockout_section(eng: api.InterveningEngine, inputs: Inputs) -> None:
    """Heads knocked out on the sidebar's text: next tokens and loss before and after, downstream maps."""
    heads = _pick_heads(eng, inputs)
    mode = st.radio("How", list(MODES), format_func=lambda m: MODES[m], key="ko.mode")
    if mode == "mean":
        st.caption(MEAN)
    ids = list(cache.encoded_or_stop(inputs.model, inputs.backend, inputs.text).ids)
    if len(ids) < 2 or not heads:
        st.info("Type a text of at least two tokens in the sidebar and pick at least one head.")
        return
    words = [runs.token_text(eng, i) for i in ids]
    position = st.select_slider(
        "Read the next token after",
        list(range(len(ids))),
        len(ids) - 1,
        format_func=lambda i: f"{i + 1}: {words[i]!r}",
        key="ko.pos",
    )
    with st.spinner("Two passes: with and without the heads…"):
        got = cache.get(api.ablation_work(eng, inputs.text, heads, mode, position))
    st.markdown(
        f"**{_heads_label(heads)}** knocked out ({escape.md(mode)}): mean loss {got.loss_before.mean():.3f} "
        f"→ {got.loss_after.mean():.3f} nats."
    )
    c1, c2 = st.columns(2)
    for col, name, top in ((c1, "before", got.top_before), (c2, "after", got.top_after)):
        col.markdown(f"Next token after {escape.quoted(words[position])}, {name}:")
        with col:
            widgets.fixed_table([{"token": repr(t["token"]), "probability": t["p"]} for t in top], {"probability": 4})
    st.plotly_chart(
        lesson_charts.loss_lines(
            {"before": (0, got.loss_before.tolist()), "after": (0, got.loss_after.tolist())},
            "Loss of each token, before and after",
            style=inputs.style,
        ),
        key="ko.loss",
    )
    first = min(heads)
    layer = (
        st.slider("Attention downstream: layer", first + 1, eng.n_layers, min(first + 2, eng.n_layers), key="ko.layer")
        - 1
    )
    axis = eng.tokenizer.plain_axis(ids)
    name = f"{api.shown_name(eng.name)}, {_heads_label(heads)} out"
    after = AttentionResult(got.patterns_after, axis, axis, "causal", name, sinks=eng.sinks)
    with widgets.grid_box("knockout"):
        count = sum(map(len, heads.values()))  # a title names three heads at most: more would run off the grid
        out = _heads_label(heads) if count <= 3 else f"{count} heads"
        grid = interactive.head_grid(after, layer, style=inputs.style, note=f"{out} knocked out", pick=False)
        st.plotly_chart(grid, key="ko.after", theme=None)
    importance_section(eng, inputs, mode)


def importance_section(eng: api.InterveningEngine, inputs: Inputs, mode: api.Mode) -> None:
    """Which heads matter for this text: the loss increase when each head alone is removed, beside a statistic."""
    st.subheader("Which heads matter for this text?")
    n = eng.n_layers * eng.n_heads
    got = cache.on_demand(
        lambda step: api.importance_work(eng, inputs.text, mode, step),
        f"Knock out each of the {counted(n, 'head')} alone ({eng.n_layers} batched passes)",
        "ko.grid",
        note="One pass per layer, its heads in one batch, each starting from the clean run at that layer.",
        bar=cache.IMPORTANCE_BAR,
    )
    if got is None:
        return
    grid, _ = got
    stats = cache.attention_or_stop(inputs.model, inputs.backend, inputs.text).main.stats()
    c1, c2 = widgets.two_places(inputs.style.projector, "ko")
    values = grid.numpy()
    c1.plotly_chart(
        stat_charts.stat_grid(
            values,
            [[""] * values.shape[1]] * values.shape[0],
            "loss increase (nats)",
            style=inputs.style,
            show_values=False,
        ),
        key="ko.importance",
    )
    stat = c2.selectbox(
        "beside a statistic of where it looks",
        ("prev", "first", "entropy", "self"),
        key="ko.beside",
        format_func=head_stats.NAMES.get,
    )
    c2.plotly_chart(
        stat_charts.stat_grid(
            stats[stat].numpy(),
            [[""] * values.shape[1]] * values.shape[0],
            head_stats.NAMES[stat],
            style=inputs.style,
            show_values=False,
        ),
        key="ko.stat_grid",
    )
    top = np.dstack(np.unravel_index(np.argsort(-values, axis=None)[:3], values.shape))[0]
    st.markdown(
        f"A striking pattern and a large effect are different things: with {mode} ablation, the heads that matter "
        "most here are "
        + ", ".join(f"{head_name(a, b)} (+{values[a, b]:.3f} nats)" for a, b in top)
        + ". Compare where they sit with the statistic's brightest cells."
    )
    rows = [
        {"layer": a + 1, "head": b + 1, "loss_increase": round(float(values[a, b]), 5)}
        for a in range(values.shape[0])
        for b in range(values.shape[1])
    ]
    widgets.csv_button("Loss increase per head (CSV)", lambda: widgets.rows_csv(rows), "attnviz_knockout.csv", "ko.csv")


def patch_section(eng: api.InterveningEngine, inputs: Inputs) -> None:
    """A minimal pair: the logit difference clean and corrupted, every head's share restored, then by position."""
    pairs = {**patching.IOI_PAIRS, **patching.pronoun_pairs()}
    choice = st.selectbox("A pair", [*pairs, OWN], key="pa.pair")
    st.caption(f"{PAIRS} {MEASURED_PAIRS.get(eng.name, '')}")
    if choice == OWN:
        a, b = st.columns(2)
        first = next(iter(patching.IOI_PAIRS.values()))
        clean = a.text_input("Clean prompt", first[0], key="pa.clean", max_chars=400)
        corrupt = b.text_input("Corrupted prompt (one word changed)", first[1], key="pa.corrupt", max_chars=400)
        answer = a.text_input("Answer (one token, with its leading space)", " Anna", key="pa.answer", max_chars=40)
        wrong = b.text_input("Wrong answer", " Peter", key="pa.wrong", max_chars=40)
    else:
        clean, corrupt, answer, wrong = pairs[choice]
        st.markdown(
            f"Clean: {escape.quoted(clean)} → {escape.quoted(answer)}  \n"
            f"Corrupted: {escape.quoted(corrupt)} → {escape.quoted(wrong)}"
        )
    st.markdown(METRIC)
    try:
        held = cache.on_demand(
            lambda step: api.patch_work(eng, clean, corrupt, answer, wrong, step),
            "Patch every head (one batched pass per layer)",
            "pa.run",
            bar="Patching each head",
        )
    except ValueError as err:
        st.warning(escape.md(err))
        return
    if held is None:
        return
    st.markdown(f"d clean = **{held.clean_diff:+.2f}**, d corrupted = **{held.corrupt_diff:+.2f}**.")
    if held.restored is None:
        st.info(
            "The model does not get this pair right both ways (it needs d clean > 0 > d corrupted): the word "
            "does not flip its answer, so the share restored is undefined here and was not computed. "
            "Try another pair."
        )
        return
    values = held.restored.numpy()
    st.plotly_chart(
        stat_charts.stat_grid(values, [[""] * values.shape[1]] * values.shape[0], "share restored", style=inputs.style),
        key="pa.grid",
    )
    best = np.unravel_index(int(np.argmax(values)), values.shape)
    names = [head_name(a, b) for a in range(values.shape[0]) for b in range(values.shape[1])]
    pick = st.selectbox("By position, for head", names, index=int(best[0] * values.shape[1] + best[1]), key="pa.head")
    layer, head = head_index(pick)
    per = cache.get(api.patch_position_work(eng, clean, corrupt, answer, wrong, layer, head))
    words = eng.tokenizer.plain_axis(held.corrupt_ids).tokens
    st.plotly_chart(
        stat_charts.bars(per.numpy(), words, f"{pick}: share restored by the position patched", style=inputs.style),
        key="pa.bars",
    )


def render() -> None:
    """Draw the page."""
    inputs = controls.current()
    st.header("Knock heads out, patch one run into another")
    st.markdown(WHY)
    eng = cache.decoder_or_stop(inputs.model, inputs.backend)
    if cache.request_is_long(inputs.model, inputs.backend, inputs.text):
        cache.stop_long(eng, "This page runs the model once per layer")
    tab = (
        state.bound(
            st.segmented_control,
            "Experiment",
            ("knock", "patch"),
            url="tab",
            key="ko.tab",
            default="knock",
            valid=lambda v: v in ("knock", "patch"),
            required=True,
            format_func={"knock": "Knock heads out", "patch": "Patch"}.get,
        )
        or "knock"
    )
    if tab == "knock":
        st.caption("On the sidebar's text. Layers and heads are 1-based here.")
        knockout_section(eng, inputs)
    else:
        patch_section(eng, inputs)
