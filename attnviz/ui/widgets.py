"""Widgets shared by the pages: view options, layer and head pickers, export buttons."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import streamlit as st

from attnviz import api, escape
from attnviz.api import view_options
from attnviz.figures.style import pooled_labels
from attnviz.result import Attention, AttentionResult, counted
from attnviz.tokens import TokenAxis
from attnviz.ui import cache, routes, state
from attnviz.ui.controls import Inputs, current, on_phone
from attnviz.ui.halt import halt


@dataclass(frozen=True)
class Options:
    """The view options a person chose."""

    hide_special: bool
    merge_words: bool
    first_aside: bool = False
    value_weight: bool = False

    def note(self) -> str:
        """What the picture shows besides raw attention, in words for its title ("" for raw attention)."""
        parts = ["value-weighted ||αf(x)||, rows renormalised"] if self.value_weight else []
        parts += ["first token set aside, rows renormalised"] if self.first_aside else []
        parts += ["special tokens hidden"] if self.hide_special else []
        parts += ["word pieces merged"] if self.merge_words else []
        return "; ".join(parts)

    def as_dict(self) -> dict:
        """The options, for an export's manifest."""
        return dict(self.__dict__)


TOGGLES = (  # field, URL key, label (plain words), help (the jargon, and what it does)
    (
        "hide_special",
        "hide",
        "Hide the model's markers",
        "Leave out the tokenizer's own markers, its special tokens ({specials}); rows are renormalised over the "
        "tokens left.",
    ),
    (
        "merge_words",
        "merge",
        "Show whole words",
        "A word the tokenizer cut into pieces (word pieces: BERT marks each piece after the first with ##) is shown "
        "as one: the attention it receives summed over its pieces, what it gives averaged over them.",
    ),
    (
        "first_aside",
        "sink",
        "Leave out the first token",
        "Many heads park most of their attention on the first token (an attention sink), which darkens the rest of "
        "the map. This drops its row and column and renormalises every row over the tokens left.",
    ),
    (
        "value_weight",
        "value",
        "Count what each token passes on",
        "Multiply each attention weight α by the size of what that key sends through the head, the length of its "
        "value vector after the output projection, ‖f(x)‖ (Kobayashi et al. 2020: the map then shows ‖α f(x)‖), rows "
        "renormalised. A key that is attended to but sends almost nothing fades. For BERT and the decoders on "
        "attnviz's attention (SmolLM2, Gemma 3, Llama, Qwen, ...).",
    ),
)


def applies(field: str, axis: TokenAxis | None) -> bool:
    """Whether a view option changes anything on a text with this token axis: hiding special tokens needs some (a
    decoder's text may have none), merging needs a word cut into pieces."""
    if axis is None:
        return True
    if field == "hide_special":
        return any(axis.special)
    if field == "merge_words":
        return len(set(axis.words)) < len(axis)
    return True


def options(prefix: str, axis: TokenAxis | None = None, projector: bool = False) -> Options:
    """The view-option toggles that apply to the text's tokens (`axis`; all when None); their values live in the
    URL. Two a row in projector mode, so that no label is cut, and where all four apply (Gemma 3's text: in a 900 px
    window four columns gave each label 58 px, "model's" and "passes" broken across two lines); else one a column."""
    values = {field: False for field, *_ in TOGGLES}
    shown = [t for t in TOGGLES if applies(t[0], axis)]
    state.keep(*(t[1] for t in TOGGLES if t not in shown))  # a link's, for a text on which they do something
    specials = ", ".join(sorted({t for t, s in zip(axis.tokens, axis.special, strict=True) if s})) if axis else ""
    columns = st.columns(min(2, len(shown)) if projector or len(shown) > 3 else len(shown)) if shown else []
    for i, (field, url_key, label, help_text) in enumerate(shown):
        values[field] = state.bound(
            columns[i % len(columns)].toggle,
            label,
            url=url_key,
            key=f"{prefix}.{url_key}",
            default=False,
            help=help_text.format(specials=specials or "[CLS], [SEP], <s>"),
        )
    return Options(**values)


