"""Multi-head attention written from scratch: the engine every from-scratch model here runs on.

`scaled_dot_product_attention` is a pure function returning (output, weights);
`MultiHeadAttention.forward` is the five numbered steps of the paper (project, split,
attend, concat, project). Weights are returned, never stored on the module, so one
module can serve many sessions at once.

Two things newer models add, each optional: grouped-query attention (`num_kv_heads` < `num_heads`:
each key/value head serves a group of query heads; 1 is multi-query attention) and rotary position
embeddings (`RotaryEmbedding`: Q and K turned by an angle that grows with the position).

Masks are boolean and broadcast to (B, H, Tq, Tk); True means "may attend".
"""

from __future__ import annotations

import math
import os
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnviz.engines.hooks import Hooks, point

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


def _groups(q: Tensor, k: Tensor) -> int:
    """Query heads per key/value head: H / H_kv (1 for plain multi-head attention, or no head dimension)."""
    if q.dim() < 3 or k.dim() < 3:
        return 1
    h, h_kv = q.shape[-3], k.shape[-3]
    if h % h_kv:
        raise ValueError(f"{h} query heads cannot share {h_kv} key/value heads evenly")
    return h // h_kv


def attention_scores(q: Tensor, k: Tensor, scale: float | None = None) -> Tensor:
    """Q K^T * scale (1 / sqrt(d_k) by default): (.., H, Tq, Dh), (.., H_kv, Tk, Dh) -> (.., H, Tq, Tk).

    With fewer key/value heads (grouped-query attention), query head h reads key head h // (H / H_kv);
    the keys are broadcast to their group, never copied.
    """
    g = _groups(q, k)
    # Scaling q rather than the scores touches Tq x Dh numbers instead of Tq x Tk.
    q = q * (scale if scale is not None else 1.0 / math.sqrt(q.size(-1)))
    if g == 1:
        return q @ k.transpose(-2, -1)  # (.., H, Tq, Dh) @ (.., H, Dh, Tk) -> (.., H, Tq, Tk)
    grouped = q.unflatten(-3, (k.shape[-3], g)) @ k.unsqueeze(-3).transpose(-2, -1)  # (.., Hkv, G, Tq, Tk)
    return grouped.flatten(-4, -3)  # (.., H, Tq, Tk)


def mix_values(weights: Tensor, v: Tensor) -> Tensor:
    """weights @ V: (.., H, Tq, Tk), (.., H_kv, Tk, Dv) -> (.., H, Tq, Dv), values shared within a group."""
    g = _groups(weights, v)
    if g == 1:
        return weights @ v  # (.., H, Tq, Tk) @ (.., H, Tk, Dv) -> (.., H, Tq, Dv)
    return (weights.unflatten(-3, (v.shape[-3], g)) @ v.unsqueeze(-3)).flatten(-4, -3)  # (.., H, Tq, Dv)


