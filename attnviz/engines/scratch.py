"""Multi-head attention written from scratch: the engine every from-scratch model here runs on.

`scaled_dot_product_attention` is a pure function returning (output, weights);
`MultiHeadAttention.forward` is the five numbered steps of the paper (project, split,
attend, concat, project). Weights are returned, never stored on the module, so one
module can serve many sessions at once.

Masks are boolean and broadcast to (B, H, Tq, Tk); True means "may attend".
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

DEVICE_ENV = "ATTNVIZ_DEVICE"


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """The device to run on: the argument, else $ATTNVIZ_DEVICE, else CUDA when present, else CPU."""
    choice = device if device is not None else os.environ.get(DEVICE_ENV) or None
    if choice is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(choice)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"Unknown device {choice!r}: use 'cpu' or 'cuda' (or 'cuda:N').") from err
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"Device {choice!r} was asked for, but no CUDA GPU is available here: use 'cpu'.")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"Unsupported device {choice!r}: use 'cpu' or 'cuda'.")
    return dev


def describe_device(device: torch.device) -> str:
    """A name for people: 'cpu' or 'cuda:0 — NVIDIA H100'."""
    if device.type != "cuda":
        return "cpu"
    index = device.index if device.index is not None else torch.cuda.current_device()
    return f"cuda:{index} — {torch.cuda.get_device_name(index)}"


def causal_mask(tq: int, tk: int | None = None, device: torch.device | str | None = None) -> Tensor:
    """(Tq, Tk) bool: query i may attend to keys 0..i (aligned at the end when Tq != Tk)."""
    tk = tq if tk is None else tk
    return torch.ones(tq, tk, dtype=torch.bool, device=device).tril(diagonal=tk - tq)


def key_padding_mask(attention_mask: Tensor) -> Tensor:
    """(B, Tk) of 1/0 or True/False (1 = real token) -> (B, 1, 1, Tk) bool."""
    return attention_mask.bool()[:, None, None, :]


def attention_scores(q: Tensor, k: Tensor) -> Tensor:
    """Q K^T / sqrt(d_k): (.., Tq, Dh), (.., Tk, Dh) -> (.., Tq, Tk)."""
    # Scaling q rather than the scores touches Tq x Dh numbers instead of Tq x Tk.
    return (q / math.sqrt(q.size(-1))) @ k.transpose(-2, -1)  # (.., Tq, Dh) @ (.., Dh, Tk) -> (.., Tq, Tk)


def apply_mask(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Scores where the mask allows; the most negative finite number where it forbids."""
    if mask is None:
        return scores
    # Not -inf: a masked weight is then exactly 0, and a row with every key masked stays finite
    # instead of turning into NaN.
    return scores.masked_fill(~mask, torch.finfo(scores.dtype).min)


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V, returning (output (..., Tq, Dv), weights (..., Tq, Tk))."""
    scores = apply_mask(attention_scores(q, k), mask)  # (.., Tq, Tk)
    if scores.requires_grad:
        weights = F.softmax(scores, dim=-1)  # (.., Tq, Tk), rows sum to 1
    else:
        # Inference: the raw scores are dead after this line, so the softmax overwrites them.
        # A fresh Tq x Tk buffer per call costs more than the softmax itself at N = 512 (page faults).
        weights = torch.softmax(scores, dim=-1, out=scores)
    return weights @ v, weights  # (.., Tq, Tk) @ (.., Tk, Dv) -> (.., Tq, Dv)


@dataclass(frozen=True)
class AttentionSteps:
    """Every intermediate of one MultiHeadAttention forward, for teaching (batch 1 kept)."""

    x_query: Tensor  # (B, Tq, D)
    x_key: Tensor  # (B, Tk, D)
    q: Tensor  # (B, Tq, D)   after W_Q
    k: Tensor  # (B, Tk, D)   after W_K
    v: Tensor  # (B, Tk, D)   after W_V
    q_heads: Tensor  # (B, H, Tq, Dh)
    k_heads: Tensor  # (B, H, Tk, Dh)
    v_heads: Tensor  # (B, H, Tk, Dh)
    scores: Tensor  # (B, H, Tq, Tk)  Q K^T / sqrt(Dh), before the mask
    masked_scores: Tensor  # (B, H, Tq, Tk)  the most negative float where the mask forbids
    weights: Tensor  # (B, H, Tq, Tk)  softmax
    head_outputs: Tensor  # (B, H, Tq, Dh)  weights @ V
    concat: Tensor  # (B, Tq, D)
    output: Tensor  # (B, Tq, D)    after W_O
    mask: Tensor | None

    def allowed(self) -> Tensor:
        """(Tq, Tk) bool: where a query may look (everywhere when there is no mask)."""
        if self.mask is None:
            return torch.ones(self.scores.shape[-2:], dtype=torch.bool, device=self.scores.device)
        return torch.broadcast_to(self.mask, self.scores.shape)[0, 0]

    def trace(self) -> list[tuple[str, tuple[int, ...]]]:
        """Each step and the shape it leaves, as print(x.shape) in forward() would show them."""
        dh = self.q_heads.shape[-1]
        steps = [
            ("X (the layer's input)", self.x_query),
            ("Q = X·W_Q", self.q),
            ("K = X·W_K", self.k),
            ("V = X·W_V", self.v),
            ("Q split into heads", self.q_heads),
            ("K split into heads", self.k_heads),
            ("V split into heads", self.v_heads),
            (f"scores = Q·Kᵀ/√{dh}", self.scores),
            ("mask" if self.mask is not None else "mask (none)", self.masked_scores),
            ("softmax over each row", self.weights),
            ("weights·V", self.head_outputs),
            ("concat the heads", self.concat),
            ("output = concat·W_O", self.output),
        ]
        return [(name, tuple(t.shape)) for name, t in steps]


class MultiHeadAttention(nn.Module):
    """Multi-head attention from scratch: W_Q, W_K, W_V, split into heads, attend, concat, W_O."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_model // num_heads
        kw = {"bias": bias, "device": device, "dtype": dtype}
        self.w_q = nn.Linear(d_model, d_model, **kw)
        self.w_k = nn.Linear(d_model, d_model, **kw)
        self.w_v = nn.Linear(d_model, d_model, **kw)
        self.w_o = nn.Linear(d_model, d_model, **kw)

    def _split(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.num_heads, self.d_head).transpose(1, 2)  # (B, T, D) -> (B, H, T, Dh)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """query (B, Tq, D), key and value (B, Tk, D) -> (output (B, Tq, D), weights (B, H, Tq, Tk))."""
        b, tq, _ = query.shape
        # 1. project   2. split into heads
        q, k, v = self._split(self.w_q(query)), self._split(self.w_k(key)), self._split(self.w_v(value))
        # 3. attend, every head at once
        heads, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, Tq, Dh), (B, H, Tq, Tk)
        # 4. concat the heads   5. output projection
        concat = heads.transpose(1, 2).reshape(b, tq, self.d_model)  # (B, H, Tq, Dh) -> (B, Tq, D)
        return self.w_o(concat), weights

    @torch.no_grad()
    def steps(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> AttentionSteps:
        """The same computation as forward, keeping every intermediate for display."""
        b, tq, _ = query.shape
        q, k, v = self.w_q(query), self.w_k(key), self.w_v(value)  # (B, T, D)
        qh, kh, vh = self._split(q), self._split(k), self._split(v)  # (B, H, T, Dh)
        scores = attention_scores(qh, kh)  # (B, H, Tq, Tk)
        masked = apply_mask(scores, mask)
        weights = F.softmax(masked, dim=-1)  # (B, H, Tq, Tk), the same maths as forward, out of place
        heads = weights @ vh  # (B, H, Tq, Dh)
        concat = heads.transpose(1, 2).reshape(b, tq, self.d_model)  # (B, Tq, D)
        return AttentionSteps(
            query, key, q, k, v, qh, kh, vh, scores, masked, weights, heads, concat, self.w_o(concat), mask
        )

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> MultiHeadAttention:
        """A copy of a torch.nn.MultiheadAttention's weights (same Q, K, V sizes) on our engine."""
        if not m._qkv_same_embed_dim:
            raise ValueError("from_torch needs kdim == vdim == embed_dim")
        if m.bias_k is not None or m.add_zero_attn:
            raise ValueError("from_torch does not support add_bias_kv or add_zero_attn")
        w = m.in_proj_weight
        ours = cls(m.embed_dim, m.num_heads, bias=m.in_proj_bias is not None, device=w.device, dtype=w.dtype)
        with torch.no_grad():
            for i, lin in enumerate((ours.w_q, ours.w_k, ours.w_v)):
                rows = slice(i * m.embed_dim, (i + 1) * m.embed_dim)
                lin.weight.copy_(w[rows])
                if lin.bias is not None:
                    lin.bias.copy_(m.in_proj_bias[rows])
            ours.w_o.weight.copy_(m.out_proj.weight)
            if ours.w_o.bias is not None:
                ours.w_o.bias.copy_(m.out_proj.bias)
        return ours.train(m.training)
