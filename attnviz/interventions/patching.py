"""Activation patching (Wang et al. 2022; Meng et al. 2022): one head's output copied from a clean run into a
corrupted one, and how much of the answer comes back.

Two prompts of the same length in tokens that differ in a word; an answer and a wrong answer, each one token.
The metric is the logit difference at the last position, d = logit(answer) - logit(wrong):

    restored = (d_patched - d_corrupt) / (d_clean - d_corrupt)

1 when the patched head alone brings the clean answer back, 0 when it changes nothing. It means something only
where the model gets the pair right both ways (d_clean > 0 > d_corrupt: the word flips its answer); elsewhere it is
called undefined and not computed (`require_flip=False` computes it anyway, for tests of the machinery).
Per head: its output z at every position is the clean run's (a batched pass per layer, starting at that layer from
the corrupted run's residual stream). By position: one head's output at one position only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from attnviz.engines.base import Engine, InterveningEngine
from attnviz.engines.hooks import Hooks, Replace
from attnviz.interventions.runs import decoder, one_token

# (clean, corrupted, answer, wrong): indirect objects (Wang et al. 2022); SmolLM2 gets both right both ways
IOI_PAIRS = {
    "Anna and Peter at the market": (
        "When Anna and Peter went to the market, Peter handed the basket to",
        "When Anna and Peter went to the market, Anna handed the basket to",
        " Anna",
        " Peter",
    ),
    "Mary and John at the store": (
        "When Mary and John went to the store, John gave a drink to",
        "When Mary and John went to the store, Mary gave a drink to",
        " Mary",
        " John",
    ),
}
CONTINUATION = " The word '{pronoun}' means"  # a pronoun case as a question the model can answer by its next token


@dataclass(frozen=True)
class Patching:
    """A clean and a corrupted prompt, an answer and a wrong answer, and what each head restores."""

    model: str
    clean_ids: tuple[int, ...]
    corrupt_ids: tuple[int, ...]
    answer: int
    wrong: int
    clean_diff: float
    corrupt_diff: float
    restored: Tensor | None  # (L, H), None where the metric is undefined

    def __repr__(self) -> str:
        restored = "undefined" if self.restored is None else f"{tuple(self.restored.shape)} per head"
        return (
            f"Patching({self.model}: logit difference {self.clean_diff:+.2f} clean, {self.corrupt_diff:+.2f} "
            f"corrupted; share restored {restored})"
        )

    @property
    def flips(self) -> bool:
        """Whether the model gets the pair right both ways (d_clean > 0 > d_corrupt): `restored` means something."""
        return self.clean_diff > 0 > self.corrupt_diff


def logit_diff(logits: Tensor, answer: int, wrong: int) -> Tensor:
    """logit(answer) - logit(wrong), over the last dimension's vocabulary."""
    return logits[..., answer] - logits[..., wrong]


def _pair(engine: Engine, clean: str, corrupt: str) -> tuple[list[int], list[int]]:
    for name, text in (("clean", clean), ("corrupted", corrupt)):
        if isinstance(text, str) and not text.strip():  # the encoder's own words do not say which of the two
            raise ValueError(f"the {name} prompt is empty: patching needs two prompts that differ in a word")
    a, b = list(engine.encode(clean).ids), list(engine.encode(corrupt).ids)
    if len(a) != len(b):
        raise ValueError(
            f"the two prompts must be the same length in tokens to patch position by position: the clean "
            f"one is {len(a)} tokens, the corrupted one {len(b)}. Change one word for another of the "
            "same length in tokens (names and short words are often one token each)"
        )
    if a == b:
        raise ValueError("the two prompts are the same tokens: change a word in the corrupted one")
    return a, b


def _clean_z(eng: InterveningEngine, ids: list[int]) -> dict[int, Tensor]:
    hooks = Hooks(read=("z",))
    eng.logits(ids, hooks)
    return {layer: z for (_, layer), z in hooks.taken.items()}  # {layer: (1, H, T, Dh)}


def _patch_per_item(layer: int, clean_z: Tensor) -> Replace:
    """Item b of the batch takes head b's clean output in `layer`, at every position."""

    def replace(at: int, z: Tensor) -> Tensor:
        if at != layer:
            return z
        out = z.clone()  # (B, H, T, Dh), B == H
        b = torch.arange(z.shape[0])
        out[b, b] = clean_z[0].to(z.dtype)  # (H, T, Dh): head b's clean output for item b
        return out

    return replace


