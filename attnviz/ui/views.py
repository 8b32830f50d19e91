"""Widgets shared by the heatmap pages: view options, layer and head pickers, export buttons."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from attnviz.analysis import views
from attnviz.result import AttentionResult
from attnviz.ui import cache, state
from attnviz.ui.controls import Inputs


@dataclass(frozen=True)
class Options:
    hide_special: bool
    merge_words: bool


def options(prefix: str) -> Options:
    state.restore(f"{prefix}.hide", "hide", False)
    state.restore(f"{prefix}.merge", "merge", False)
    a, b = st.columns(2)
    hide = a.toggle("Hide [CLS] / [SEP]", key=f"{prefix}.hide", help="Rows are renormalised over the tokens left")
    merge = b.toggle(
        "Merge word pieces into words", key=f"{prefix}.merge", help="Sum over key pieces, mean over query pieces"
    )
    state.remember("hide", hide)
    state.remember("merge", merge)
    return Options(hide, merge)


def prepared(inputs: Inputs, result: AttentionResult, opts: Options) -> AttentionResult:
    target, source = cache.axes(inputs.model, inputs.engine, result)
    try:
        return views.prepare(result, target, source, hide_special=opts.hide_special, merge_words=opts.merge_words)
    except ValueError as err:
        st.warning(str(err))
        st.stop()


def pick(label: str, prefix: str, url_key: str, count: int) -> int:
    """A 1-based slider for people, returned 0-based; its value lives in the URL."""
    state.restore(f"{prefix}.{url_key}", url_key, 1, lambda v: 1 <= v <= count)
    if count == 1:
        value = 1
    else:
        value = st.slider(label, 1, count, key=f"{prefix}.{url_key}")
    state.remember(url_key, value)
    return value - 1


def export_buttons(
    inputs: Inputs, result: AttentionResult, layer: int, head: int | None, opts: Options, key: str
) -> None:
    """PNG, SVG, CSV and JSON of what is shown; the files are only built when a button is pressed."""
    from attnviz.figures import export  # seaborn and matplotlib load on the first export, not on page load

    colorscale = inputs.style.colorscale
    stem = f"attnviz_L{layer + 1}" + ("" if head is None else f"_H{head + 1}")
    manifest = export.Manifest(
        result.model,
        inputs.engine,
        result.device,
        inputs.text,
        result.kind,
        layer + 1,
        None if head is None else head + 1,
        {"hide_special": opts.hide_special, "merge_words": opts.merge_words},
    )
    shown = result.weights[layer] if head is None else result.weights[layer, head]  # (H, Tq, Tk) or (Tq, Tk)

    def figure(fmt: str) -> bytes:
        if head is None:
            return export.figure_bytes(export.grid_figure(result, layer, colorscale=colorscale), fmt)
        return export.figure_bytes(export.head_figure(result, layer, head, colorscale=colorscale), fmt)

    def csv() -> str:
        if head is None:
            return export.layer_csv(shown.numpy(), result.target_tokens, result.source_tokens)
        return export.matrix_csv(shown.numpy(), result.target_tokens, result.source_tokens)

    cols = st.columns(4)
    cols[0].download_button(
        "PNG", lambda: figure("png"), f"{stem}.png", "image/png", key=f"{key}.png", on_click="ignore"
    )
    cols[1].download_button(
        "SVG", lambda: figure("svg"), f"{stem}.svg", "image/svg+xml", key=f"{key}.svg", on_click="ignore"
    )
    cols[2].download_button("CSV", csv, f"{stem}.csv", "text/csv", key=f"{key}.csv", on_click="ignore")
    bundle = lambda: export.bundle_json(shown.numpy(), result.target_tokens, result.source_tokens, manifest)  # noqa: E731
    cols[3].download_button("JSON", bundle, f"{stem}.json", "application/json", key=f"{key}.json", on_click="ignore")


def export_overview(inputs: Inputs, result: AttentionResult, opts: Options, key: str) -> None:
    """PNG, SVG, CSV and JSON of the overview as shown: every head's small map (pooled for long inputs)."""
    from attnviz.figures import export, interactive

    thumbs, fq, fk = interactive.pooled(result.weights, interactive.OVERVIEW_THUMB)  # (L, H, s, s')
    pooled_note = "" if fq == fk == 1 else f", pooled {fq}x{fk} tokens a cell"
    title = f"{result.model}: {result.n_layers} layers x {result.n_heads} heads{pooled_note}"
    manifest = export.Manifest(
        result.model,
        inputs.engine,
        result.device,
        inputs.text,
        result.kind,
        0,
        None,
        {
            "hide_special": opts.hide_special,
            "merge_words": opts.merge_words,
            "view": "overview",
            "pooled_rows": fq,
            "pooled_columns": fk,
        },
    )

    def figure(fmt: str) -> bytes:
        return export.figure_bytes(export.overview_figure(thumbs, title, colorscale=inputs.style.colorscale), fmt)

    def bundle() -> str:
        rows = (
            result.target_tokens
            if fq == 1
            else tuple(f"tokens {i + 1}-" for i in range(0, len(result.target_tokens), fq))
        )
        cols = (
            result.source_tokens
            if fk == 1
            else tuple(f"tokens {j + 1}-" for j in range(0, len(result.source_tokens), fk))
        )
        return export.bundle_json(thumbs, rows, cols, manifest)

    cols = st.columns(4)
    cols[0].download_button(
        "PNG", lambda: figure("png"), "attnviz_overview.png", "image/png", key=f"{key}.png", on_click="ignore"
    )
    cols[1].download_button(
        "SVG", lambda: figure("svg"), "attnviz_overview.svg", "image/svg+xml", key=f"{key}.svg", on_click="ignore"
    )
    cols[2].download_button(
        "CSV",
        lambda: export.thumbs_csv(thumbs),
        "attnviz_overview.csv",
        "text/csv",
        key=f"{key}.csv",
        on_click="ignore",
    )
    cols[3].download_button(
        "JSON", bundle, "attnviz_overview.json", "application/json", key=f"{key}.json", on_click="ignore"
    )
