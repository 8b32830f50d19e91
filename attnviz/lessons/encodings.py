"""Positions: how a transformer learns where each token is (attention alone does not know order).

- `sinusoidal(n, d_model)`: the encoding of "Attention Is All You Need" (Vaswani et al. 2017, section 3.5),
  PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).
- `similarity(pe)`: PE(i)·PE(j) for every pair of positions. For the sinusoidal encoding it depends on i - j only:
  sum_i cos((p - q) w_i), the relative position.
- `learned_positions(engine)`: BERT's position embeddings (a learned (max_positions, d_model) table).
- `rotary_angles(n, head_dim, theta)`: the angle each pair of a head's dimensions has turned at each position
  (RoPE, Su et al. 2021), as the Llama engine turns Q and K; `rotary_of(engine)`: a model's own head size and θ.
- `positional_heads(stats)`: heads whose attention goes mostly to the previous or the next token, from the head
  statistics the Model overview computes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from attnviz.analysis.head_stats import SHARE_THRESHOLD
from attnviz.engines.base import Engine, rope_parameters
from attnviz.engines.scratch import RotaryEmbedding

BASE = 10000.0


def sinusoidal(n: int, d_model: int, base: float = BASE) -> Tensor:
    """(n, d_model) float32: PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(pos / base^(2i/d)).

    Computed in float64 and rounded once. An odd d_model keeps the last sine column (its cosine would be column d).
    """
    if n < 1 or d_model < 1:
        raise ValueError(f"need at least one position and one dimension, not n={n}, d_model={d_model}")
    pos = torch.arange(n, dtype=torch.float64)[:, None]  # (n, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d/2),): 2i for each pair
    angle = pos / base ** (two_i / d_model)  # (n, ceil(d/2))
    pe = torch.empty(n, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.float()


def wavelengths(d_model: int, base: float = BASE) -> Tensor:
    """(ceil(d/2),): how many positions each sine/cosine pair takes to come back round: 2π · base^(2i/d)."""
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    return (2 * torch.pi * base ** (two_i / d_model)).float()


def similarity(pe: Tensor, *, cosine: bool = False) -> Tensor:
    """(n, d) -> (n, n): PE(i)·PE(j), or the cosine of the angle between them."""
    pe = pe.double()
    if cosine:
        pe = pe / pe.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return (pe @ pe.T).float()  # (n, d) @ (d, n) -> (n, n)


def by_offset(sim: Tensor, max_offset: int) -> Tensor:
    """(n, n) -> (2·max_offset + 1,): the mean of sim[i, i + k] over i, for k = -max_offset … max_offset.

    For a purely relative similarity (sinusoidal) every diagonal is constant, so its mean is the whole story.
    """
    n = sim.shape[0]
    out = torch.full((2 * max_offset + 1,), float("nan"))
    for j, k in enumerate(range(-max_offset, max_offset + 1)):
        if abs(k) < n:
            out[j] = sim.diagonal(k).mean()
    return out


POSITION_TABLES = ("position_embeddings", "embeddings.position", "wpe", "embed_positions")  # BERT, ours, GPT-2, BART


def position_table(engine: Engine) -> torch.nn.Embedding | None:
    """The engine's learned position table (see `learned_positions`), or None where it has none."""
    for module_name, module in engine.model.named_modules():
        named = any(module_name == t or module_name.endswith("." + t) for t in POSITION_TABLES)
        fixed = "Sinusoidal" in type(module).__name__  # a formula stored as a table (Marian's), not learned
        if named and isinstance(module, torch.nn.Embedding) and not fixed:
            return module
    return None


def learned_positions(engine: Engine) -> Tensor:
    """(max_positions, d_model): an engine's learned position embeddings, a copy on the CPU.

    Found by name: BERT's `position_embeddings`, the scratch BERT's `embeddings.position`, GPT-2's `wpe`, BART's
    `embed_positions` (BART's table has 2 rows more than its positions: it starts at offset 2). A table that is not
    learned (Marian's `embed_positions` is a sinusoid: its class says so) does not count. A model without one
    (rotary, sinusoidal, relative positions) raises ValueError.
    """
    table = position_table(engine)
    if table is not None:
        return table.weight.detach().float().cpu().clone()
    raise ValueError(
        f"{engine.name} has no learned position table: it places tokens another way (rotary positions turn Q and K; "
        "sinusoidal ones are a fixed formula)"
    )