def with_options(result: AttentionResult, opts: Options) -> AttentionResult:
    """The result with the view options applied, or a message and the page stops."""
    try:
        return view_options.apply(
            result,
            hide_special=opts.hide_special,
            merge_words=opts.merge_words,
            first_aside=opts.first_aside,
            value_weight=opts.value_weight,
        )
    except ValueError as err:
        st.warning(escape.md(err))
        halt()


UNKNOWN_PIECES = ("[UNK]", "<unk>")  # WordPiece's and SentencePiece's unknown token


def truncation_notice(result: Attention) -> None:
    """Say how many tokens were dropped where the text was longer than the model takes, and what an unknown token
    stands for where the text has one (nothing otherwise).

    The notes sit in one placeholder that every run writes, said or not: an element that comes and goes moves every
    element after it, and Streamlit draws a moved chart anew (the grid went blank for a third of a second when a
    text with an emoji followed one without)."""
    slot = st.container()
    if result.truncated:
        kept, dropped = len(result.source_tokens), result.truncated
        slot.info(f"The text was cut to fit the model: it reads {kept:,} tokens; {dropped:,} at the end were dropped.")
    unknown = sorted({p for p in result.source.pieces if p in UNKNOWN_PIECES})
    if unknown:  # an emoji became "[UNK]" with no word of why
        slot.caption(
            f"{unknown[0]} stands for characters the model's vocabulary does not have (an emoji, a rare symbol): "
            "the model sees one unknown token there, whatever the characters were."
        )


def pick(label: str, prefix: str, url_key: str, count: int, *, default: int = 1, where: Any = st) -> int:
    """A 1-based slider for people (in `where`: a column), returned 0-based; its value lives in the URL. No slider
    when there is one to pick from. Where the URL names no value, the session's own last one: the Heads page's head
    came back as head 1 after a look at the Layer view, which draws no head slider (so Streamlit drops its state). It
    is never written to the URL where the slider is not drawn: a class's student takes the teacher's URL whole."""
    valid = lambda v: 1 <= v <= count  # noqa: E731
    last = st.session_state.get(f"{prefix}.{url_key}.last")
    state.restore(f"{prefix}.{url_key}", url_key, last if last is not None and valid(last) else default, valid)
    if count == 1:
        value = 1
    else:
        value = where.slider(label, 1, count, key=f"{prefix}.{url_key}")
    st.session_state[f"{prefix}.{url_key}.last"] = value
    state.remember(url_key, value)
    return value - 1


def following_a_class() -> bool:
    """Whether this run's page is a student's following a teacher (app.py keeps this run's seat in the session)."""
    here = st.session_state.get("class.seat")
    return here is not None and not here.teacher and st.session_state.get("class.following", True)


def download_row(
    stem: str,
    key: str,
    figure: Callable[[str], bytes],
    csv: Callable[[], str],
    bundle: Callable[[], str],
    csv_label: str = "CSV",
) -> None:
    """PNG, SVG, CSV and JSON buttons; each file is built only when its button is pressed.

    figure(fmt) -> bytes for "png" and "svg"; csv() -> str; bundle() -> str (JSON). A student following a class gets
    them behind one switch ("Export this view"): each button registers a file with the server on every run, and a
    class of 100 redrawing a view at once spent a seventh of the server's time on 400 buttons few would press.
    """
    if following_a_class() and not st.toggle("Export this view", key=f"{key}.open", value=False):
        return
    row = control_row(f"download-{key}")  # each button as wide as its name: in four columns, 900 px cut them
    files: tuple[tuple[str, Callable[[], str | bytes], str, str], ...] = (
        ("PNG", lambda: figure("png"), "png", "image/png"),
        ("SVG", lambda: figure("svg"), "svg", "image/svg+xml"),
        (csv_label, csv, "csv", "text/csv"),
        ("JSON", bundle, "json", "application/json"),
    )
    for label, data, ext, mime in files:
        row.download_button(label, data, f"{stem}.{ext}", mime, key=f"{key}.{ext}", on_click="ignore")