def apply_mask(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Scores where the mask allows; the most negative finite number where it forbids."""
    if mask is None:
        return scores
    # Not -inf: a masked weight is then exactly 0, and a row with every key masked stays finite
    # instead of turning into NaN.
    return scores.masked_fill(~mask, torch.finfo(scores.dtype).min)


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V, returning (output (..., H, Tq, Dv), weights (..., H, Tq, Tk)).

    k and v may have fewer heads than q (grouped-query attention).
    """
    z, weights = attend(q, k, v, mask, None, 0)
    if weights is None:  # only a fused pass (hooks.fused) leaves them out, and there are no hooks here
        raise ValueError("attention without its weights")
    return z, weights


def windowed_attention(q: Tensor, k: Tensor, v: Tensor, window: int, scale: float | None = None) -> Tensor:
    """Causal self-attention within a sliding window, by SDPA on blocks of `window` queries, each with only the keys
    its window reaches (2 x window at most): N x 2 window scores a head instead of N x N, where SDPA with the window
    as a mask computes them all. q, k, v (B, H, N, D) with as many heads; equal to the masked SDPA within rounding
    (tests/engines/test_scratch.py)."""
    n = q.shape[-2]
    out = q.new_empty(*q.shape[:-1], v.shape[-1])
    for start in range(0, n, window):
        end, lo = min(n, start + window), max(0, start - window + 1)
        i = torch.arange(start, end, device=q.device)[:, None]
        j = torch.arange(lo, end, device=q.device)[None, :]
        out[..., start:end, :] = F.scaled_dot_product_attention(
            q[..., start:end, :],
            k[..., lo:end, :],
            v[..., lo:end, :],
            attn_mask=(j <= i) & (i - j < window),
            scale=scale,
        )
    return out


def capped(scores: Tensor, softcap: float) -> Tensor:
    """Soft-capped scores (Gemma 2): softcap * tanh(s / softcap), every score within (-softcap, softcap)."""
    return torch.tanh(scores / softcap) * softcap


EXPLICIT_ROWS = 256  # queries a block in _explicit_blocks: (H, 256, N) scores at a time


def _explicit_blocks(
    q: Tensor, k: Tensor, v: Tensor, scale: float | None, window: int, softcap: float | None, sinks: Tensor | None
) -> Tensor:
    """Causal self-attention's output with the terms SDPA lacks (soft-capping, sinks), in blocks of queries, each
    with only the keys it can see: a long text's pass holds (B, H, rows, N) scores at a time, never N x N.
    q (B, H, N, Dh), k and v (B, Hkv, N, Dh) -> (B, H, N, Dh); equal to `attend` with the whole causal mask."""
    n = q.shape[-2]
    out = q.new_empty(*q.shape[:-1], v.shape[-1])
    for start in range(0, n, EXPLICIT_ROWS):
        end = min(n, start + EXPLICIT_ROWS)
        lo = max(0, start - window + 1) if window else 0
        i = torch.arange(start, end, device=q.device)[:, None]
        j = torch.arange(lo, end, device=q.device)[None, :]
        mask = j <= i
        if window:
            mask &= i - j < window
        qs, ks, vs = q[..., start:end, :], k[..., lo:end, :], v[..., lo:end, :]
        z, _ = attend(qs, ks, vs, mask, None, 0, scale=scale, softcap=softcap, sinks=sinks)
        out[..., start:end, :] = z
    return out


def causal_attention(q: Tensor, k: Tensor, v: Tensor, scale: float | None) -> tuple[Tensor, Tensor | None]:
    """Causal SDPA over q (B, H, T, Dh), k and v (B, H, T, D) with each row's log-sum-exp of its scaled scores
    (B, H, T), or None beside plain SDPA's output where no kernel of torch's gives it for these inputs. Torch's fused
    kernels compute that number for their backward pass and drop it in inference: here it is kept from the one that
    SDPA would run (a GPU's flash kernel in 16 bits, its memory-efficient kernel in float32; the CPU's flash kernel),
    so that a long text's analysis need not compute it again (fused.layer_stats)."""
    scale = scale or q.shape[-1] ** -0.5
    kernels = torch.ops.aten
    try:
        if q.device.type == "cuda" and q.dtype in (torch.float16, torch.bfloat16):
            z, lse = kernels._scaled_dot_product_flash_attention(q, k, v, 0.0, True, False, scale=scale)[:2]
        elif q.device.type == "cuda":
            z, lse = kernels._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, True, scale=scale)[:2]
        elif q.device.type == "cpu":
            z, lse = kernels._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True, scale=scale)
        else:
            z, lse = None, None
    except (RuntimeError, NotImplementedError):  # inputs the kernel refuses (a head size, an alignment)
        z, lse = None, None
    if z is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale), None
    if lse is None or lse.shape[:-1] != q.shape[:-2] or lse.shape[-1] < q.shape[-2]:
        return z, None
    return z, lse[..., : q.shape[-2]].float()  # the memory-efficient kernel pads its rows to a multiple of 32


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    hooks: Hooks | None,
    layer: int,
    *,
    part: str = "",
    scale: float | None = None,
    window: int = 0,
    softcap: float | None = None,
    sinks: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Step 3 of every attention layer attnviz computes, through the hook points scores, pattern and z.

    q (B, H, Tq, Dh), k and v (B, Hkv, Tk, Dh) -> (z (B, H, Tq, Dh), weights (B, H, Tq, Tk), or None when the hooks
    ask for a fused pass: torch's SDPA, causal self-attention, no Tq x Tk tensor; or the hooks' `stats`, which keeps
    the layer's statistics as it computes the output, where it runs: lazy.ForwardStats). `part` prefixes the point names
    ("decoder.", "cross."); `scale` defaults to 1 / sqrt(Dh); `window` (a sliding window's size, 0 none) matters to
    the fused pass only (elsewhere `mask` says it): each query sees the keys j with i - window < j <= i.
    Two terms some families add (transformers hands them to the attention function): `softcap` (Gemma 2) turns each
    score s into softcap * tanh(s / softcap) before the mask; `sinks` (H,) (gpt-oss) are learned logits, one a head,
    that take part in every row's softmax without a key, so that a row's weights over the tokens sum to less than 1
    (the sink's share is what they leave).
    """
    if hooks is not None and hooks.fused and hooks.stats is not None and not softcap and not part:
        z = hooks.stats(layer, q, k, v, scale or q.shape[-1] ** -0.5, window, sinks)  # lazy.ForwardStats
        if z is not None:
            return point(hooks, part + "z", layer, z), None
    if hooks is not None and hooks.fused and (softcap or sinks is not None):
        z = _explicit_blocks(q, k, v, scale, window, softcap, sinks)  # SDPA has neither term
        return point(hooks, part + "z", layer, z), None
    if hooks is not None and hooks.fused:
        # Each query head's K and V spelled out, rather than SDPA's enable_gqa: in float32, CUDA's fused kernels
        # refuse unequal head counts and SDPA falls back to its math kernel, which builds every head's N x N scores
        # (88 GiB and 5.2 s for SmolLM2's shape at 32,768 tokens on an H200). The copy is a layer's K and V, O(N).
        k, v = (t.repeat_interleave(q.shape[1] // t.shape[1], dim=1) for t in (k, v))
        if window and q.shape[-2] > 2 * window:  # a long text: blocks of queries, each with the keys it can see
            z = windowed_attention(q, k, v, window, scale)
        elif window and q.shape[-2] > window:  # a sliding window: SDPA takes it as a (Tq, Tk) boolean mask
            i = torch.arange(q.shape[-2], device=q.device)[:, None]
            j = torch.arange(k.shape[-2], device=q.device)[None, :]
            z = F.scaled_dot_product_attention(q, k, v, attn_mask=(j <= i) & (i - j < window), scale=scale)
        elif hooks.wants(part + "lse", layer):  # the rows' normalisers too, where torch's kernel gives them
            z, lse = causal_attention(q, k, v, scale)
            if lse is not None:
                point(hooks, part + "lse", layer, lse)
        else:
            z = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
        return point(hooks, part + "z", layer, z), None
    scores = attention_scores(q, k, scale)  # (B, H, Tq, Tk)
    if softcap:
        scores = capped(scores, softcap)
    scores = point(hooks, part + "scores", layer, scores)
    read = hooks is not None and hooks.reads(part + "scores", layer)
    if mask is not None and not scores.requires_grad and not read:  # inference: the scores are ours to overwrite
        masked = scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
    else:
        masked = apply_mask(scores, mask)
    if masked is scores and read:
        masked = scores.clone()  # the scores read must survive the softmax below
    if sinks is not None:  # each row's normaliser takes the head's sink logit in: its weights sum to less than 1
        lse = torch.logaddexp(masked.logsumexp(-1), sinks.to(masked.dtype)[:, None])  # (B, H, Tq)
        weights = torch.exp(masked - lse[..., None])
    elif masked.requires_grad:
        weights = F.softmax(masked, dim=-1)  # (B, H, Tq, Tk), rows sum to 1
    else:
        # Inference: the masked scores are dead after this line, so the softmax overwrites them.
        # A fresh Tq x Tk buffer per call costs more than the softmax itself at N = 512 (page faults).
        weights = torch.softmax(masked, dim=-1, out=masked)
    weights = point(hooks, part + "pattern", layer, weights)
    return point(hooks, part + "z", layer, mix_values(weights, v)), weights  # (B, H, Tq, Dh)


def value_norms(v: Tensor, w_o: Tensor, num_heads: int) -> Tensor:
    """||f_h(x_j)||: v (B, Hkv, Tk, Dh) carried through head h's part of W_O (D, H*Dh) -> (B, H, Tk).

    Kobayashi et al. 2020, as their code computes it: the value bias in, W_O's bias out.
    ||alpha_ij f_h(x_j)|| = alpha_ij ||f_h(x_j)||: how much of key j reaches query i's output through head h.
    """
    d_model, dh = w_o.shape[0], v.shape[-1]
    v = v.repeat_interleave(num_heads // v.shape[1], dim=1)  # (B, H, Tk, Dh): each query head's V
    w = w_o.reshape(d_model, num_heads, dh).permute(1, 2, 0)  # (H, Dh, D)
    if v.shape[-2] <= dh:  # few keys: carry each through (H*Tk*Dh*D), cheaper than W W^T (H*Dh*Dh*D) is
        return torch.linalg.vector_norm(torch.einsum("bhtd,hde->bhte", v, w), dim=-1)  # (B, H, Tk)
    gram = w @ w.transpose(1, 2)  # (H, Dh, Dh): ||v W||^2 = v (W W^T) v^T, without a (B, H, Tk, D) tensor
    return torch.einsum("bhtd,hde,bhte->bht", v, gram, v).clamp_min(0).sqrt()  # (B, H, Tk)


def rotate_half(x: Tensor) -> Tensor:
    """(x1, x2) -> (-x2, x1) on the two halves of the last dimension: a quarter turn of each pair (x_i, x_i+Dh/2)."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class RotaryEmbedding(nn.Module):
    """Rotary position embeddings (Su et al. 2021), as Llama uses them.

    Dimension i of a head is paired with dimension i + Dh/2; at position p the pair turns by the angle
    p * theta^(-2i/Dh): fast for the first pairs, slower and slower for the last. Q and K are turned,
    V is not, so the score Q_p . K_q depends on p - q, the relative position.
    """

    inv_freq: Tensor  # (Dh/2,) a buffer: radians per position

    def __init__(self, head_dim: int, theta: float = 10000.0, device: torch.device | str | None = None) -> None:
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"rotary embeddings need an even head size, not {head_dim}")
        self.head_dim, self.theta = head_dim, theta
        exponent = torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim  # (Dh/2,)
        self.register_buffer("inv_freq", 1.0 / (theta**exponent), persistent=False)  # radians per position

    def angles(self, positions: Tensor) -> Tensor:
        """(T,) positions -> (T, Dh/2): the angle each pair of dimensions has turned at each position."""
        return positions.to(torch.float32)[:, None] * self.inv_freq[None, :]  # (T, 1) * (1, Dh/2)

    def rotate(self, x: Tensor, positions: Tensor) -> Tensor:
        """x (.., T, Dh) turned to its positions (T,)."""
        angle = self.angles(positions).repeat(1, 2)  # (T, Dh): each pair's angle, on both of its dimensions
        return x * angle.cos().to(x.dtype) + rotate_half(x) * angle.sin().to(x.dtype)


class MultiHeadAttention(nn.Module):
    """Multi-head attention from scratch: W_Q, W_K, W_V, split into heads, attend, concat, W_O.

    num_kv_heads < num_heads: grouped-query attention (1: multi-query); `rope`: rotary positions on Q and K;
    `layer` and `part` name its hook points (engines.hooks), fixed when the model is built.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        num_kv_heads: int | None = None,
        head_dim: int | None = None,
        bias: bool = True,
        rope: RotaryEmbedding | None = None,
        layer: int = 0,
        part: str = "",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.layer, self.part = layer, part  # where this module's hook points are: the layer, "decoder." or "cross."
        if head_dim is None and d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        num_kv_heads = num_kv_heads or num_heads
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
        self.d_model, self.num_heads, self.num_kv_heads = d_model, num_heads, num_kv_heads
        self.d_head = head_dim or d_model // num_heads
        kw: dict[str, Any] = {"bias": bias, "device": device, "dtype": dtype}
        self.w_q = nn.Linear(d_model, num_heads * self.d_head, **kw)
        self.w_k = nn.Linear(d_model, num_kv_heads * self.d_head, **kw)
        self.w_v = nn.Linear(d_model, num_kv_heads * self.d_head, **kw)
        self.w_o = nn.Linear(num_heads * self.d_head, d_model, **kw)
        self.rope = rope

    def _split(self, x: Tensor, heads: int) -> Tensor:
        b, t, _ = x.shape
        return x.view(b, t, heads, self.d_head).transpose(1, 2)  # (B, T, heads*Dh) -> (B, heads, T, Dh)

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Steps 1 and 2: Q (B, H, Tq, Dh), K and V (B, Hkv, Tk, Dh)."""
        q = self._split(self.w_q(query), self.num_heads)
        return q, self._split(self.w_k(key), self.num_kv_heads), self._split(self.w_v(value), self.num_kv_heads)

    def _positions(self, t: int, positions: Tensor | None, device) -> Tensor:
        return torch.arange(t, device=device) if positions is None else positions

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        positions: Tensor | None = None,
        hooks: Hooks | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """query (B, Tq, D), key and value (B, Tk, D) -> (output (B, Tq, D), weights (B, H, Tq, Tk)).

        `positions` (Tk,) place the keys (and the last Tq of them, the queries) for rotary embeddings. `hooks`
        (engines.hooks) read or replace this layer's points for this call; with a fused pass (a long input, causal
        self-attention) the weights are never formed and None comes back for them.
        """
        b, tq, _ = query.shape
        layer, part = self.layer, self.part
        query = point(hooks, part + "x", layer, query)
        # 1. project   2. split into heads (and turn Q and K by position)
        q, k, v = self._project(query, key, value)  # (B, H, Tq, Dh), (B, Hkv, Tk, Dh), (B, Hkv, Tk, Dh)
        if self.rope is not None:
            q, k = point(hooks, part + "q_unturned", layer, q), point(hooks, part + "k_unturned", layer, k)
            pos = self._positions(key.shape[1], positions, key.device)  # (Tk,)
            q, k = self.rope.rotate(q, pos[-tq:]), self.rope.rotate(k, pos)
        q, k = point(hooks, part + "q", layer, q), point(hooks, part + "k", layer, k)
        v = point(hooks, part + "v", layer, v)
        if hooks is not None and hooks.wants(part + "value_norms", layer):
            hooks.point(part + "value_norms", layer, value_norms(v, self.w_o.weight, self.num_heads))
        # 3. attend, every head at once
        heads, weights = attend(q, k, v, mask, hooks, layer, part=part)  # (B, H, Tq, Dh), (B, H, Tq, Tk)
        # 4. concat the heads   5. output projection
        concat = heads.transpose(1, 2).reshape(b, tq, self.num_heads * self.d_head)  # (B, Tq, H*Dh)
        out = point(hooks, part + "out", layer, self.w_o(concat))
        if hooks is not None and not part:
            hooks.finished(layer)
        return out, weights

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
