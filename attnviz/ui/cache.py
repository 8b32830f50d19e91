"""The pages' side of the one request path (attnviz.service): spinners, progress bars, and errors as messages.

Everything a page computes goes through the door (attnviz.api: a request's Prepared, a Work), which keeps models and
results for every session (settings in attnviz.service's docstring); this module decides nothing else, and it imports
the door, never the service or an engine. Only the Heads and Model overview pages read long
texts; the others say so.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from attnviz import api, escape
from attnviz.admission import Refused
from attnviz.api import (
    ANALYSING,
    READING,
    AttentionSteps,
    Backend,
    Engine,
    InterveningEngine,
    ModelLoadError,
    SteppingEngine,
    WhatIf,
    eager_tokens,
    runs,
)
from attnviz.result import Results
from attnviz.tokens import Encoded
from attnviz.ui import state
from attnviz.ui.halt import halt
from attnviz.ui.progress import TimedProgress

T = TypeVar("T")
LONG_PAGES = "The Heads and Model overview pages"
engine, policy = api.server_engine, api.policy  # the shared models and what this server offers


RUN_KEY = "frame.requests"  # this run's requests, made once each (ui/frame.py empties it as every run starts)


def new_run() -> None:
    """Forget the last run's requests: a run resolves each model it asks for once, never across runs."""
    st.session_state[RUN_KEY] = {}


def run_request(model: str, backend: Backend, text: str) -> api.Prepared | None:
    """The request this run already made for a text and model, if any (nothing is resolved)."""
    return st.session_state.get(RUN_KEY, {}).get((model, backend, text, None, None))


def prepare_or_stop(
    model: str, backend: Backend, text: str, target: str | None = None, what_if: WhatIf | None = None
) -> api.Prepared:
    """This run's request through the door, as the server's policy allows: the model resolved and loaded once per
    run (a spinner while it loads); a clear message, and the page stops, if it cannot be."""
    made = st.session_state.setdefault(RUN_KEY, {})
    key = (model, backend, text, target, what_if)
    if key in made:
        return made[key]
    try:
        with st.spinner(f"Loading {named(model, start=False)} (the first time takes a few seconds)…"):
            made[key] = api.prepare(model, backend, text, target, what_if, server=True)
            return made[key]
    except (ModelLoadError, ValueError) as err:
        st.error(escape.md(err))
        halt()


def _long(p: api.Prepared) -> bool:
    """Whether the request's text is long on its model (the one decision, kept on the request)."""
    try:
        return p.long
    except ValueError:  # bad text: the page's own call says what is wrong with it
        return False


def request_is_long(model: str, backend: Backend, text: str) -> bool:
    """Whether this text gets a LazyAttention on this model (this run's one request: held results say, else the
    text is encoded once)."""
    return _long(prepare_or_stop(model, backend, text))


def encoded_or_stop(model: str, backend: Backend, text: str) -> Encoded:
    """The text as this run's request encodes it (once a run, request_is_long's encoding), or what is wrong with it
    said as results_or_stop says it (an empty text from a link's ?text=) and the page stops."""
    try:
        return prepare_or_stop(model, backend, text).encoded
    except ValueError as err:
        st.warning(escape.md(err))
        halt()


def attention(
    model: str, backend: Backend, text: str, target: str | None = None, what_if: WhatIf | None = None
) -> Results:
    """The results for a text (this run's one request); shows the GPU fallback's notice when it was taken."""
    results = prepare_or_stop(model, backend, text, target, what_if).results()
    if results.notice:
        st.info(results.notice)
    return results


def heavy(what: str, estimate: int, compute: Callable[[], T]) -> T:
    """Heavy work under the server's one budget (attnviz.admission): its place in line shown while it waits (and
    left when the page is left); a refusal is a message, and the page stops."""
    ctx = get_script_run_ctx()
    owner = ctx.session_id if ctx is not None else "no session"
    note = st.empty()

    def waiting(place: int, count: int) -> None:
        note.info(
            f"Heavy work waits its turn on this server ({escape.md(what)}): place {place} of {count} in line. "
            "Typed sentences on the loaded models still work meanwhile."
        )

    try:
        with api.admission().admitted(owner, what, estimate, waiting):
            note.empty()
            return compute()
    except Refused as err:
        note.empty()
        st.warning(escape.md(err))
        halt()


def get(work: api.Work[T]) -> T:
    """A door's Work for this page: from the memo when held, else computed once (admitted first when heavy)."""
    return work.get(admit=heavy)


IMPORTANCE_BAR = "Knocking out each head"  # the importance grid's progress bar, on the Knock out and Class pages


