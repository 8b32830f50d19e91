"""What the two from-scratch engines share (bert.py, llama.py): taking over a loaded Hugging Face engine, encoding a
text, and one eager pass's result.

A from-scratch engine is built from the Hugging Face engine of the same model: it keeps that engine's tokenizer (one
tokenizer, one lock), device and input limit, and runs its own forward pass over the same tensors (no copy). Its
passes keep no state, so two run at once (engines.base.passes).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnviz.engines.base import Backend, passes, to_weights
from attnviz.engines.hf import HFEngine
from attnviz.engines.hooks import Hooks
from attnviz.result import AttentionKind, AttentionResult
from attnviz.tokens import Encoded


class RebuiltEngine:
    """The part of a from-scratch engine that is the same for every architecture: a subclass checks that the Hugging
    Face engine is its family, rebuilds the model on attnviz's attention and hands both here."""

    backend: Backend = "scratch"
    sinks = False  # the families rebuilt (BERT, Llama) have no learned sink logits

    def __init__(self, hf_engine: HFEngine, model: nn.Module, n_layers: int, n_heads: int, n_kv_heads: int) -> None:
        self.name, self.device, self.device_name = hf_engine.name, hf_engine.device, hf_engine.device_name
        self.tokenizer, self.max_tokens = hf_engine.tokenizer, hf_engine.max_tokens
        self.model = model
        self.n_layers, self.n_heads, self.n_kv_heads = n_layers, n_heads, n_kv_heads
        self._passes = passes(shared=True)

    def encode(self, text: str) -> Encoded:
        """The text as the model's tokenizer cuts it."""
        return self.tokenizer.encode(text, self.max_tokens)

    def _ids(self, enc: Encoded) -> Tensor:
        return torch.tensor([enc.ids], device=self.device)  # (1, T)

    def _result(self, enc: Encoded, per_layer, hooks: Hooks, kind: AttentionKind) -> AttentionResult:
        """One eager pass's AttentionResult: every layer's weights (L, H, T, T) and each head's value norms (L, H, T),
        as the hooks read them, on the CPU."""
        weights, value_norms = to_weights(per_layer), hooks.stacked("value_norms").float().cpu()
        axis = enc.axis
        return AttentionResult(weights, axis, axis, kind, self.name, self.device_name, enc.truncated, value_norms)