def rotary_angles(n: int, head_dim: int, theta: float = BASE) -> Tensor:
    """(n, head_dim/2): the angle (radians) pair i of a head turns at position p: p · theta^(-2i/head_dim).

    The same numbers the engine's RotaryEmbedding turns Q and K by (attnviz.engines.scratch).
    """
    return RotaryEmbedding(head_dim, theta).angles(torch.arange(n))


@dataclass(frozen=True)
class Rotary:
    """A model's plain rotary positions: its head size and θ, one per kind of layer ({"": θ} when every layer has
    the same; Gemma 3: {"sliding_attention": 10000, "full_attention": 1000000}), and how many layers have each."""

    head_dim: int
    thetas: dict[str, float]
    layers: dict[str, int]

    @property
    def theta(self) -> float:
        """The θ most of its layers turn Q and K by (Gemma 3: its windowed layers', 15 of 18)."""
        return self.thetas[max(self.thetas, key=lambda kind: self.layers.get(kind, 0))]


def rotary_of(engine: Engine) -> Rotary | None:
    """The head size and θ a model's config gives its rotary positions (transformers', or the scratch Llama's own,
    which rebuilds plain tables only); None for a model without them (BERT, the date model) or a table other than
    the plain one (Llama 3's scaled frequencies, a dynamic table: θ alone does not give their angles)."""
    config: Any = getattr(getattr(engine, "model", None), "config", None)
    if config is None:
        return None
    if isinstance(getattr(config, "rope_theta", None), float) and getattr(config, "head_dim", None):  # the scratch
        return Rotary(config.head_dim, {"": config.rope_theta}, {"": engine.n_layers})  # Llama's own (plain) config
    rope = rope_parameters(config)
    per_kind = {k: v for k, v in rope.items() if isinstance(v, dict)} or ({"": rope} if rope else {})
    if not per_kind or any(v.get("rope_type", v.get("type", "default")) != "default" for v in per_kind.values()):
        return None
    if any("rope_theta" not in v for v in per_kind.values()):
        return None
    heads = getattr(config, "num_attention_heads", None)
    head_dim = getattr(config, "head_dim", None) or (config.hidden_size // heads if heads else None)
    if not head_dim:
        return None
    kinds = list(getattr(config, "layer_types", None) or [""] * getattr(config, "num_hidden_layers", 1))
    layers = {kind: kinds.count(kind) if kind else len(kinds) for kind in per_kind}
    return Rotary(int(head_dim), {k: float(v["rope_theta"]) for k, v in per_kind.items()}, layers)


def rotary_score_by_offset(head_dim: int, theta: float, max_offset: int) -> Tensor:
    """(max_offset + 1,): q·k for q = k = all-ones after RoPE, as the keys move 0 … max_offset positions back.

    Rotation makes the score depend only on the offset: sum over pairs of 2·cos(offset · w_i). It decays (unevenly)
    with distance: the "long-term decay" of Su et al. (2021), section 3.4.3.
    """
    rope = RotaryEmbedding(head_dim, theta)
    ones = torch.ones(1, head_dim)
    q = rope.rotate(ones, torch.tensor([max_offset]))  # the query at the last position
    keys = rope.rotate(ones.expand(max_offset + 1, head_dim), torch.arange(max_offset, -1, -1))  # offsets 0…max
    return (keys.double() @ q.double().T)[:, 0].float()


@dataclass(frozen=True)
class PositionalHead:
    """A head that attends mostly by position."""

    layer: int  # 0-based
    head: int  # 0-based
    kind: str  # "previous-token" or "next-token"
    share: float  # the share of its attention on that neighbour, averaged over queries


def positional_heads(stats: dict[str, Tensor], threshold: float = SHARE_THRESHOLD) -> list[PositionalHead]:
    """Heads whose mean share on the previous (or next) token is above `threshold`, strongest first.

    `stats` are analysis.head_stats' (L, H) statistics ("prev", "next"): the same numbers and threshold as the
    Overview's "previous-token" and "next-token" labels.
    """
    found = []
    for stat, kind in (("prev", "previous-token"), ("next", "next-token")):
        share = stats[stat]
        for layer, head in (share > threshold).nonzero().tolist():
            found.append(PositionalHead(layer, head, kind, float(share[layer, head])))
    return sorted(found, key=lambda h: -h.share)