def on_demand(
    make: Callable[[Callable | None], api.Work],
    label: str,
    key: str,
    *,
    note: str = "",
    bar: str | None = None,
    spinner: str | None = None,
) -> Any:
    """Heavy work a page offers behind a button: its value when some session has it (no button then), else the
    button (and `note` under it) until pressed, and then the work computed once for every session, admitted first,
    with a progress bar (`bar`: `make` is given its step) or a spinner. None until asked. The work's errors are the
    caller's to word (a ValueError, a ModelLoadError)."""
    held = make(None).held()
    if held is not None:
        return held
    slot = st.empty()
    if not slot.button(label, key=key):
        if note:
            st.caption(note)
        return None
    slot.empty()  # pressed: what it computes takes its place (it stood over the finished grid until the next run)
    if bar is not None:
        progress = LazyBar(bar)
        value = get(make(progress.step))
        progress.done()
        return value
    with st.spinner(spinner) if spinner else contextlib.nullcontext():
        return get(make(None))


class LazyBar:
    """A progress bar with the time left that appears only if the work it reports on is computed (not on a memo
    hit): pass `step` as the work's progress, call `done()` after."""

    def __init__(self, phase: str) -> None:
        self.phase = phase
        self.bar: TimedProgress | None = None
        self.callback: Callable[[int, int], None] | None = None

    def step(self, done: int, total: int) -> None:
        """The work's progress callback."""
        if self.callback is None:
            self.bar = TimedProgress({self.phase: 1.0})
            self.callback = self.bar.phase(self.phase)
        self.callback(done, total)

    def done(self) -> None:
        """Clear the bar, if it appeared."""
        if self.bar is not None:
            self.bar.done()


def importance(eng: Engine, text: str, mode: api.Mode) -> tuple:
    """(L, H) loss increase of each head knocked out alone in `mode`, and the clean loss: the Knock out page's grid
    and the class poll's answer (the door's one key for both), admitted as heavy work, with a progress bar."""
    bar = LazyBar(IMPORTANCE_BAR)
    got = get(api.importance_work(eng, text, mode, bar.step))
    bar.done()
    return got


def load_engine_or_stop(model: str, backend: Backend) -> Engine:
    """The engine, with a spinner while it loads; a clear message (and the page stops) if it cannot."""
    try:
        with st.spinner(f"Loading {named(model, start=False)} (the first time takes a few seconds)…"):
            return engine(model, backend)
    except (ModelLoadError, ValueError) as err:
        st.error(escape.md(err))
        halt()


def named(model: str, start: bool = True) -> str:
    """A model in a page's message, as markdown: a bundled one by what it is ("Gemma 3 270M"; capitalised where it
    starts the sentence), any other by its name, quoted and escaped."""
    return escape.md(api.shown_name(model, start)) if model in api.BUNDLED_MODELS else escape.quoted(model)


def stepping_engine_or_stop(model: str, backend: Backend) -> SteppingEngine:
    """The model step by step: BERT and Llama rebuilt on the scratch backend, other decoders on attnviz's attention
    function as they are loaded (engines.decoder_steps); others give way to the bundled BERT, with a notice."""
    eng = load_engine_or_stop(model, backend)
    if isinstance(eng, SteppingEngine) and eng.backend == "scratch":
        return eng
    if not api.can_rebuild(eng):
        why = api.why_no_steps(eng)
        if why is None and isinstance(eng, SteppingEngine):
            return eng
        st.info(f"{named(model)} cannot be shown step by step ({escape.md(why)}); this view shows the bundled BERT.")
        model = api.DEFAULT_MODEL
    eng = load_engine_or_stop(model, "scratch")
    if not isinstance(eng, SteppingEngine):
        st.error(f"The scratch backend of {named(model, start=False)} cannot show its layers step by step.")
        halt()
    return eng


def decoder_or_stop(model: str, backend: Backend) -> InterveningEngine:
    """The engine, if it is a decoder attnviz can intervene on (interventions.runs); else a message, and the page
    stops."""
    eng = load_engine_or_stop(model, backend)
    if not runs.can_intervene(eng):
        st.info(
            f"{runs.DECODER_ONLY} Two such decoders come bundled with attnviz: SmolLM2 and Gemma 3 270M (the "
            "sidebar's model box, or a button below)."
        )
        row = st.container(horizontal=True, key="controls-decoders")  # side by side, as wide as their words
        row.button("Show this page with SmolLM2", key="decoder.smollm2", on_click=state.choose_model, args=("smollm2",))
        row.button("With Gemma 3 270M", key="decoder.gemma3", on_click=state.choose_model, args=("gemma3",))
        halt()
    return runs.decoder(eng)


