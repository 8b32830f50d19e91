"""Caches shared by every browser session: models (resources) and per-text results (data)."""

from __future__ import annotations

import streamlit as st

from attnviz.analysis.views import TokenAxis, token_axis
from attnviz.engines import registry
from attnviz.engines.base import ModelLoadError, run_with_cpu_fallback
from attnviz.result import AttentionResult

RESULT_CACHE_ENTRIES = 128


@st.cache_resource(show_spinner=False, max_entries=6)
def engine(model: str, kind: str):
    """One engine per (model, engine kind), shared by all sessions; never mutated."""
    return registry.load(model, kind, allow_paths=False)  # the app never reads arbitrary folders


@st.cache_resource(show_spinner=False, max_entries=3)
def cpu_engine(model: str, kind: str):
    """A CPU copy, loaded only when the GPU runs out of memory."""
    return registry.load(model, kind, "cpu", allow_paths=False)


@st.cache_data(show_spinner=False, max_entries=RESULT_CACHE_ENTRIES)
def attention_with_notice(
    model: str, kind: str, text: str, target: str | None, causal: bool
) -> tuple[dict, str | None]:
    extra = {"causal": True} if causal else {}
    return run_with_cpu_fallback(engine(model, kind), lambda: cpu_engine(model, kind), text, target, **extra)


def attention(model: str, kind: str, text: str, target: str | None = None, causal: bool = False) -> dict:
    results, notice = attention_with_notice(model, kind, text, target, causal)
    if notice:
        st.info(notice)
    return results


def axes(model: str, kind: str, result: AttentionResult) -> tuple[TokenAxis, TokenAxis]:
    """The target and source token axes (words, special tokens) of a result."""
    specials = engine(model, kind).special_tokens
    return token_axis(result.target_tokens, specials), token_axis(result.source_tokens, specials)


def load_engine_or_stop(model: str, kind: str):
    """The engine, with a spinner while it loads; a clear message (and the page stops) if it cannot."""
    try:
        with st.spinner(f"Loading model '{model}' (the first time takes a few seconds)…"):
            return engine(model, kind)
    except (ModelLoadError, ValueError) as err:
        st.error(str(err))
        st.stop()


def attention_or_stop(model: str, kind: str, text: str, target: str | None = None, causal: bool = False) -> dict:
    """Results for the text, or a message for people (never a traceback) and the page stops."""
    load_engine_or_stop(model, kind)
    try:
        with st.spinner("Computing attention…"):
            return attention(model, kind, text, target, causal)
    except ValueError as err:
        st.warning(str(err))
        st.stop()
