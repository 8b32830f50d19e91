"""The Heads page: every head of a layer, one head large, and the whole model at a glance."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from attnviz import api, lazy
from attnviz.api import view_options
from attnviz.figures import interactive, panel_maps
from attnviz.figures.panel_maps import Panel
from attnviz.result import AttentionResult
from attnviz.ui import cache, controls, lazy_views, state, widgets

VIEWS = ("Layer", "Head", "Overview")
NORM_TITLE = "||αf(x)||"


def request_for(p: api.Prepared, opts: widgets.Options) -> api.Prepared:
    """The request to read: on the scratch backend when value-weighting (its results carry the value norms)."""
    if opts.value_weight and p.request.backend == "hf" and api.can_rebuild(p.engine):
        return p.with_backend("scratch")
    return p


def value_panels(raw: AttentionResult, layer: int, head: int, opts: widgets.Options) -> list[Panel]:
    """One head's raw attention beside its ||αf(x)|| (Kobayashi et al. 2020), each on its own scale.

    ||αf(x)|| is always the head's own α times ||f(x)||: setting the first token aside leaves its row and
    column out of the picture but rescales nothing (renormalising α first would inflate every row by
    1 / (1 − α_first) and hide what the norm shows, that the sink's small ||f|| already discounts it).
    """
    plain = widgets.with_options(raw, widgets.Options(opts.hide_special, opts.merge_words, opts.first_aside))
    shown = widgets.with_options(raw, widgets.Options(False, False))  # norms, as positions, on the head's own α
    norms = view_options.value_weighted_norms(shown)[layer, head].numpy()
    masked = interactive.layer_masked(shown, layer)  # a decoder's future grey here too, as on α beside it
    rows, cols = shown.target_tokens, shown.source_tokens
    alpha_title, norm_title = "attention weights α", f"{NORM_TITLE}: α times the size of what the key sends"
    if opts.first_aside:
        norms, rows, cols = norms[1:, 1:], rows[1:], cols[1:]
        masked = None if masked is None else masked[1:, 1:]
        alpha_title += " (first token set aside, rows renormalised)"
        norm_title += " (first token left out, nothing rescaled)"
    return [
        panel_maps.panel(plain, layer, head, f"{alpha_title}\nlayer {layer + 1}, head {head + 1}"),
        Panel(f"{norm_title}\n(Kobayashi et al. 2020)", norms, rows, cols, masked, own_scale=NORM_TITLE),
    ]


def view_picker() -> str:
    """Layer, Head or Overview; kept in the URL."""
    view = state.bound(
        st.segmented_control,
        "View",
        VIEWS,
        url="view",
        key="heads.view",
        default=VIEWS[0],
        valid=lambda v: v in VIEWS,
        required=True,
    )
    return view or VIEWS[0]


def kind_picker(results: api.Results) -> str:
    """The kind of attention to show: the model's first, or, for an encoder-decoder, the one picked (in the URL: a
    class's poll asks about the kind the teacher shows)."""
    kind = next(iter(results))
    if len(results) > 1:
        kind = state.bound(
            st.radio,
            "Attention",
            list(results),
            url="kind",
            key="heads.kind",
            default=kind,
            valid=lambda v: v in results,
            horizontal=True,
        )
    return kind


@dataclass(frozen=True)
class Shown:
    """What every view of a short text's page run draws from: the request read, the kind, the options and the
    result they make, and the key that names this drawing (for the shared figure cache)."""

    inputs: controls.Inputs
    read: api.Prepared
    kind: str
    opts: widgets.Options
    result: AttentionResult

    def key(self, *view: object) -> tuple:
        """The figure cache's key of one view of this drawing."""
        req = self.read.request
        return ("heads", req.model, req.backend, req.text, self.kind, repr(self.opts), self.inputs.style, *view)

    def fetch(self) -> AttentionResult:
        """The result again, for an export (names, not tensors: see widgets.Fetch)."""
        return widgets.with_options(self.read.results().eager(self.kind), self.opts)


def layer_view(shown: Shown) -> None:
    """Every head of one layer, one colour scale."""
    inputs, result, opts = shown.inputs, shown.result, shown.opts
    layer = widgets.pick("Layer", "heads", "layer", result.n_layers)
    state.show_head(layer)
    widgets.grid_caption(shown.kind == "causal")
    with widgets.grid_box("heads"):
        fig = cache.chart(
            shown.key(layer, "grid"),
            lambda: interactive.head_grid(result, layer, style=inputs.style, note=opts.note()),
            "heads.chart.grid",
            theme=None,
        )
    widgets.window_note(layer, result.layer_window(layer), len(result.target))
    widgets.export_buttons(inputs, shown.fetch, layer, None, opts, "heads.export.layer")
    widgets.snapshot_row(inputs, {"view": "layer", "layer": layer + 1, **opts.as_dict()}, lambda: [fig], "heads.snap")


def head_view(shown: Shown) -> None:
    """One head large (beside its value-weighted norms when asked), and its query/key space on demand."""
    inputs, result, opts = shown.inputs, shown.result, shown.opts
    layer = widgets.pick("Layer", "heads", "layer", result.n_layers)
    head = widgets.pick("Head", "heads", "head", result.n_heads)
    state.show_head(layer, head)
    if opts.value_weight:
        panels = value_panels(shown.read.results().eager(shown.kind), layer, head, opts)
        fig = panel_maps.side_by_side(panels, style=inputs.style)
        with widgets.grid_box("heads-value"):
            st.plotly_chart(fig, key="heads.chart.head", theme=None)
    else:
        fig = cache.chart(
            shown.key(layer, head),
            lambda: interactive.head_map(result, layer, head, style=inputs.style, note=opts.note()),
            "heads.chart.head",
            theme=None,  # our fonts: Streamlit's theme would keep tick labels at 12 px in projector mode
        )
    widgets.window_note(layer, result.layer_window(layer), len(result.target))
    widgets.export_buttons(inputs, shown.fetch, layer, head, opts, "heads.export.head")
    snap = {"view": "head", "layer": layer + 1, "head": head + 1, **opts.as_dict()}
    widgets.snapshot_row(inputs, snap, lambda: [fig], "heads.snap")
    if shown.kind != "cross":
        with st.expander("This head's query/key space"):
            text = shown.read.request.text
            widgets.qk_space(shown.read.source, [text], layer, head, inputs.style, "heads.qk", "this text's tokens")


def overview_view(shown: Shown) -> None:
    """Every layer and head as a small map."""
    st.caption("Every layer (rows) and head (columns) as a small map. Hover to see which is which.")
    result, style, note = shown.result, shown.inputs.style, shown.opts.note()
    build = lambda: interactive.overview(result, style=style, note=note)  # noqa: E731
    with widgets.grid_box("overview"):  # a narrow window scrolls it: squeezed, its title was cut
        cache.chart(shown.key("overview"), build, "heads.chart.overview")
    widgets.windows_note([result.layer_window(i) for i in range(result.n_layers)], len(result.target))
    widgets.export_overview(shown.inputs, shown.fetch, shown.opts, "heads.export.overview")


def long_page(inputs: controls.Inputs, asked: api.Prepared) -> None:
    """A long text: its queries and keys held, each view computed from them (ui/lazy_views.py)."""
    eng = asked.engine
    lazy_views.options_note(eng.n_layers, eng.n_heads)
    held = lazy.of(cache.results_or_stop(asked, long_ok=True))
    lazy_views.intro(held)
    widgets.truncation_notice(held)
    lazy_views.heads(inputs, held, view_picker())


def render() -> None:
    """Draw the page: this run's one request (resolved, looked up, encoded at most once), then the view picked."""
    inputs = controls.current()
    st.header("Where does each token look?")
    asked = cache.prepare_or_stop(inputs.model, inputs.backend, inputs.text)
    if cache.request_is_long(inputs.model, inputs.backend, inputs.text):  # this run's request, asked above
        state.keep(*(url for _, url, _, _ in widgets.TOGGLES))  # a short text's options wait in the URL for one
        long_page(inputs, asked)
        return
    state.keep(*lazy_views.URL_KEYS)  # and a long text's log scale and window for a long text
    try:
        axis = asked.axis  # the options this text's tokens have: the held results', else the request's one encoding
    except ValueError:
        axis = None  # bad text: the results' step below says why
    opts = widgets.options("heads", axis, inputs.style.projector)
    read = request_for(asked, opts)
    results = cache.results_or_stop(read)
    kind = kind_picker(results)
    result = widgets.with_options(results.eager(kind), opts)
    widgets.truncation_notice(result)
    if read.request.backend != inputs.backend:
        st.caption("Value-weighting reads the same weights on attnviz's own engine, which keeps the value vectors.")
    shown = Shown(inputs, read, kind, opts, result)
    {"Layer": layer_view, "Head": head_view}.get(view_picker(), overview_view)(shown)
