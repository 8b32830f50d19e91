"""One layer of a Hugging Face decoder step by step, for the Inside page: every family of hf.CAPTURE_FAMILIES (Gemma
2/3, Qwen 2/3, Mistral, OLMo 2, Phi-3, GPT-2, gpt-oss; Llama is rebuilt on the scratch backend instead).

In these models transformers' layer computes the projections, the q/k norms and the rotary turn, and attnviz's own
attention function (scratch.attend) computes the scores, the mask, the softmax and weights·V, through its hook
points. The points give the second half. The first half is computed again here from the layer's own modules (its
input norm, W_Q, W_K, W_V, its q/k norms) and the model's own rotary table, on the residual stream the same pass
entered the layer with, and the turned Q and K are checked against what the attention function received: a family
whose layer does anything else is refused with a message, never drawn wrong.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import Tensor

from attnviz.engines.hooks import HOOKS_KW, Hooks
from attnviz.engines.layers import attention_module, decoder_layers, input_norm, out_projection, project
from attnviz.engines.scratch import apply_mask, causal_mask, rotate_half
from attnviz.engines.steps import AttentionSteps
from attnviz.tokens import Encoded

TOL = 1e-4  # the retraced Q and K against the attention function's, relative to their largest value
READ = ("q", "k", "v", "scores", "pattern", "z")


class RetracedDecoder(Protocol):
    """What the steps read of a Hugging Face decoder engine (hf.HFDecoderEngine) on attnviz's attention function."""

    name: str
    model: Any  # transformers' model, with its base_model and layers
    device: torch.device
    _passes: Any  # what its passes hold (engines.base.passes)

    @property
    def windows(self) -> tuple[int, ...]:
        """Each layer's sliding window in tokens (0: every earlier key)."""
        ...

    def encode(self, text: str) -> Encoded:
        """The text as the model's tokenizer cuts it."""
        ...

    def turns(self, layer: int, n: int) -> tuple[Tensor, Tensor] | None:
        """The rotary table (cos, sin), each (n, r), of `layer`'s Q and K, or None."""
        ...

    def sink_logits(self) -> Tensor | None:
        """(L, H): each head's learned sink logit, or None."""
        ...


def turn(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x (B, H, T, Dh) turned by position as transformers does it: the first r dimensions (cos, sin: (T, r)), the
    rest as they are."""
    r = cos.shape[-1]
    return torch.cat([x[..., :r] * cos + rotate_half(x[..., :r]) * sin, x[..., r:]], dim=-1)


def qk_norm(attn, name: str, heads: Tensor) -> Tensor | None:
    """Q or K split into heads (B, H, T, Dh), after the layer's own norm of it (an RMSNorm of each head's vector in
    Gemma 3 and Qwen 3, of the whole projection in OLMo 2), or None for a layer without one."""
    norm = getattr(attn, name, None)
    if norm is None:
        return None
    b, h, t, dh = heads.shape
    if norm.weight.numel() == dh:  # one norm for each head's vector
        return norm(heads)
    flat = heads.transpose(1, 2).reshape(b, t, h * dh)  # OLMo 2: the norm spans every head's dimensions
    return norm(flat).view(b, t, h, dh).transpose(1, 2)


def check_retraced(name: str, layer: int, what: str, ours: Tensor, theirs: Tensor) -> None:
    """ours equals theirs within TOL (relative to theirs' largest value), or a ValueError saying this layer differs."""
    gap = float((ours - theirs).abs().max())
    if gap > TOL * max(1.0, float(theirs.abs().max())):
        raise ValueError(
            f"attnviz could not retrace layer {layer + 1} of '{name[:100]}' step by step: its {what} differs from what "
            f"the attention function received by {gap:.2g}. Its other pages are not affected."
        )


def decoder_steps(engine: RetracedDecoder, text: str, layer: int) -> tuple[Encoded, AttentionSteps]:
    """The tokens of `text` and every intermediate of `layer`'s attention (0-based) in a Hugging Face decoder whose
    layers run on attnviz's attention function and whose projections engines.layers finds (the engine checks)."""
    enc = engine.encode(text)
    t = len(enc.ids)
    table = engine.turns(layer, t)  # (cos, sin), each (T, r), or None: before the pass (it holds the model too)
    sinks = engine.sink_logits()  # (L, H) gpt-oss's, else None
    hooks = Hooks(read=READ, layers={layer})
    with engine._passes, torch.inference_mode():
        ids = torch.tensor([enc.ids], device=engine.device)
        out = engine.model.base_model(input_ids=ids, use_cache=False, output_hidden_states=True, **{HOOKS_KW: hooks})
        x = out.hidden_states[layer]  # (1, T, D): the residual stream entering the layer
        block = decoder_layers(engine.model)[layer]
        attn = attention_module(block)
        norm = input_norm(block)
        normed = norm(x) if norm is not None else x
        q, k, v, z = (hooks.get(p, layer) for p in ("q", "k", "v", "z"))  # (1, H, T, Dh) or (1, Hkv, T, Dh)
        dh = q.shape[-1]
        q_flat, k_flat, v_flat = project(attn, normed, (q.shape[1] * dh, k.shape[1] * dh))  # (1, T, H*Dh), ..
        q_heads, k_heads, v_heads = (f.view(1, t, -1, dh).transpose(1, 2) for f in (q_flat, k_flat, v_flat))
        q_normed, k_normed = qk_norm(attn, "q_norm", q_heads), qk_norm(attn, "k_norm", k_heads)
        q_in = q_heads if q_normed is None else q_normed
        k_in = k_heads if k_normed is None else k_normed
        angles = None
        if table is not None:
            cos, sin = (part.to(x.device) for part in table)
            q_in, k_in = turn(q_in, cos, sin), turn(k_in, cos, sin)
            angles = torch.atan2(sin, cos)[:, : cos.shape[-1] // 2]  # (T, r/2): each pair's angle
        for what, ours, theirs in (("Q", q_in, q), ("K", k_in, k), ("V", v_heads, v)):
            check_retraced(engine.name, layer, what, ours, theirs)
        allowed = causal_mask(t, device=x.device)  # (T, T): the layer's mask, within its window where it has one
        window = engine.windows[layer]
        if window:
            allowed &= causal_mask(t, device=x.device).triu(diagonal=1 - window)
        scores = hooks.get("scores", layer)
        concat = z.transpose(1, 2).reshape(1, t, -1)  # (1, T, H*Dh)
        steps = AttentionSteps(
            x_query=x,
            x_key=normed,
            q=q_flat,
            k=k_flat,
            v=v_flat,
            q_heads=q_heads,
            k_heads=k_heads,
            v_heads=v_heads,
            scores=scores,
            masked_scores=apply_mask(scores, allowed),
            weights=hooks.get("pattern", layer),
            head_outputs=z,
            concat=concat,
            output=out_projection(attn)(concat),
            mask=allowed,
            q_rotated=q if table is not None else None,
            k_rotated=k if table is not None else None,
            angles=angles,
            x_normed=normed if norm is not None else None,
            norm="LayerNorm" if isinstance(norm, torch.nn.LayerNorm) else "RMSNorm",
            q_normed=q_normed,
            k_normed=k_normed,
            scale=float(attn.scaling) if hasattr(attn, "scaling") else None,
            window=window,
            softcap=getattr(attn, "attn_logit_softcapping", None) or None,
            sinks=None if sinks is None else sinks[layer].to(x.device),
        )
    return enc, steps
