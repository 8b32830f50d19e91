"""One attention layer step by step, for teaching (the Inside page): every intermediate, read at the hook points.

`AttentionSteps` is what a SteppingEngine's steps() returns: one forward pass with every point of one layer read
(engines.hooks), and the names and shapes a print(x.shape) in forward() would show.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attnviz.engines.hooks import POINTS, Hooks
from attnviz.engines.scratch import MultiHeadAttention, apply_mask


def steps_hooks(layer: int) -> Hooks:
    """Hooks that read every point of one layer (0-based)."""
    return Hooks(read=POINTS, layers={layer})


def read_steps(
    hooks: Hooks, layer: int, mask: Tensor | None, angles: Tensor | None = None, *, normed: bool = False
) -> AttentionSteps:
    """The AttentionSteps of `layer` from hooks that read it (steps_hooks) during one forward pass.

    mask: the (Tq, Tk) bool mask the layer applied, or None; angles: the rotary angles (Tk, Dh/2), if any;
    normed: the layer normalises its input before attention (Llama's RMSNorm), so x and resid differ.
    """
    get = hooks.get
    q, k, v, z = get("q", layer), get("k", layer), get("v", layer), get("z", layer)
    turned = ("q_unturned", layer) in hooks.taken
    qh, kh = (get("q_unturned", layer), get("k_unturned", layer)) if turned else (q, k)
    b = q.shape[0]
    flat = lambda t: t.transpose(1, 2).reshape(b, t.shape[2], -1)  # noqa: E731  (B, h, T, Dh) -> (B, T, h*Dh)
    scores = get("scores", layer)
    x = get("x", layer)
    return AttentionSteps(
        hooks.taken.get(("resid", layer), x),
        x,
        flat(qh),
        flat(kh),
        flat(v),
        qh,
        kh,
        v,
        scores,
        apply_mask(scores, mask),
        get("pattern", layer),
        z,
        flat(z),
        get("out", layer),
        mask,
        q if turned else None,
        k if turned else None,
        angles,
        x if normed else None,
    )


@torch.no_grad()
def layer_steps(
    mha: MultiHeadAttention,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    positions: Tensor | None = None,
) -> AttentionSteps:
    """One MultiHeadAttention's forward on its own (a playground layer), every intermediate read at its points."""
    hooks = steps_hooks(mha.layer)
    mha(query, key, value, mask, positions, hooks)
    angles = None
    if mha.rope is not None:
        pos = torch.arange(key.shape[1], device=key.device) if positions is None else positions
        angles = mha.rope.angles(pos)  # (Tk, Dh/2)
    return read_steps(hooks, mha.layer, mask, angles)


@dataclass(frozen=True)
class AttentionSteps:
    """Every intermediate of one MultiHeadAttention forward, for teaching (batch 1 kept)."""

    x_query: Tensor  # (B, Tq, D)  the residual stream entering the layer
    x_key: Tensor  # (B, Tk, D)  what W_K reads (after the layer's norm, where it has one)
    q: Tensor  # (B, Tq, H*Dh)    after W_Q
    k: Tensor  # (B, Tk, Hkv*Dh)  after W_K
    v: Tensor  # (B, Tk, Hkv*Dh)  after W_V
    q_heads: Tensor  # (B, H, Tq, Dh)
    k_heads: Tensor  # (B, Hkv, Tk, Dh)
    v_heads: Tensor  # (B, Hkv, Tk, Dh)
    scores: Tensor  # (B, H, Tq, Tk)  Q K^T / sqrt(Dh), before the mask
    masked_scores: Tensor  # (B, H, Tq, Tk)  the most negative float where the mask forbids
    weights: Tensor  # (B, H, Tq, Tk)  softmax
    head_outputs: Tensor  # (B, H, Tq, Dh)  weights @ V
    concat: Tensor  # (B, Tq, H*Dh)
    output: Tensor  # (B, Tq, D)    after W_O
    mask: Tensor | None
    q_rotated: Tensor | None = None  # (B, H, Tq, Dh)   Q after the rotary embedding
    k_rotated: Tensor | None = None  # (B, Hkv, Tk, Dh) K after the rotary embedding
    angles: Tensor | None = None  # (Tk, Dh/2) the angle each pair of dimensions has turned at each position
    x_normed: Tensor | None = None  # (B, Tq, D) the input after the layer's norm (what W_Q, W_K, W_V read)
    norm: str = "RMSNorm"  # the kind of x_normed's norm (GPT-2's is a LayerNorm)
    q_normed: Tensor | None = None  # (B, H, Tq, Dh)   Q after the layer's own norm of it (Gemma 3, Qwen 3, OLMo 2)
    k_normed: Tensor | None = None  # (B, Hkv, Tk, Dh) K after it
    scale: float | None = None  # what the scores are multiplied by, where it is not 1 / sqrt(Dh)
    window: int = 0  # the layer's sliding window in tokens (0: every earlier key)
    softcap: float | None = None  # Gemma 2: each score s became softcap * tanh(s / softcap) before the mask
    sinks: Tensor | None = None  # (H,) each head's learned sink logit (gpt-oss): its rows sum to less than 1

    @property
    def q_scored(self) -> Tensor:
        """(B, H, Tq, Dh): the queries the scores were made from (after the layer's norm of them and RoPE)."""
        return next(t for t in (self.q_rotated, self.q_normed, self.q_heads) if t is not None)

    @property
    def k_scored(self) -> Tensor:
        """(B, Hkv, Tk, Dh): the keys the scores were made from."""
        return next(t for t in (self.k_rotated, self.k_normed, self.k_heads) if t is not None)

    @property
    def group(self) -> int:
        """Query heads per key/value head."""
        return self.q_heads.shape[1] // self.k_heads.shape[1]

    def kv_head(self, head: int) -> int:
        """The key/value head a query head reads."""
        return head // self.group

    def allowed(self) -> Tensor:
        """(Tq, Tk) bool: where a query may look (everywhere when there is no mask)."""
        if self.mask is None:
            return torch.ones(self.scores.shape[-2:], dtype=torch.bool, device=self.scores.device)
        return torch.broadcast_to(self.mask, self.scores.shape)[0, 0]

    def trace(self) -> list[tuple[str, tuple[int, ...]]]:
        """Each step and the shape it leaves, as print(x.shape) in forward() would show them."""
        dh = self.q_heads.shape[-1]
        steps = [("X (the layer's input)", self.x_query)]
        if self.x_normed is not None:
            steps.append((f"{self.norm}(X)", self.x_normed))
        steps += [("Q = X·W_Q", self.q), ("K = X·W_K", self.k), ("V = X·W_V", self.v)]
        steps += [("Q split into heads", self.q_heads), ("K split into heads", self.k_heads)]
        steps.append(("V split into heads", self.v_heads))
        if self.q_normed is not None and self.k_normed is not None:
            steps += [("Q normalised (RMSNorm)", self.q_normed), ("K normalised (RMSNorm)", self.k_normed)]
        if self.q_rotated is not None and self.k_rotated is not None:
            steps += [("Q turned by position (RoPE)", self.q_rotated), ("K turned by position (RoPE)", self.k_rotated)]
        scaled = f"/√{dh}" if self.scale is None or abs(self.scale * dh**0.5 - 1) < 1e-6 else f"·{self.scale:.4g}"
        if self.softcap:
            scaled += f", capped at ±{self.softcap:g}"
        mask = "mask" if self.mask is not None else "mask (none)"
        steps += [
            (f"scores = Q·Kᵀ{scaled}", self.scores),
            (f"{mask}, window {self.window}" if self.window else mask, self.masked_scores),
            ("softmax over each row", self.weights),
            ("weights·V", self.head_outputs),
            ("concat the heads", self.concat),
            ("output = concat·W_O", self.output),
        ]
        return [(name, tuple(t.shape)) for name, t in steps]
