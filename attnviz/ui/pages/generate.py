"""The Generate page: a decoder writes after a prompt, greedily; see where each written token looked."""

from __future__ import annotations

import streamlit as st

from attnviz import api, escape
from attnviz.figures import interactive, layout, panel_maps
from attnviz.result import counted, head_name
from attnviz.tokens import display_labels
from attnviz.ui import cache, controls, state, widgets
from attnviz.ui.halt import halt

DEFAULT_PROMPT = "What is the capital of France?"
MAX_NEW_TOKENS = 64  # the most one click writes (greedy, one forward pass per token)
WRITER = "smollm2"  # the model that writes when the sidebar's cannot
INTRO = (
    "A decoder writes one token at a time: each new token is the most likely next one (greedy decoding), given "
    "the prompt and everything written so far. Below, each row is one step of the writing: where the query that "
    "wrote that token looked. The map is exact: it is the model's own causal attention over the whole text, "
    "read at the rows that did the writing."
)


def writer(model: str, backend: api.Backend) -> api.GeneratingEngine:
    """The sidebar's model when it can write, else SmolLM2 (with a notice)."""
    eng = cache.load_engine_or_stop(model, backend)
    if isinstance(eng, api.GeneratingEngine):
        return eng
    st.info(
        f"{cache.named(eng.name)} does not write text (it is an {eng.architecture}); SmolLM2 writes here, "
        "or any decoder chosen in the sidebar's model box."
    )
    eng = cache.load_engine_or_stop(WRITER, backend)
    if not isinstance(eng, api.GeneratingEngine):
        st.error("SmolLM2 cannot write on this backend.")
        halt()
    return eng


def written_labels(gen: api.Generation) -> list[str]:
    """Each written token as a person reads it: 'step 3: Paris' (plain text: the figure escapes it)."""
    return [f"step {i + 1}: {t[:30]}" for i, t in enumerate(gen.written)]


def render() -> None:
    """Draw the page."""
    inputs = controls.current()
    st.header("Write, and see where each new token looked")
    st.markdown(INTRO)
    eng = writer(inputs.model, inputs.backend)
    prompt = state.bound(st.text_area, "Prompt", url="prompt", key="gen.prompt", default=DEFAULT_PROMPT, height=80)
    a, b = st.columns([3, 2])
    n = a.slider("Tokens to write, at most", 1, MAX_NEW_TOKENS, 24, key="gen.n")
    if eng.has_chat_template:
        chat = b.toggle("As a chat message", True, key="gen.chat", help="Wrap the prompt in the model's chat template")
    else:  # a base model: the prompt goes in as written
        chat = b.toggle(
            "As a chat message",
            False,
            key="gen.chat.none",
            disabled=True,
            help=f"{cache.named(eng.name)} has no chat template: it continues the prompt as written",
        )
    try:
        key = api.generation_work(eng, prompt, n, chat).key
    except ValueError as err:
        st.warning(escape.md(err))
        return
    if st.button("Write", type="primary", key="gen.go"):
        bar = st.progress(0.0, text="Writing…")

        def step(i: int, total: int) -> None:
            bar.progress(i / total, text=f"Writing… {i} of at most {total} tokens")

        try:
            cache.get(api.generation_work(eng, prompt, n, chat, progress=step))
        except ValueError as err:
            st.warning(escape.md(err))
            return
        bar.empty()
        st.session_state["gen.key"] = key
    if st.session_state.get("gen.key") != key:
        return
    try:
        gen = cache.get(api.generation_work(eng, prompt, n, chat))  # kept; else (pushed out) written again, admitted
    except ValueError as err:
        st.warning(escape.md(err))
        return
    draw(inputs, gen, prompt)


