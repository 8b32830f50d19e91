"""Caches shared by every browser session: models (resources) and per-text results (data); errors as messages."""

from __future__ import annotations

from typing import Literal

import streamlit as st

from attnviz import escape
from attnviz.engines import registry
from attnviz.engines.base import Backend, Engine, ModelLoadError, SteppingEngine, WhatIfEngine, run_with_cpu_fallback
from attnviz.engines.scratch import AttentionSteps
from attnviz.result import AttentionKind, AttentionResult
from attnviz.tokens import Encoded

RESULT_CACHE_ENTRIES = 128
WhatIf = Literal["causal"]


@st.cache_resource(show_spinner=False, max_entries=6)
def engine(model: str, backend: Backend) -> Engine:
    """One engine per (model, backend), shared by all sessions; never mutated."""
    return registry.load(model, backend, allow_paths=False)  # the app never reads arbitrary folders


@st.cache_resource(show_spinner=False, max_entries=3)
def cpu_engine(model: str, backend: Backend) -> Engine:
    """A CPU copy, loaded only when the GPU runs out of memory."""
    return registry.load(model, backend, "cpu", allow_paths=False)


def _run(eng: Engine, text: str, target: str | None, what_if: WhatIf | None) -> dict[AttentionKind, AttentionResult]:
    """engine.run, or the engine's causal what-if."""
    if what_if is None:
        return eng.run(text, target)
    if not isinstance(eng, WhatIfEngine):
        raise ValueError(f"The model '{eng.name}' cannot run a causal what-if.")
    return eng.run_causal(text)


@st.cache_data(show_spinner=False, max_entries=RESULT_CACHE_ENTRIES)
def attention_with_notice(
    model: str, backend: Backend, text: str, target: str | None, what_if: WhatIf | None
) -> tuple[dict[AttentionKind, AttentionResult], str | None]:
    """The results for a text (and the GPU fallback's notice, if it was taken), cached across sessions."""
    return run_with_cpu_fallback(
        engine(model, backend), lambda: cpu_engine(model, backend), lambda e: _run(e, text, target, what_if)
    )


def attention(
    model: str, backend: Backend, text: str, target: str | None = None, what_if: WhatIf | None = None
) -> dict[AttentionKind, AttentionResult]:
    """The results for a text; shows the GPU fallback's notice when it was taken."""
    results, notice = attention_with_notice(model, backend, text, target, what_if)
    if notice:
        st.info(notice)
    return results


def load_engine_or_stop(model: str, backend: Backend) -> Engine:
    """The engine, with a spinner while it loads; a clear message (and the page stops) if it cannot."""
    try:
        with st.spinner(f"Loading model {escape.quoted(model)} (the first time takes a few seconds)…"):
            return engine(model, backend)
    except (ModelLoadError, ValueError) as err:
        st.error(escape.md(err))
        st.stop()


def attention_or_stop(
    model: str, backend: Backend, text: str, target: str | None = None, what_if: WhatIf | None = None
) -> dict[AttentionKind, AttentionResult]:
    """Results for the text, or a message for people (never a traceback) and the page stops."""
    load_engine_or_stop(model, backend)
    try:
        with st.spinner("Computing attention…"):
            return attention(model, backend, text, target, what_if)
    except ValueError as err:
        st.warning(escape.md(err))
        st.stop()


def steps_or_stop(eng: SteppingEngine, text: str, layer: int, causal: bool) -> tuple[Encoded, AttentionSteps]:
    """One layer's attention step by step, or a message and the page stops."""
    try:
        return eng.steps(text, layer, causal=causal)
    except ValueError as err:
        st.warning(escape.md(err))
        st.stop()


@st.cache_data(show_spinner=False, max_entries=64)
def cross_what_if(model: str, text_a: str, text_b: str) -> AttentionResult:
    """Sentence B's queries on sentence A's keys and values, through the scratch backend's layers."""
    eng = engine(model, "scratch")
    if not isinstance(eng, WhatIfEngine):
        raise ValueError(f"The model '{model}' cannot run a cross-attention what-if.")
    return eng.cross_what_if(text_a, text_b)
