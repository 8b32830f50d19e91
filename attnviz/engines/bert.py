"""BERT's encoder rebuilt on scratch.MultiHeadAttention, loading a Hugging Face BertModel's weights.

Embeddings (word + position + token type, LayerNorm), then per layer: attention, add &
LayerNorm, feed-forward (GELU), add & LayerNorm. The same weights can run with a causal
mask: what BERT's heads would do if they could not look ahead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnviz.engines.base import Architecture, rename_weights, share_weights, to_weights
from attnviz.engines.hf import HFEngine
from attnviz.engines.hooks import Hooks, point
from attnviz.engines.rebuilt import RebuiltEngine
from attnviz.engines.scratch import MultiHeadAttention, causal_mask, key_padding_mask
from attnviz.engines.steps import AttentionSteps, read_steps, steps_hooks
from attnviz.result import AttentionKind, AttentionResult, Results
from attnviz.tokens import Encoded

ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
}


@dataclass(frozen=True)
class BertConfig:
    """The sizes of a BERT encoder, read from a Hugging Face config."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"

    @classmethod
    def from_hf(cls, cfg) -> BertConfig:
        """Our config from a transformers BertConfig; a ValueError for anything we do not rebuild."""
        if getattr(cfg, "model_type", "bert") != "bert":
            raise ValueError(f"the scratch BERT engine needs a BERT model, not {cfg.model_type!r}")
        if getattr(cfg, "position_embedding_type", "absolute") != "absolute":
            raise ValueError("the scratch BERT engine supports absolute position embeddings only")
        if cfg.hidden_act not in ACTIVATIONS:
            raise ValueError(f"unsupported activation {cfg.hidden_act!r}; supported: {sorted(ACTIVATIONS)}")
        return cls(
            cfg.vocab_size,
            cfg.hidden_size,
            cfg.num_hidden_layers,
            cfg.num_attention_heads,
            cfg.intermediate_size,
            cfg.max_position_embeddings,
            cfg.type_vocab_size,
            cfg.layer_norm_eps,
            cfg.hidden_act,
        )


class BertEmbeddings(nn.Module):
    """Word + position + token-type embeddings, then LayerNorm."""

    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.word = nn.Embedding(c.vocab_size, c.hidden_size)
        self.position = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor) -> Tensor:
        """(B, T) ids -> (B, T, D) vectors."""
        positions = torch.arange(input_ids.size(1), device=input_ids.device)  # (T,)
        x = self.word(input_ids) + self.token_type(token_type_ids) + self.position(positions)  # (B, T, D)
        return self.norm(x)


class BertLayer(nn.Module):
    """Attention, add & LayerNorm, feed-forward, add & LayerNorm (post-LayerNorm, as in BERT)."""

    def __init__(self, c: BertConfig, index: int = 0) -> None:
        super().__init__()
        self.index = index
        self.attention = MultiHeadAttention(c.hidden_size, c.num_attention_heads, layer=index)
        self.attention_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.ffn_in = nn.Linear(c.hidden_size, c.intermediate_size)
        self.ffn_out = nn.Linear(c.intermediate_size, c.hidden_size)
        self.ffn_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.act = ACTIVATIONS[c.hidden_act]

    def forward(self, x: Tensor, mask: Tensor | None, hooks: Hooks | None = None) -> tuple[Tensor, Tensor]:
        """(B, T, D) -> (B, T, D) and the attention weights (B, H, T, T)."""
        x = point(hooks, "resid", self.index, x)
        attended, weights = self.attention(x, x, x, mask, hooks=hooks)  # (B, T, D), (B, H, T, T)
        x = self.attention_norm(x + attended)  # post-LayerNorm, as in BERT
        x = self.ffn_norm(x + self.ffn_out(self.act(self.ffn_in(x))))  # (B, T, D)
        return x, weights


class ScratchBert(nn.Module):
    """BERT's encoder on our own attention. forward returns (hidden, per-layer weights)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.layers = nn.ModuleList(BertLayer(config, i) for i in range(config.num_hidden_layers))

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        *,
        causal: bool = False,
        hooks: Hooks | None = None,
    ) -> tuple[Tensor, tuple[Tensor, ...]]:
        """input_ids (B, T) -> (hidden (B, T, D), one (B, H, T, T) weight tensor per layer).

        `hooks` read or replace the attention's points for this call (engines.hooks).
        """
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        mask = None if attention_mask is None else key_padding_mask(attention_mask)  # (B, 1, 1, T)
        if causal:
            tri = causal_mask(input_ids.size(1), device=input_ids.device)  # (T, T)
            mask = tri if mask is None else mask & tri  # broadcasts to (B, 1, T, T)
        x = self.embeddings(input_ids, token_type_ids)  # (B, T, D)
        all_weights = []
        for layer in self.layers:
            x, w = layer(x, mask, hooks)
            all_weights.append(w)
        return x, tuple(all_weights)


# Hugging Face BertModel names -> ours. Every one of our parameters must be filled exactly once.
NAME_TABLE: tuple[tuple[str, str], ...] = (
    (r"embeddings\.word_embeddings\.", "embeddings.word."),
    (r"embeddings\.position_embeddings\.", "embeddings.position."),
    (r"embeddings\.token_type_embeddings\.", "embeddings.token_type."),
    (r"embeddings\.LayerNorm\.", "embeddings.norm."),
    (r"encoder\.layer\.(\d+)\.attention\.self\.query\.", r"layers.\1.attention.w_q."),
    (r"encoder\.layer\.(\d+)\.attention\.self\.key\.", r"layers.\1.attention.w_k."),
    (r"encoder\.layer\.(\d+)\.attention\.self\.value\.", r"layers.\1.attention.w_v."),
    (r"encoder\.layer\.(\d+)\.attention\.output\.dense\.", r"layers.\1.attention.w_o."),
    (r"encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.", r"layers.\1.attention_norm."),
    (r"encoder\.layer\.(\d+)\.intermediate\.dense\.", r"layers.\1.ffn_in."),
    (r"encoder\.layer\.(\d+)\.output\.dense\.", r"layers.\1.ffn_out."),
    (r"encoder\.layer\.(\d+)\.output\.LayerNorm\.", r"layers.\1.ffn_norm."),
)
IGNORED = re.compile(r"(pooler\.|cls\.|.*position_ids$|.*token_type_ids$)")


def translate_state_dict(hf_state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Rename a Hugging Face BERT state dict to ScratchBert's names (a "bert." prefix is allowed)."""
    return rename_weights(hf_state, NAME_TABLE, IGNORED, "bert", "bert.")