def patch(
    engine: Engine,
    clean: str,
    corrupt: str,
    answer: str,
    wrong: str,
    progress: Callable[[int, int], None] | None = None,
    *,
    require_flip: bool = True,
) -> Patching:
    """The logit differences, clean and corrupted, and every head's share restored (None where the model does not get
    the pair right both ways, unless require_flip is False)."""
    eng = decoder(engine)
    a, b = _pair(engine, clean, corrupt)
    good, bad = one_token(engine, answer), one_token(engine, wrong)
    if good == bad:
        raise ValueError("the answer and the wrong answer are the same token")
    d_clean = float(logit_diff(eng.logits(a)[-1], good, bad))
    d_corrupt = float(logit_diff(eng.logits(b)[-1], good, bad))
    result = Patching(engine.name, tuple(a), tuple(b), good, bad, d_clean, d_corrupt, None)
    if require_flip and not result.flips or d_clean == d_corrupt:
        return result
    clean_z = _clean_z(eng, a)
    resid = eng.residuals(b)  # (L, T, D): the corrupted run
    n_l, n_h = engine.n_layers, engine.n_heads
    restored = torch.zeros(n_l, n_h)
    for layer in range(n_l):
        x = resid[layer][None].expand(n_h, -1, -1).contiguous()  # (H, T, D): one corrupted copy per head
        logits = eng.logits_from(layer, x, Hooks(replace={"z": _patch_per_item(layer, clean_z[layer])}), last=True)
        restored[layer] = (logit_diff(logits, good, bad) - d_corrupt) / (d_clean - d_corrupt)  # (H,)
        if progress:
            progress(layer + 1, n_l)
    return Patching(engine.name, tuple(a), tuple(b), good, bad, d_clean, d_corrupt, restored)


def restore(engine: Engine, clean: str, corrupt: str, answer: str, wrong: str, heads: dict[int, list[int]]) -> float:
    """The share restored when these heads ({layer: heads}) all take their clean outputs at once, in one full pass
    over the corrupted prompt (what the grid computes head by head)."""
    eng = decoder(engine)
    a, b = _pair(engine, clean, corrupt)
    good, bad = one_token(engine, answer), one_token(engine, wrong)
    d_clean = float(logit_diff(eng.logits(a)[-1], good, bad))
    d_corrupt = float(logit_diff(eng.logits(b)[-1], good, bad))
    clean_z = _clean_z(eng, a)

    def replace(layer: int, z: Tensor) -> Tensor:
        chosen = heads.get(layer)
        if not chosen:
            return z
        out = z.clone()  # (1, H, T, Dh)
        out[:, chosen] = clean_z[layer][:, chosen].to(z.dtype)
        return out

    d = float(logit_diff(eng.logits(b, Hooks(replace={"z": replace}))[-1], good, bad))
    return (d - d_corrupt) / (d_clean - d_corrupt)


def by_position(engine: Engine, clean: str, corrupt: str, answer: str, wrong: str, layer: int, head: int) -> Tensor:
    """(T,): the share restored when head `head` of `layer` takes its clean output at one position only."""
    eng = decoder(engine)
    a, b = _pair(engine, clean, corrupt)
    good, bad = one_token(engine, answer), one_token(engine, wrong)
    d_clean = float(logit_diff(eng.logits(a)[-1], good, bad))
    d_corrupt = float(logit_diff(eng.logits(b)[-1], good, bad))
    if d_clean == d_corrupt:
        raise ValueError("the corrupted prompt gives the same logit difference: the metric is undefined here")
    clean_z = _clean_z(eng, a)[layer][0, head]  # (T, Dh)
    t = len(b)

    def replace(at: int, z: Tensor) -> Tensor:
        if at != layer:
            return z
        out = z.clone()  # (T, H, T, Dh): item i patches position i
        i = torch.arange(t)
        out[i, head, i] = clean_z.to(z.dtype)  # each item's own position, this head
        return out

    x = eng.residuals(b)[layer][None].expand(t, -1, -1).contiguous()  # (T, T, D)
    logits = eng.logits_from(layer, x, Hooks(replace={"z": replace}), last=True)  # (T, V)
    return (logit_diff(logits, good, bad) - d_corrupt) / (d_clean - d_corrupt)


def continuation(pronoun: str, answer: str) -> str:
    """A pronoun case's question as a continuation: " The word 'it' means the" (" ... means" before a name)."""
    return CONTINUATION.format(pronoun=pronoun) + ("" if answer[:1].isupper() else " the")


def pronoun_pairs() -> dict[str, tuple[str, str, str, str]]:
    """The pronoun lab's minimal pairs as patching pairs: {name: (clean, corrupted, answer, wrong)}."""
    from attnviz.analysis.pronoun_cases import LESSON

    pairs = {}
    for a, b in zip(LESSON[0::2], LESSON[1::2], strict=True):
        ask = continuation(a.pronoun, a.answer)
        pairs[f"pronoun: {a.text}"] = (a.text + ask, b.text + ask, " " + a.answer, " " + b.answer)
    return pairs
