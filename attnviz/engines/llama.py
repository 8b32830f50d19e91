"""A Llama-style decoder rebuilt on scratch.MultiHeadAttention, loading a Hugging Face LlamaModel's weights.

Per layer: RMSNorm, attention with rotary positions, a causal mask and grouped-query heads (a
few key/value heads, each shared by a group of query heads), add; RMSNorm, a SwiGLU feed-forward,
add. Then a last RMSNorm and the language-model head (tied to the embeddings in SmolLM2). The
model shares the Hugging Face model's tensors instead of copying them: one set of weights in memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnviz.engines.base import (
    Architecture,
    Generation,
    by_rows,
    eager_tokens,
    is_long,
    make_generation,
    rename_weights,
    rope_parameters,
    rope_type,
    share_weights,
    to_weights,
)
from attnviz.engines.hf import HFDecoderEngine
from attnviz.engines.hooks import Hooks, point
from attnviz.engines.rebuilt import RebuiltEngine
from attnviz.engines.scratch import MultiHeadAttention, RotaryEmbedding, causal_mask
from attnviz.engines.steps import AttentionSteps, read_steps, steps_hooks
from attnviz.lazy import LazyAttention, forward_reads, forward_stats, given_normalisers
from attnviz.result import AttentionKind, Results
from attnviz.tokens import Encoded


@dataclass(frozen=True)
class LlamaConfig:
    """The sizes of a Llama decoder, read from a Hugging Face config."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool

    @classmethod
    def from_hf(cls, cfg) -> LlamaConfig:
        """Our config from a transformers LlamaConfig; a ValueError for anything we do not rebuild."""
        if getattr(cfg, "model_type", None) != "llama":
            raise ValueError(f"the scratch Llama engine needs a Llama model, not {getattr(cfg, 'model_type', None)!r}")
        rope = rope_parameters(cfg)
        if rope_type(cfg) != "default":
            raise ValueError(f"the scratch Llama engine supports plain rotary positions, not {rope_type(cfg)!r}")
        if cfg.hidden_act != "silu" or getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
            raise ValueError("the scratch Llama engine needs a SiLU feed-forward and no biases")
        theta = rope.get("rope_theta", getattr(cfg, "rope_theta", 10000.0))
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        kv = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        return cls(
            cfg.vocab_size,
            cfg.hidden_size,
            cfg.num_hidden_layers,
            cfg.num_attention_heads,
            kv,
            head_dim,
            cfg.intermediate_size,
            cfg.rms_norm_eps,
            float(theta),
            cfg.max_position_embeddings,
            bool(getattr(cfg, "tie_word_embeddings", False)),
        )


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight, computed in float32 (no mean is subtracted, no bias)."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size, dtype=torch.float32))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        """(.., D) -> (.., D)."""
        x32 = x.to(torch.float32)
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * normed.to(x.dtype)


class SwiGLU(nn.Module):
    """The feed-forward: down(silu(gate(x)) * up(x)), a long text's rows at a time (engines.base.by_rows)."""

    def __init__(self, d: int, d_ff: int) -> None:
        super().__init__()
        self.gate = nn.Linear(d, d_ff, bias=False)
        self.up = nn.Linear(d, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d, bias=False)

    def _rows(self, x: Tensor) -> Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, D) -> (B, T, D)."""
        return by_rows(self._rows, x)


class LlamaBlock(nn.Module):
    """RMSNorm, rotary grouped-query attention, add; RMSNorm, SwiGLU, add (pre-norm)."""

    def __init__(self, c: LlamaConfig, rope: RotaryEmbedding, index: int = 0) -> None:
        super().__init__()
        self.index = index
        self.input_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.attention = MultiHeadAttention(
            c.hidden_size,
            c.num_attention_heads,
            num_kv_heads=c.num_key_value_heads,
            head_dim=c.head_dim,
            bias=False,
            rope=rope,
            layer=index,
        )
        self.post_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = SwiGLU(c.hidden_size, c.intermediate_size)

    def forward(
        self, x: Tensor, mask: Tensor | None, positions: Tensor, hooks: Hooks | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """(B, T, D) -> (B, T, D) and the attention weights (B, H, T, T); None in a fused pass (engines.hooks)."""
        x = point(hooks, "resid", self.index, x)
        h = self.input_norm(x)
        attended, weights = self.attention(h, h, h, mask, positions, hooks)
        x = x + attended
        return x + self.mlp(self.post_norm(x)), weights


class ScratchLlama(nn.Module):
    """A Llama decoder on our own attention. forward returns (hidden, per-layer weights)."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.rope = RotaryEmbedding(config.head_dim, config.rope_theta)
        self.layers = nn.ModuleList(LlamaBlock(config, self.rope, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = None if config.tie_word_embeddings else nn.Linear(config.hidden_size, config.vocab_size, False)

    def forward(self, ids: Tensor, hooks: Hooks | None = None) -> tuple[Tensor, tuple[Tensor | None, ...]]:
        """ids (B, T) -> (final hidden (B, T, D), one (B, H, T, T) weight tensor per layer).

        `hooks` read or replace the attention's points for this call (engines.hooks); a fused pass (a long input)
        forms no T x T mask and no weights (None per layer).
        """
        t = ids.size(1)
        positions = torch.arange(t, device=ids.device)
        fused = hooks is not None and hooks.fused
        mask = None if fused else causal_mask(t, device=ids.device)  # (T, T)
        x, weights = self.embed(ids), []  # (B, T, D)
        for layer in self.layers:
            x, w = layer(x, mask, positions, hooks)
            weights.append(w)
        return self.norm(x), tuple(weights)

    def logits(self, hidden: Tensor) -> Tensor:
        """(B, T, D) -> (B, T, V): next-token scores (the head tied to the embeddings when the model ties them)."""
        return hidden @ self.embed.weight.T if self.lm_head is None else self.lm_head(hidden)


# Hugging Face Llama names -> ours ("model." prefixed in LlamaForCausalLM). Every parameter filled exactly once.
NAME_TABLE: tuple[tuple[str, str], ...] = (
    (r"embed_tokens\.", "embed."),
    (r"layers\.(\d+)\.self_attn\.q_proj\.", r"layers.\1.attention.w_q."),
    (r"layers\.(\d+)\.self_attn\.k_proj\.", r"layers.\1.attention.w_k."),
    (r"layers\.(\d+)\.self_attn\.v_proj\.", r"layers.\1.attention.w_v."),
    (r"layers\.(\d+)\.self_attn\.o_proj\.", r"layers.\1.attention.w_o."),
    (r"layers\.(\d+)\.mlp\.gate_proj\.", r"layers.\1.mlp.gate."),
    (r"layers\.(\d+)\.mlp\.up_proj\.", r"layers.\1.mlp.up."),
    (r"layers\.(\d+)\.mlp\.down_proj\.", r"layers.\1.mlp.down."),
    (r"layers\.(\d+)\.input_layernorm\.", r"layers.\1.input_norm."),
    (r"layers\.(\d+)\.post_attention_layernorm\.", r"layers.\1.post_norm."),
    (r"norm\.", "norm."),
    (r"lm_head\.", "lm_head."),
)
IGNORED = re.compile(r".*rotary_emb\.")
IGNORED_TIED = re.compile(r"(.*rotary_emb\.|lm_head\.)")  # a tied lm_head is the embedding itself


def translate_state_dict(hf_state: dict[str, Tensor], tied: bool) -> dict[str, Tensor]:
    """Rename a Hugging Face Llama state dict to ScratchLlama's names (a tied lm_head is left out)."""
    ignored = IGNORED_TIED if tied else IGNORED
    return rename_weights(hf_state, NAME_TABLE, ignored, "llama", "model.")


def from_hf(hf_model: nn.Module) -> ScratchLlama:
    """A ScratchLlama sharing a Hugging Face Llama model's tensors (no copy), in eval mode."""
    config = LlamaConfig.from_hf(hf_model.config)
    with torch.device("meta"):  # no memory for weights that are about to be replaced by the model's own
        model = ScratchLlama(config)
    share_weights(model, translate_state_dict(hf_model.state_dict(), config.tie_word_embeddings), "Llama")
    device = next(hf_model.parameters()).device
    model.rope = RotaryEmbedding(config.head_dim, config.rope_theta, device=device)  # its buffer was on "meta"
    for block in cast(list[LlamaBlock], model.layers):
        block.attention.rope = model.rope
    return model.eval()


class ScratchLlamaEngine(RebuiltEngine):
    """A Llama decoder on our own attention: the Hugging Face tokenizer and weights, our forward pass.

    An Engine, a SteppingEngine and a GeneratingEngine (engines/base.py).
    """

    family = "llama"
    architecture: Architecture = "decoder"
    model: ScratchLlama
    kinds: tuple[AttentionKind, ...] = ("causal",)
    lazy = True  # inputs past the eager budget keep Q and K (engines.base.is_long)

    def __init__(self, hf_engine: HFDecoderEngine) -> None:
        if hf_engine.family != "llama":
            raise ValueError(f"the scratch Llama engine rebuilds Llama models; '{hf_engine.name}' is not one")
        model = from_hf(hf_engine.model)
        c = model.config
        super().__init__(hf_engine, model, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads)
        self.stop_ids = hf_engine.stop_ids
        self._chat = hf_engine.chat_prompt
        self.has_chat_template = hf_engine.has_chat_template

    def run(self, enc: Encoded, target: str | None = None, progress=None) -> Results:
        """{"causal": ...}: every layer's weights and each head's value norms; a LazyAttention past the eager budget."""
        if is_long(self, len(enc.ids)):
            return Results({"causal": self.lazy_run(enc, progress)}, lazy=True)
        hooks = Hooks(read=("value_norms",), progress=progress, n_layers=self.n_layers)
        _, per_layer = self.forward(enc, hooks)
        return Results({"causal": self._result(enc, per_layer, hooks, "causal")})

    def forward(self, enc: Encoded, hooks: Hooks | None = None) -> tuple[Tensor, tuple[Tensor | None, ...]]:
        """One pass over the text with these hooks (engines.hooks): the final hidden states and the weights."""
        with self._passes, torch.inference_mode():
            return self.model(self._ids(enc), hooks)

    def lazy_run(self, enc: Encoded, progress=None) -> LazyAttention:
        """One fused pass that reads each layer's turned Q and K at the hook points: linear in N, weights on demand."""
        analysis = forward_stats(enc.axis, "causal", self.n_layers, self.n_heads, self.device)  # the CPU kernel's
        hooks = Hooks(
            read=(*forward_reads(self.device), "value_norms"),
            fused=True,
            progress=progress,
            n_layers=self.n_layers,
            gather=True,
            stats=analysis,
        )
        self.forward(enc, hooks)
        q, k = hooks.stacked("q").float(), hooks.stacked("k").float()  # (L, H, N, Dh), (L, Hkv, N, Dh): stay on
        # the model's device; LazyAttention computes every block there and sends back only what a view draws
        lazy = LazyAttention(
            q,
            k,
            enc.axis,
            enc.axis,
            "causal",
            self.name,
            self.device_name,
            enc.truncated,
            value_norms=hooks.stacked("value_norms").float().cpu(),
            normalisers=given_normalisers(hooks.taken, self.n_layers),
        )
        if analysis is not None:
            lazy.take(analysis)
        return lazy

    hooked = True  # every pass goes through the hook points (an InterveningEngine)

    def logits(self, ids: Sequence[int], hooks: Hooks | None = None) -> Tensor:
        """(T, V) float32 on the CPU: the next-token logits at every position of one pass over `ids`, with hooks."""
        with self._passes, torch.inference_mode():
            hidden, _ = self.model(torch.tensor([list(ids)], device=self.device), hooks)
            return self.model.logits(hidden)[0].float().cpu()

    def residuals(self, ids: Sequence[int]) -> Tensor:
        """(L, T, D) on the model's device: the residual stream entering each layer, one clean pass."""
        hooks = Hooks(read=("resid",))
        with self._passes, torch.inference_mode():
            self.model(torch.tensor([list(ids)], device=self.device), hooks)
        return hooks.stacked("resid")

    def logits_from(self, layer: int, x: Tensor, hooks: Hooks | None = None, *, last: bool = False) -> Tensor:
        """x (B, T, D) entering `layer` -> logits (B, T, V), or (B, V) at the last position: the layers before it
        are not run again (a batch of interventions that differ from `layer` on). float32 on the CPU."""
        with self._passes, torch.inference_mode():
            t = x.shape[1]
            positions, mask = torch.arange(t, device=x.device), causal_mask(t, device=x.device)  # (T,), (T, T)
            for block in self.model.layers[layer:]:
                x, _ = block(x, mask, positions, hooks)
            hidden = self.model.norm(x[:, -1] if last else x)  # (B, D) or (B, T, D)
            return self.model.logits(hidden).float().cpu()

    def weights_of(self, ids) -> Tensor:
        """(L, H, T, T): one pass over `ids` (inside self._passes)."""
        return to_weights(self.model(torch.tensor([list(ids)], device=self.device))[1])

    def steps(self, text: str, layer: int, *, causal: bool = True) -> tuple[Encoded, AttentionSteps]:
        """Every intermediate of one layer's attention (the RMSNorm before it included); a decoder is always causal."""
        enc = self.encode(text)
        hooks = steps_hooks(layer)
        self.forward(enc, hooks)
        t = len(enc.ids)
        angles = self.model.rope.angles(torch.arange(t, device=self.device))  # (T, Dh/2)
        return enc, read_steps(hooks, layer, causal_mask(t, device=self.device), angles, normed=True)

    def generate(
        self, prompt: str, max_new_tokens: int, *, chat: bool = True, progress: Callable[[int, int], None] | None = None
    ) -> Generation:
        """Greedy decoding on our own forward pass, one token at a time; then the attention of every step."""
        limit = min(self.max_tokens, eager_tokens(self.n_layers, self.n_heads))  # the steps keep every weight
        chat = chat and self.has_chat_template
        enc = self.tokenizer.encode(self._chat(prompt) if chat else prompt, limit, specials_by_id=chat)
        ids = list(enc.ids)
        with self._passes, torch.inference_mode():
            for step in range(max_new_tokens):
                if len(ids) >= limit:
                    break
                hidden, _ = self.model(torch.tensor([ids], device=self.device))
                ids.append(int(self.model.logits(hidden[:, -1]).argmax(-1)))
                if progress:
                    progress(step + 1, max_new_tokens)
                if ids[-1] in self.stop_ids:
                    break
            return make_generation(self, self.tokenizer, enc, ids, self.weights_of, self.stop_ids, chat=chat)