def manifest(inputs: Inputs, result: Attention, kind: str, layer: int, head: int | None, options: dict):
    """What produced an export: the result's own model and device, the sidebar's backend and text."""
    from attnviz.figures import export

    return export.Manifest(result.model, inputs.backend, result.device, inputs.text, kind, layer, head, options)


# Streamlit keeps each session's download callables until its next run, so a callable that held a result would
# keep 72 MiB per session outside the memo's budget. Exports take `fetch`, which finds the result again
# (usually in the memo) only when a button is pressed.
Fetch = Callable[[], AttentionResult]


def export_buttons(inputs: Inputs, fetch: Fetch, layer: int, head: int | None, opts: Options, key: str) -> None:
    """PNG, SVG, CSV and JSON of what is shown; the files are only built when a button is pressed."""
    from attnviz.figures import export, interactive  # seaborn and matplotlib load on the first export

    cmap = inputs.style.cmap
    stem = f"attnviz_L{layer + 1}" + ("" if head is None else f"_H{head + 1}")
    options = opts.as_dict()

    def shown() -> tuple[AttentionResult, np.ndarray]:
        result = fetch()
        return result, (result.weights[layer] if head is None else result.weights[layer, head]).numpy()

    def figure(fmt: str) -> bytes:
        result = fetch()
        if head is None:
            return export.figure_bytes(export.grid_figure(result, layer, cmap=cmap), fmt)
        return export.figure_bytes(export.head_figure(result, layer, head, cmap=cmap), fmt)

    def csv() -> str:
        result, m = shown()
        if head is None:  # long form: a column says which cells the mask forbids
            return export.layer_csv(
                m, result.target_tokens, result.source_tokens, interactive.layer_masked(result, layer)
            )
        return export.matrix_csv(m, result.target_tokens, result.source_tokens)

    def bundle() -> str:
        result, m = shown()
        meta = manifest(inputs, result, result.kind, layer + 1, None if head is None else head + 1, options)
        pieces = (result.target.pieces, result.source.pieces)
        masked = interactive.layer_masked(result, layer)
        return export.bundle_json(m, result.target_tokens, result.source_tokens, meta, pieces, masked)

    download_row(stem, key, figure, csv, bundle)


def export_overview(inputs: Inputs, fetch: Fetch, opts: Options, key: str) -> None:
    """PNG, SVG, CSV and JSON of the overview as shown: every head's small map (pooled for long inputs)."""
    from attnviz.figures import export, interactive

    def thumbs() -> tuple[AttentionResult, np.ndarray, int, int]:
        result = fetch()
        return result, *interactive.pooled(result.weights, interactive.OVERVIEW_THUMB)  # (L, H, s, s')

    def figure(fmt: str) -> bytes:
        result, maps, fq, fk = thumbs()
        pooled_note = "" if fq == fk == 1 else f", pooled {fq}x{fk} tokens a cell"
        shape = f"{counted(result.n_layers, 'layer')} x {counted(result.n_heads, 'head')}"
        title = f"{api.titled(result.model)}: {shape}{pooled_note}"
        masked = interactive.layers_masked(result, fq, fk)
        return export.figure_bytes(export.overview_figure(maps, title, cmap=inputs.style.cmap, masked=masked), fmt)

    def bundle() -> str:
        result, maps, fq, fk = thumbs()
        options = {**opts.as_dict(), "view": "overview", "pooled_rows": fq, "pooled_columns": fk}
        rows = list(result.target_tokens) if fq == 1 else pooled_labels(result.target_tokens, fq)
        cols = list(result.source_tokens) if fk == 1 else pooled_labels(result.source_tokens, fk)
        pieces = (result.target.pieces, result.source.pieces) if fq == fk == 1 else None
        meta = manifest(inputs, result, result.kind, 0, None, options)
        return export.bundle_json(maps, rows, cols, meta, pieces, interactive.layers_masked(result, fq, fk))

    download_row("attnviz_overview", key, figure, lambda: export.thumbs_csv(thumbs()[1]), bundle)


