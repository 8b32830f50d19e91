"""What every engine offers the rest of attnviz, and the errors engines raise."""

from __future__ import annotations

from typing import Protocol

import torch

from attnviz.result import AttentionKind, AttentionResult


class ModelLoadError(Exception):
    """A model could not be found or loaded; the message says what to do."""


class Engine(Protocol):
    name: str  # the name the user gave ("default", a hub id, a folder)
    engine: str  # "hf" or "scratch"
    device: torch.device
    max_tokens: int  # the longest input, special tokens included
    kinds: tuple[AttentionKind, ...]  # what run() returns

    def run(self, text: str, target: str | None = None) -> dict[AttentionKind, AttentionResult]: ...


def to_weights(per_layer: tuple[torch.Tensor, ...] | list[torch.Tensor]) -> torch.Tensor:
    """One (1, H, Tq, Tk) tensor per layer -> (L, H, Tq, Tk) float32 on the CPU."""
    return torch.stack([w[0] for w in per_layer]).detach().float().cpu()  # (L, H, Tq, Tk)
