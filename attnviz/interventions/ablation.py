"""Knocking heads out (Michel et al. 2019): a head's output before W_O replaced, and what changes.

zero: the head's output z (each position's weights @ V) set to 0, so W_O gets nothing from it;
mean: the head's output replaced at every position by its mean over a reference distribution: every position of
      the built-in corpus's sentences (the Model overview's), the scored text left out if it is one of them. A head
      that says the same thing everywhere: what it adds on average stays, what it adds for this text goes. As in
      Wang et al. 2022 (the mean over their ABC dataset), the reference is not the text being scored: a mean over
      this text's own positions would carry what its later tokens wrote into the predictions of earlier ones.
The change is read as the per-token loss (the cross-entropy of each next token) and the next-token
distribution at a chosen position. `importance` removes each head alone and measures the mean loss increase:
one pass per head, each starting at its head's layer from the clean run's residual stream (the layers below
are the same as the clean run's), the heads of a layer batched together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from attnviz.analysis.head_stats import CORPUS
from attnviz.engines.base import Engine
from attnviz.engines.hooks import Hooks, Replace
from attnviz.interventions.runs import decoder, per_token_loss, top_tokens

Mode = Literal["zero", "mean"]
MODES: tuple[Mode, ...] = ("zero", "mean")
REFERENCE = CORPUS  # mean ablation's reference texts


@dataclass(frozen=True)
class Ablation:
    """One text with some heads knocked out, and without."""

    model: str
    ids: tuple[int, ...]
    heads: dict[int, list[int]]  # {layer: heads}, 0-based
    mode: Mode
    position: int  # where the next-token distribution is read (0-based)
    loss_before: Tensor  # (T - 1,)
    loss_after: Tensor  # (T - 1,)
    top_before: list[dict]
    top_after: list[dict]
    patterns_after: Tensor  # (L, H, T, T): every head's attention with the heads knocked out

    def __repr__(self) -> str:
        names = ", ".join(f"L{layer + 1}H{h + 1}" for layer, hs in sorted(self.heads.items()) for h in hs)
        return (
            f"Ablation({self.model}: {names} (1-based) {self.mode}-ablated; mean loss "
            f"{float(self.loss_before.mean()):.3f} -> {float(self.loss_after.mean()):.3f} nats over {len(self.ids)} "
            "tokens)"
        )


def reference_texts(text: str | None = None) -> tuple[str, ...]:
    """The reference texts of mean ablation: the built-in corpus without `text` (the scored one) if it is there."""
    return tuple(t for t in REFERENCE if t.strip() != (text or "").strip())


def reference_means(engine: Engine, layers, text: str | None = None) -> dict[int, Tensor]:
    """{layer: (H, Dh)}: each head's output z averaged over every position of the reference texts (clean passes),
    leaving out `text`, the one being scored."""
    eng = decoder(engine)
    layers = sorted(set(layers))
    sums: dict[int, Tensor] = {}
    count = 0
    for ref in reference_texts(text):
        ids = list(engine.encode(ref).ids)
        hooks = Hooks(read=("z",), layers=set(layers))
        eng.logits(ids, hooks)
        for layer in layers:
            z = hooks.get("z", layer)[0].float().sum(1)  # (H, T, Dh) -> (H, Dh)
            sums[layer] = z if layer not in sums else sums[layer] + z
        count += len(ids)
    return {layer: sums[layer] / count for layer in layers}


def _means_for(mode: Mode, means: dict[int, Tensor] | None) -> dict[int, Tensor]:
    if mode == "mean" and means is None:
        raise ValueError("mean ablation needs each head's reference means (reference_means)")
    return means or {}


def knock_out(heads: dict[int, list[int]], mode: Mode, means: dict[int, Tensor] | None = None) -> Replace:
    """The replacement for "z" that knocks these heads out ({layer: heads}), zeroed or set to their means."""
    table = _means_for(mode, means)
    if mode not in MODES:
        raise ValueError(f"ablation is 'zero' or 'mean', not {mode!r}")

    def replace(layer: int, z: Tensor) -> Tensor:
        chosen = heads.get(layer)
        if not chosen:
            return z
        out = z.clone()  # (B, H, T, Dh)
        if mode == "zero":
            out[:, chosen] = 0.0
        else:
            out[:, chosen] = table[layer][chosen][None, :, None, :].to(z.dtype)  # (1, h, 1, Dh) over every position
        return out

    return replace


def ablate(
    engine: Engine,
    text: str,
    heads: dict[int, list[int]],
    mode: Mode = "zero",
    position: int = -1,
    k: int = 5,
    means: dict[int, Tensor] | None = None,
) -> Ablation:
    """The text through the engine, clean and with `heads` knocked out: loss per token, top next tokens, patterns.
    Mean ablation takes `means` (reference_means of every layer named) or computes them."""
    eng = decoder(engine)
    ids = list(engine.encode(text).ids)
    if len(ids) < 2:
        raise ValueError("the text needs at least two tokens: the loss of a token is read from the one before it")
    if not -len(ids) <= position < len(ids):  # 999 was read as 999 % 13 = 11, with nothing said
        raise ValueError(
            f"position is 0-{len(ids) - 1} here (this text has {len(ids)} tokens), or counted back from the end "
            f"(-1 the last token); got {position}"
        )
    position = position % len(ids)
    if mode == "mean" and means is None:
        means = reference_means(engine, heads, text)
    before = eng.logits(ids)
    hooks = Hooks(read=("pattern",), replace={"z": knock_out(heads, mode, means)})
    after = eng.logits(ids, hooks)
    return Ablation(
        engine.name,
        tuple(ids),
        {k_: sorted(v) for k_, v in heads.items()},
        mode,
        position,
        per_token_loss(before, ids),
        per_token_loss(after, ids),
        top_tokens(engine, before[position], k),
        top_tokens(engine, after[position], k),
        hooks.stacked("pattern").float().cpu(),
    )


def _one_per_item(layer: int, mode: Mode, means: dict[int, Tensor] | None) -> Replace:
    """A replacement for a batch whose item b knocks out head b of `layer` (zeroed or set to its mean)."""
    table = _means_for(mode, means)

    def replace(at: int, z: Tensor) -> Tensor:
        if at != layer:
            return z
        out = z.clone()  # (B, H, T, Dh), B == H
        b = torch.arange(z.shape[0])
        out[b, b] = 0.0 if mode == "zero" else table[layer][b][:, None, :].to(z.dtype)  # (B, T, Dh) per item
        return out

    return replace


def importance(
    engine: Engine,
    text: str,
    mode: Mode = "zero",
    progress: Callable[[int, int], None] | None = None,
    means: dict[int, Tensor] | None = None,
) -> tuple[Tensor, Tensor]:
    """(L, H): the mean loss increase over the text when each head alone is knocked out; and the clean loss (T - 1,).

    One batched pass per layer: item b knocks out head b, starting at that layer from the clean residual stream.
    Mean ablation takes `means` (reference_means of every layer) or computes them.
    """
    if mode not in MODES:  # else a KeyError (0) from the means' table, deep inside
        raise ValueError(f"ablation is 'zero' or 'mean', not {mode!r}")
    eng = decoder(engine)
    ids = list(engine.encode(text).ids)
    if len(ids) < 2:
        raise ValueError("the text needs at least two tokens: the loss of a token is read from the one before it")
    n_l, n_h = engine.n_layers, engine.n_heads
    clean = per_token_loss(eng.logits(ids), ids)
    resid = eng.residuals(ids)  # (L, T, D)
    if mode == "mean" and means is None:
        means = reference_means(engine, range(n_l), text)
    target = torch.tensor(ids[1:])
    out = torch.zeros(n_l, n_h)
    for layer in range(n_l):
        x = resid[layer][None].expand(n_h, -1, -1).contiguous()  # (H, T, D): one copy per head knocked out
        logits = eng.logits_from(layer, x, Hooks(replace={"z": _one_per_item(layer, mode, means)}))  # (H, T, V)
        lost = torch.nn.functional.cross_entropy(
            logits[:, :-1].transpose(1, 2), target[None].expand(n_h, -1), reduction="none"
        )  # (H, T - 1)
        out[layer] = (lost - clean[None]).mean(-1)
        if progress:
            progress(layer + 1, n_l)
    return out, clean