def predict(question: str, options: Sequence[str], key: str, format_func: Callable[[str], str] = str) -> str | None:
    """Predict, then reveal: the question, a choice, a Reveal button. The guess once revealed, else None.

    A revealed guess is locked (its choice disabled, the button gone, the guess kept as it was revealed): changed
    after the answer showed, it would be told it had called what it had just been shown. A change only a script can
    send to the disabled choice is put back. A new question (another key, other options) asks again, and so does the
    page when it is opened again (Streamlit drops the choice of a page left)."""
    guess_key, locked_key = f"{key}.guess", f"{key}.revealed"
    locked = st.session_state.get(locked_key)
    if st.session_state.get(guess_key) is None or locked not in options:  # no guess yet, or its choice was dropped
        locked = st.session_state[locked_key] = None
    elif st.session_state[guess_key] != locked:
        st.session_state[guess_key] = locked
    st.markdown(f"**Predict first.** {question}")
    guess = st.radio(
        "Your guess",
        options,
        index=None,
        key=guess_key,
        horizontal=True,
        format_func=format_func,
        disabled=locked is not None,
    )
    if locked is None:  # the click's callback runs before the page does: the choice is drawn locked in that run
        st.button("Reveal", key=f"{key}.reveal", disabled=guess is None, on_click=_lock, args=(guess_key, locked_key))
    else:
        st.caption(LOCKED)
    return locked


LOCKED = "Your guess is locked in: it stays as it was when you pressed Reveal."


def _lock(guess_key: str, locked_key: str) -> None:
    st.session_state[locked_key] = st.session_state.get(guess_key)


def verdict(text: str, right: bool | None) -> None:
    """A revealed answer's box: green for a right guess, amber for a wrong one (as the Start lesson's), blue where
    nothing was right or wrong to guess (a tie)."""
    (st.info if right is None else st.success if right else st.warning)(text)


def two_places(projector: bool, name: str) -> tuple:
    """Two places side by side (two layer x head grids), or one under the other on a projector, where half the
    main column leaves a grid's head labels 12 px apart for 18 px text. Side by side, they keep the laptop's width
    (wide_columns): in a 900 px window SmolLM2's two grids on the Knock out page had their layer names cut."""
    return (st.container(), st.container()) if projector else tuple(wide_columns(f"two-{name}", 2))


def map_rows(figs: Sequence, per_row: int, keys: Sequence[str], px: int | None = None) -> None:
    """Figures `per_row` a row (interactive.maps_a_row's count), each under its key. `px`: the width token-by-token
    maps were laid out for; one alone in its row stands at that width, not stretched across a wider screen (on a
    1920x1080 projector the column is 1,380 px, and BERT's 16 x 16 mask stood 3:1). A phone's fills its column."""
    alone = px is not None and per_row == 1 and not on_phone()
    for i, (fig, key) in enumerate(zip(figs, keys, strict=True)):
        if i % per_row == 0:  # a row keeps the laptop's width it was laid out for (wide_columns): squeezed into a
            # 900 px window's column, the Masks page's maps stood 60 px wide under titles cut at both ends
            cols = wide_columns(key, per_row) if per_row > 1 else st.columns(1)
        cols[i % per_row].plotly_chart(fig, key=key, width=int(px) if alone and px else "stretch")


SHARED_PARAMS = ("model", "backend", "text", "palette", "projector")  # the URL parameters every page shares


def open_head(layer: int, head: int, params: dict | None = None) -> None:
    """Go to the Heads page showing this head (1-based), with `params` (default: the URL parameters every page
    shares); the page as the frame registered it, so the packaged app (`attnviz serve`) finds it too."""
    shared = {k: v for k, v in st.query_params.items() if k in SHARED_PARAMS} if params is None else params
    st.switch_page(routes.page_path("heads"), query_params={**shared, "view": "Head", "layer": layer, "head": head})