def from_hf(hf_model: nn.Module) -> ScratchBert:
    """A ScratchBert sharing a Hugging Face BertModel's tensors (no copy), in eval mode."""
    with torch.device("meta"):  # no memory for weights that are about to be replaced by the model's own
        model = ScratchBert(BertConfig.from_hf(hf_model.config))
    share_weights(model, translate_state_dict(hf_model.state_dict()), "BERT")
    first = next(hf_model.parameters())
    return model.to(device=first.device, dtype=first.dtype).eval()


class ScratchBertEngine(RebuiltEngine):
    """BERT on our own attention: a Hugging Face tokenizer, our own forward pass.

    An Engine, a SteppingEngine and a WhatIfEngine (engines/base.py).
    """

    family = "bert"
    architecture: Architecture = "encoder"
    model: ScratchBert
    kinds: tuple[AttentionKind, ...] = ("self",)
    lazy = False  # BERT's 512 positions always fit the eager budget

    def __init__(self, hf_engine: HFEngine) -> None:
        if hf_engine.architecture != "encoder" or hf_engine.family != "bert":
            raise ValueError(f"the scratch engine rebuilds BERT; '{hf_engine.name}' is not a BERT encoder")
        model = from_hf(hf_engine.model)
        heads = model.config.num_attention_heads
        super().__init__(hf_engine, model, model.config.num_hidden_layers, heads, heads)

    def run(self, enc: Encoded, target: str | None = None, progress=None) -> Results:
        """{"self": ...}: every layer's weights (BERT's 512 positions always fit the eager budget)."""
        return self._run(enc, causal=False, progress=progress)

    def run_causal(self, enc: Encoded) -> Results:
        """{"causal": ...}: the same weights with the causal mask in every layer (a what-if)."""
        return self._run(enc, causal=True)

    def _run(self, enc: Encoded, *, causal: bool, progress=None) -> Results:
        hooks = Hooks(read=("value_norms",), progress=progress, n_layers=self.n_layers)
        with self._passes, torch.inference_mode():
            _, per_layer = self.model(self._ids(enc), causal=causal, hooks=hooks)
        kind: AttentionKind = "causal" if causal else "self"
        return Results({kind: self._result(enc, per_layer, hooks, kind)})

    def batch_weights(self, ids: list[tuple[int, ...]]) -> tuple[Tensor, ...]:
        """One pass over several texts' ids, padded on the right: each layer's (B, H, T, T) weights, T the longest
        (text b's own are [b, :, :n_b, :n_b]: its pads are masked out as keys). HFEngine.batch_weights' contract."""
        longest = max(len(i) for i in ids)
        pad = self.tokenizer.hf.pad_token_id if self.tokenizer.hf.pad_token_id is not None else 0
        batch = torch.tensor([list(i) + [pad] * (longest - len(i)) for i in ids], device=self.device)
        mask = torch.tensor([[1] * len(i) + [0] * (longest - len(i)) for i in ids], device=self.device)
        with self._passes, torch.inference_mode():
            return self.model(batch, attention_mask=mask)[1]

    def forward(self, enc: Encoded, hooks: Hooks, *, causal: bool = False) -> Tensor:
        """One pass with these hooks (engines.hooks): (1, T, D) hidden states of the last layer."""
        with self._passes, torch.inference_mode():
            return self.model(self._ids(enc), causal=causal, hooks=hooks)[0]

    def steps(self, text: str, layer: int, *, causal: bool = False) -> tuple[Encoded, AttentionSteps]:
        """The tokens of `text` and every intermediate of one layer's attention, for teaching."""
        enc = self.encode(text)
        hooks = steps_hooks(layer)
        self.forward(enc, hooks, causal=causal)
        mask = causal_mask(len(enc.ids), device=self.device) if causal else None  # (T, T)
        return enc, read_steps(hooks, layer, mask)

    def cross_what_if(self, text_a: str, text_b: str) -> AttentionResult:
        """What if sentence B attended to sentence A with BERT's own W_Q, W_K, W_V?

        Each sentence runs through BERT on its own; in every layer, queries come from B's hidden
        states and keys and values from A's, through that layer's attention. BERT never does this:
        it is a what-if, labelled as one.
        """
        a, b = self.encode(text_a), self.encode(text_b)
        ha, hb = Hooks(read=("resid",)), Hooks(read=("resid",))  # the hidden states entering every layer
        self.forward(a, ha)
        self.forward(b, hb)
        with self._passes, torch.inference_mode():
            weights = [
                block.attention(hb.get("resid", i), ha.get("resid", i), ha.get("resid", i))[1]
                for i, block in enumerate(cast(list[BertLayer], self.model.layers))
            ]
        model = f"{self.name} (cross-attention what-if)"
        return AttentionResult(to_weights(weights), b.axis, a.axis, "cross", model, self.device_name, a.truncated)