def export_steps(
    inputs: controls.Inputs, gen: api.Generation, prompt: str, panel: panel_maps.Panel, where: tuple[int, int]
) -> None:
    """PNG, SVG, CSV and JSON of the steps' map shown (one head); the JSON also holds the prompt, what was written
    (its tokens, its text, why it stopped) and whether a chat template wrapped the prompt. Only the panel and
    strings are kept for the buttons, never the whole result."""
    from attnviz.figures import export

    r, (layer, head) = gen.result, where
    options = {"view": "generation", "chat": gen.chat, "written": len(gen.written), "stopped": gen.stopped}
    meta = export.Manifest(r.model, inputs.backend, r.device, prompt, "causal", layer + 1, head + 1, options)
    writing = {"prompt": prompt, "written_tokens": list(gen.written), "written_text": gen.text}
    title = f"{api.titled(r.model)}: layer {layer + 1}, head {head + 1}, where each written token looked"
    fig = lambda fmt: export.figure_bytes(export.panels_figure([panel], title, cmap=inputs.style.cmap), fmt)  # noqa: E731
    csv = lambda: export.matrix_csv(panel.matrix, panel.rows, panel.cols)  # noqa: E731
    stem = f"attnviz_generate_L{layer + 1}_H{head + 1}"
    widgets.download_row(stem, "gen.export", fig, csv, lambda: export.panels_json([panel], meta, writing))


def draw(inputs: controls.Inputs, gen: api.Generation, prompt: str) -> None:
    """The text written, the steps of one head, and one step across every layer and head."""
    stop = "it wrote its end token" if gen.stopped == "end token" else "it reached the limit"
    st.markdown(f"**Written** ({len(gen.written)} tokens; {stop}): {escape.md(gen.text)}")
    st.caption("Token by token: " + " · ".join(escape.md(t, 30) for t in gen.written))
    r = gen.result
    p = gen.prompt_tokens
    rows, cols = written_labels(gen), display_labels(r.source_tokens)
    layer = widgets.pick("Layer", "gen", "layer", r.n_layers)
    head = widgets.pick("Head", "gen", "head", r.n_heads)
    state.show_head(layer, head)
    title = f"where each written token looked\nlayer {layer + 1}, head {head + 1}"
    window = r.layer_window(layer)
    panel = panel_maps.steps_panel(gen.steps[layer, head].numpy(), tuple(rows), r.source_tokens, p, title, window)
    with widgets.grid_box("gen-steps"):  # laid out for a laptop's column: a narrower window scrolls it, not crowds it
        st.plotly_chart(panel_maps.side_by_side([panel], style=inputs.style), key="gen.steps")
    export_steps(inputs, gen, prompt, panel, (layer, head))
    st.caption(
        f"Rows: the {len(rows)} steps of the writing; columns: the prompt ({p} tokens"
        + (", the chat template's included" if gen.chat else ", as written: no chat template")
        + ") and what was written before. Grey: not written yet at that step."
    )
    step = state.bound(
        st.select_slider,
        "One step, across every layer and head",
        range(1, len(rows) + 1),
        url="step",
        key="gen.step",
        default=1,
        valid=lambda v: 1 <= v <= len(rows),
        format_func=lambda i: f"{i}: {gen.written[i - 1][:20]}",
    )
    s = step - 1
    row = gen.across_heads(s).numpy()  # (L*H, keys seen)
    heads = [head_name(lay, h) for lay in range(r.n_layers) for h in range(r.n_heads)]
    fig = interactive.matrix(
        row,
        f"step {step} ({gen.written[s][:30]}): every head's attention",
        rows=heads,
        cols=cols[: p + s],
        style=inputs.style,
        signed=False,
        height=max(300, 6 * len(heads) + 120),
        width=layout.main_px(inputs.style),  # the page's width (a phone's too): a label for every token that fits
        row_ticks=(
            heads[:: r.n_heads],
            [f"layer {lay + 1}" for lay in range(r.n_layers)],
            f"rows: the {counted(r.n_heads, 'head')} of each layer, in order (hover for one)",
        ),
    )
    with widgets.grid_box("gen-step-heads"):  # its keys labelled for the column it is laid out for, as above
        st.plotly_chart(fig, key="gen.step.heads")