def csv_button(label: str, csv: Callable[[], str], filename: str, key: str) -> None:
    """One CSV download; the file is built only when the button is pressed."""
    st.download_button(label, csv, filename, "text/csv", key=key, on_click="ignore")


def fixed_table(rows: list[dict], decimals: dict[str, int], *, columns: dict | None = None, **kwargs) -> None:
    """A table whose number columns keep their decimals (`decimals`: column -> places): 1.50 and 1.25, not 1.5 and
    1.25 as rounded floats draw; `columns`: other columns' settings (st.column_config)."""
    formats = {k: st.column_config.NumberColumn(format=f"%.{places}f") for k, places in decimals.items()}
    st.dataframe(rows, hide_index=True, column_config={**formats, **(columns or {})}, **kwargs)


def grid_caption(causal: bool) -> None:
    """The caption above a layer's maps: what a row and a column are, and in a decoder what its grey cells are."""
    said = "Rows are queries (the token looking), columns are keys (the token looked at). One colour scale."
    st.caption(said + (" Grey cells are each token's future, which a decoder's mask hides." if causal else ""))


def window_note(layer: int, window: int, n_tokens: int) -> None:
    """Say what a sliding window masks on a layer's map, where the text reaches past it (0-based layer)."""
    if window and n_tokens > window:
        st.caption(
            f"Layer {layer + 1} uses a sliding window of {window:,} tokens: each query sees itself and the "
            f"{window - 1:,} tokens before it. Grey cells down the left are keys further back, which the window "
            "masks: not attention that happens to be zero."
        )


