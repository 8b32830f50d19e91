"""What every engine offers the rest of attnviz, and the errors engines raise."""

from __future__ import annotations

from typing import Protocol

import torch

from attnviz.result import AttentionKind, AttentionResult
from attnviz.tokens import Encoded


class ModelLoadError(Exception):
    """A model could not be found or loaded; the message says what to do."""


class Engine(Protocol):
    name: str  # the name the user gave ("default", a hub id, a folder)
    engine: str  # "hf" or "scratch"
    device: torch.device
    max_tokens: int  # the longest input, special tokens included
    kinds: tuple[AttentionKind, ...]  # what run() returns
    special_tokens: frozenset[str]  # [CLS], [SEP], <s>, ... as they appear in results' token tuples

    def encode(self, text: str) -> Encoded: ...

    def run(self, text: str, target: str | None = None) -> dict[AttentionKind, AttentionResult]: ...


def to_weights(per_layer: tuple[torch.Tensor, ...] | list[torch.Tensor]) -> torch.Tensor:
    """One (1, H, Tq, Tk) tensor per layer -> (L, H, Tq, Tk) float32 on the CPU."""
    return torch.stack([w[0] for w in per_layer]).detach().float().cpu()  # (L, H, Tq, Tk)


OOM_NOTICE = "The GPU ran out of memory, so this result was computed on the CPU (slower, same numbers)."


def run_with_cpu_fallback(engine, cpu_engine, text: str, target: str | None = None, **kwargs):
    """engine.run(...), or, if the GPU runs out of memory, the same request on a CPU engine.

    Returns (results, notice): the notice is None unless the fallback was taken. `cpu_engine` is a
    zero-argument callable, so a CPU copy of the model is only loaded when it is needed.
    """
    try:
        return engine.run(text, target, **kwargs), None
    except torch.OutOfMemoryError:
        if engine.device.type != "cuda":
            raise
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return cpu_engine().run(text, target, **kwargs), OOM_NOTICE