def attention_or_stop(
    model: str,
    backend: Backend,
    text: str,
    target: str | None = None,
    what_if: WhatIf | None = None,
    *,
    long_ok: bool = False,
) -> Results:
    """Results for the text, or a message for people (never a traceback) and the page stops (results_or_stop)."""
    return results_or_stop(prepare_or_stop(model, backend, text, target, what_if), long_ok=long_ok)


def results_or_stop(p: api.Prepared, *, long_ok: bool = False) -> Results:
    """The request's results, or a message for people (never a traceback) and the page stops.

    A long text (a LazyAttention) only where the page says it can draw one (long_ok); elsewhere a message.
    """
    eng, req = p.engine, p.request
    try:
        long = req.what_if is None and p.long
        if long and not long_ok:
            stop_long(eng, "This page draws every weight")
        if not long:
            results = p.held()  # kept: no spinner (each starts a thread, and a class's followers draw it at once)
            if results is None:
                with st.spinner("Computing attention…"):
                    results = p.results()
        else:
            results = p.held()
            if results is None:
                n = p.tokens

                def first_pass() -> Results:
                    bar = TimedProgress({READING: 2.0, ANALYSING: 3.0})  # about 2 : 3 on a CPU
                    got = p.results(bar)
                    bar.done()
                    return got

                results = heavy(f"a {n:,}-token text's first pass", api.long_estimate(eng, n), first_pass)
        if results.notice:
            st.info(results.notice)
        return results
    except ValueError as err:
        st.warning(escape.md(err))
        halt()


def stop_long(eng: Engine, what: str, limit: int | None = None) -> None:
    """Say that this page takes texts up to `limit` tokens (default: the eager budget), and where long ones go; the
    page stops."""
    limit = limit or eager_tokens(eng.n_layers, eng.n_heads)
    st.info(
        f"{what}, so it takes texts up to {limit:,} tokens on this model; this one is longer. "
        f"{LONG_PAGES} show long texts (up to {eng.max_tokens:,} tokens): go there, or shorten the text."
    )
    halt()


# The step-by-step pages draw a dozen maps of a layer, each with a row (and some a column) for every token: at 512
# tokens the Inside page's figures were 9 MB for BERT and 21 MB for Gemma 3 (its heads are 256 numbers wide), at 1,300
# Gemma tokens (its eager budget is 1,365) 70 MB, sent to every student following the page
STEPS_TOKENS = 512


def steps_or_stop(eng: Engine, text: str, layer: int, causal: bool) -> tuple[Encoded, AttentionSteps]:
    """One layer's attention step by step (kept for every session), or a message and the page stops."""
    try:
        limit = min(STEPS_TOKENS, eager_tokens(eng.n_layers, eng.n_heads))
        if api.token_count(eng, text) > limit:
            stop_long(eng, "This page draws every intermediate of a layer, a row for every token", limit)
        return get(api.steps_work(eng, text, layer, causal))
    except ValueError as err:
        st.warning(escape.md(err))
        halt()


def cross_what_if(model: str, text_a: str, text_b: str) -> api.AttentionResult:
    """Sentence B's queries on sentence A's keys and values through the model's scratch backend, kept."""
    return get(api.cross_work(engine(model, "scratch"), text_a, text_b))


FIGURES_KEPT = 32
_figures: collections.OrderedDict = collections.OrderedDict()
_figures_lock = threading.Lock()


def chart(
    view_key: tuple, build: Callable[[], object], key: str, theme: Literal["streamlit"] | None = "streamlit"
) -> object:
    """A plotly chart drawn as every session that shows the same view draws it, built and serialised once.

    The figure comes from `figure` (built once); the chart element (its JSON, its id) is made by the first session
    and replayed to the others by Streamlit's cached-element replay, so 100 followers of a class pay for one
    `to_json` of a new view, not 100. Returns the figure (for a snapshot of the view)."""
    fig = figure(view_key, build)
    _chart(repr(view_key), key, theme, fig)
    return fig


@st.cache_resource(show_spinner=False, max_entries=FIGURES_KEPT)
def _chart(ident: str, key: str, theme: Literal["streamlit"] | None, _fig) -> None:
    st.plotly_chart(_fig, key=key, theme=theme)  # on st, not a container: a replay lands where the caller is


def figure(key: tuple, build: Callable[[], object]) -> object:
    """A figure built once for every session that shows the same view (a class following its teacher draws one
    view 30 times at once); the last FIGURES_KEPT views are kept. Figures are never changed after they are built."""
    with _figures_lock:
        if key in _figures:
            _figures.move_to_end(key)
            return _figures[key]
    fig = build()
    with _figures_lock:
        _figures[key] = fig
        while len(_figures) > FIGURES_KEPT:
            _figures.popitem(last=False)
    return fig