def _spans(numbers: Sequence[int]) -> str:
    """1, 2, 3, 5, 7, 8 -> "1–3, 5, 7–8" (sorted numbers)."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in runs)


def windows_note(windows: Sequence[int], n_tokens: int) -> None:
    """Say which layers of an every-layer overview a sliding window masks (windows: each layer's, 0 for none)."""
    windowed = [i + 1 for i, w in enumerate(windows) if w and n_tokens > w]
    if not windowed:
        return
    sizes = sorted({w for w in windows if w and n_tokens > w})
    size = ("sliding windows of " if len(sizes) > 1 else "a sliding window of ") + " or ".join(f"{w:,}" for w in sizes)
    full = [i + 1 for i, w in enumerate(windows) if not w or n_tokens <= w]
    many, rest = len(windowed) > 1, ""
    if full:
        plural = len(full) > 1
        rest = f"; layer{'s' if plural else ''} {_spans(full)} see{'' if plural else 's'} every earlier key"
    st.caption(
        f"Layer{'s' if many else ''} {_spans(windowed)} use{'' if many else 's'} {size} tokens: grey down the left "
        f"of {'their maps' if many else 'its map'} is keys further back, which the window masks{rest}."
    )


def snapshot_row(inputs: Inputs, view: dict, figures: Callable[[], list], key: str) -> None:
    """An HTML snapshot of what is shown: prepare it, then save it; its size is on the button.

    One self-contained file (the figures with plotly.js inlined, the text, model and view) that opens with no
    network. Prepared on request, for this view only: another view drops it.
    """
    from attnviz.figures import snapshot

    facts = {
        "model": inputs.model,
        "backend": inputs.backend,
        "text": inputs.text,
        **{k: str(v) for k, v in view.items()},
    }
    ident = repr(sorted(facts.items()))
    held = st.session_state.get(key)
    if held is not None and held[0] != ident:
        held = st.session_state[key] = None
    if held is None and st.button("Prepare an HTML snapshot", key=f"{key}.prepare", help="One file, no network"):
        parts = snapshot.parts("attnviz snapshot", facts, figures())
        held = st.session_state[key] = (ident, *parts)
    if held is not None:
        _, head, body = held
        size = snapshot.size(head, body) / 2**20
        st.download_button(
            f"Save the snapshot (HTML, {size:.1f} MB, opens offline)",
            lambda: snapshot.html_file(head, body),
            "attnviz_snapshot.html",
            "text/html",
            key=f"{key}.save",
            on_click="ignore",
        )


def rows_csv(rows: list[dict]) -> str:
    """A table of dicts (the same keys in each) as CSV with a header row."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def qk_space(source: api.Source, texts: list[str], layer: int, head: int, style, key: str, what: str) -> tuple | None:
    """A head's query/key space on demand (a button; admitted work, kept for every session): the scatter and its
    faithfulness. Returns (the Space, the clicked token's index or None), or None until asked or on failure."""
    from attnviz.figures import corpus_charts
    from attnviz.result import head_name

    try:
        space = cache.on_demand(
            lambda _: api.qk_work(source, texts, layer, head),
            "Place this head's queries and keys",
            f"{key}.button",
            note=f"The queries and keys of {what}, projected together to 2-D (AttentionViz).",
            spinner="Reading the head's queries and keys…",
        )
    except (ValueError, api.ModelLoadError) as err:
        st.info(escape.md(err))
        return None
    if space is None:
        return None
    full = space
    if space.content is not None:  # a rotary model: its turn by position can be most of the picture
        unturned = st.radio(
            "Place the tokens",
            ["As the model scores them (after the rotary turn)", "Without the rotary turn (what the tokens carry)"],
            key=f"{key}.turn",
            horizontal=True,
            help="This model turns each query and key by its position before it scores them (rotary positions). "
            "Turned back, the plot shows what the layer read from the tokens themselves.",
        ).startswith("Without")
        space = space.content if unturned else space
    drawn = "" if space.turned else ", without the rotary turn"
    title = f"{head_name(layer, head)}: queries and keys of {space.n:,} tokens (PCA{drawn})"
    event = st.plotly_chart(
        corpus_charts.qk_scatter(space.points, space.contexts, title, style=style),
        key=key,
        on_select="rerun",
        selection_mode="points",
    )
    by_q, by_k = space.position_share
    if space.turned and np.nanmax([by_q, by_k, 0.0]) >= 0.5:
        st.warning(
            f"Position explains {by_q:.0%} of the queries' spread in this plot and {by_k:.0%} of the keys': most of "
            "what you see is where each token stands, not what it says"
            + (
                f" (this rotary model turns each query and key by its position). Without the turn: "
                f"{full.content.position_share[0]:.0%} and {full.content.position_share[1]:.0%}."
                if full.content is not None
                else "."
            )
        )
    by_position = (
        f"Position explains {by_q:.0%} of the queries' spread and {by_k:.0%} of the keys' (adjusted R² of their "
        "positions' means; about 0 when position says nothing). "
        if np.isfinite(by_q) and np.isfinite(by_k)
        else "How much of the spread position explains needs several texts, each position seen more than once (the "
        "Corpus page measures it). "
    )
    turned = (
        "Each query and key was turned back by the model's own rotary table before placing, so that position's turn "
        "is out of the plot; the faithfulness still compares with the model's own scores, after the turn. "
        if not space.turned
        else ""
    )
    st.caption(
        f"Faithfulness, query by query: Spearman's ρ between a query's attention weights and minus its distances "
        f"in this plot to the keys it may attend to, {space.faithfulness:.2f} on average (spread "
        f"{space.faithfulness_sd:.2f}) over {space.queries:,} queries; a query's nearest key is its most attended "
        f"for {space.nearest_top:.0%} of them (by chance {space.nearest_chance:.0%}). The two axes keep "
        f"{space.explained or 0:.0%} of the variance. {by_position}{turned}Queries were multiplied and keys divided "
        "by one scale, then the keys moved to the queries' centroid, "
        "as AttentionViz does: no attention weight changes. Hover a point for its token."
    )
    points = event.get("selection", {}).get("points", []) if event else []
    clicked = int(points[0]["customdata"][0]) if points and points[0].get("customdata") is not None else None
    return space, clicked


def grid_box(name: str):
    """Where a layer grid is drawn (`with widgets.grid_box(name):`): on a browser that is not a phone's, a box that
    keeps the grid at least as wide as the column it is laid out for and scrolls it sideways in a narrower window
    (controls.WRAP_CSS); a phone's grid is laid out for the phone (one map a row) and stands as it is."""
    return contextlib.nullcontext() if on_phone() else _scrolls("grid", name).container(key=f"wide-grid-{name}")


def stat_box(name: str):
    """Where a layer x head grid of words (stat_charts.stat_grid) is drawn (`with widgets.stat_box(name):`): on a
    browser that is not a phone's, a box that keeps it as wide as the plot its cells' words were sized for
    (stat_charts.STAT_GRID_MIN_PX) and scrolls it sideways in a narrower column (controls.WRAP_CSS); a phone's grid is
    laid out for the phone."""
    return contextlib.nullcontext() if on_phone() else _scrolls("stat", name).container(key=f"stat-grid-{name}")


def under(name: str):
    """Where columns of text that belong under grid_box(name)'s panels are drawn, inside that box (`with
    widgets.under(name):`): they scroll sideways with the panels, so each column stays under its own panel (Compare's
    paragraphs, drawn after the box, stood under the wrong panel once it scrolled). A phone's stands as it is."""
    return contextlib.nullcontext() if on_phone() else st.container(key=f"under-{name}")


def wide_columns(name: str, spec: int | list[int]) -> list:
    """`st.columns(spec)` for a row of figures: on a browser that is not a phone's, the row keeps the width of the
    laptop's column it is laid out for and scrolls sideways in a narrower window (controls.WRAP_CSS), as grid_box's
    grid does; squeezed, each figure's title was cut at both ends. A phone's columns stack, as Streamlit's do."""
    if on_phone():
        return list(st.columns(spec))
    return list(_scrolls("grid", name).container(key=f"wide-row-{name}").columns(spec))


SCROLL_HINT = "↔ Wider than this window: scroll sideways to see the rest, or widen the window."


def _scrolls(kind: str, name: str):
    """The box around a figure that may scroll sideways (grid_box, stat_box, wide_columns): first in it a line that
    says so, shown only where the window is narrower than the figure (controls.WRAP_CSS: a container query on this
    box's width against the figure's least, `kind` "grid" or "stat"). Without it the right of a grid was hidden
    with the browser's scroll bar its only sign, and none where scroll bars show only while scrolling (a Mac's)."""
    box = st.container(key=f"scrolls-{kind}-{name}")
    box.container(key=f"scroll-hint-{kind}-{name}").caption(SCROLL_HINT)
    return box


CONTROL_PX = 240  # a control's width in a control_row: "the end token (Voita et al. 2019)" shown whole


def control_row(name: str, align: Literal["top", "center", "bottom"] = "bottom"):
    """A row of controls (`row = widgets.control_row(name)`, then `row.selectbox(..., width=widgets.control_px())`):
    each keeps its width, and where the window is too narrow for them side by side the next stands under the last,
    whole. In st.columns they were squeezed with the window: at 900 px a select showed "the end tok" of its choice and
    a toggle's label broke "sentences" in two (2026-11-30). A toggle or checkbox in it is as wide as its label. On a
    phone the controls stand one under another, each as wide as the column (control_px), as a phone's columns do.
    `align`: "bottom" puts the boxes of controls whose labels differ in height on one line; "top", figures'
    (st.metric's) values, where only some have a line under them; "center", a line of text and its button."""
    if on_phone():
        return st.container(key=f"controls-{name}")
    return st.container(horizontal=True, key=f"controls-{name}", vertical_alignment=align, gap="medium")


def control_px(share: float = 1.0) -> int | Literal["stretch"]:
    """The width of a select, slider or number box in a control_row, `share` of CONTROL_PX: 1.5x on a projector, as
    its fonts are (controls.PROJECTOR_CSS); on a phone the column's width."""
    if on_phone():
        return "stretch"
    return round(CONTROL_PX * share * (1.5 if current().style.projector else 1.0))
