"""Where a Hugging Face decoder keeps the parts of its layers, as each family names them: the layers themselves, a
layer's attention module, the norm before it, its Q, K and V projections and its W_O."""

from __future__ import annotations

from torch import Tensor


def decoder_layers(model) -> list:
    """A decoder's layers, as its family names them: `layers` (Llama and most), `h` (GPT-2)."""
    inner = model.base_model
    return list(inner.layers if hasattr(inner, "layers") else inner.h)


def attention_module(block):
    """A decoder layer's attention module: `self_attn` (Llama and most), `attn` (GPT-2)."""
    return block.self_attn if hasattr(block, "self_attn") else block.attn


def input_norm(block):
    """The norm a layer applies before its attention (`input_layernorm`, GPT-2's `ln_1`), or None (OLMo 2 normalises
    after it)."""
    return getattr(block, "input_layernorm", None) or getattr(block, "ln_1", None)


def out_projection(attn):
    """An attention module's W_O: `o_proj` (most families), `c_proj` (GPT-2), or None."""
    return getattr(attn, "o_proj", None) or getattr(attn, "c_proj", None)


def out_weight(attn) -> Tensor | None:
    """An attention module's W_O as a (D, H*Dh) matrix (a Linear's weight; GPT-2's Conv1D stores it turned), or None."""
    proj = out_projection(attn)
    if proj is None:
        return None
    w = proj.weight
    return w.T if type(proj).__name__ == "Conv1D" else w


def projects(attn) -> bool:
    """Whether attnviz knows where this attention module projects Q, K and V (project) and where its W_O is."""
    return any(hasattr(attn, name) for name in ("q_proj", "qkv_proj", "c_attn")) and out_projection(attn) is not None


def project(attn, x: Tensor, sizes: tuple[int, int]) -> tuple[Tensor, Tensor, Tensor]:
    """x (B, T, D) -> Q (B, T, H*Dh), K and V (B, T, Hkv*Dh), each of `sizes` (H*Dh, Hkv*Dh), with the layer's own
    matrices: three of them (most families), or one whose output is cut in three (Phi-3's qkv_proj, GPT-2's c_attn)."""
    if hasattr(attn, "q_proj"):
        return attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)
    fused = attn.qkv_proj if hasattr(attn, "qkv_proj") else attn.c_attn
    q, k, v = fused(x).split([sizes[0], sizes[1], sizes[1]], dim=-1)
    return q, k, v
