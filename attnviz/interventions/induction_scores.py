"""Induction heads on repeated random tokens (Olsson et al. 2022), scored as ARENA's course scores them.

A sequence: the tokenizer's beginning-of-text token where it names one (SmolLM2's is <|im_start|>), then n random
token ids (uniform over the vocabulary without special tokens), then the same n ids again:

    ids = [BOS] r_0 .. r_{n-1} r_0 .. r_{n-1}          (2n + 1 tokens; 2n where there is no BOS)

A model that copies predicts the second copy: its per-token loss there drops. Per head, from its attention
pattern A (queries x keys) on one sequence, with s = offset + n the first query of the second copy:
- induction: mean of the diagonal at offset -(n - 1), A[q, q - n + 1] over every q it has, exactly as ARENA's
  chapter 1.2 detector (`attention_pattern.diagonal(-seq_len + 1).mean()`, on a sequence with a BOS token first).
  For a query r_i of the second copy that key is the token after r_i's first occurrence. The diagonal also holds
  the first copy's last query or two: with a BOS, its first entry is query r_{n-2} on the BOS token itself
  (an attention sink), kept so that the numbers compare with ARENA's;
- prefix: the same attention over the second copy's queries only, A[s + i, offset + i + 1] for i < n (Olsson et
  al.'s prefix matching; ARENA's chapter 1.4 `get_attn_scores(..., "induction")` takes these queries);
- duplicate: attention from each query of the second copy to the earlier occurrence of the same token,
  A[s + i, offset + i] for i < n: the n second-copy queries only, as ARENA's chapter 1.4
  `get_attn_scores(..., "duplicate")` (whose sequences have no BOS token; ours keep it, for the induction score).

Every score is averaged over a batch of seeded sequences (ARENA uses 10), and its spread over them is kept, so a
ranking of two heads can be told apart from the noise of one random sequence (`Induction.separated`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attnviz.engines.base import Engine
from attnviz.engines.hooks import Hooks
from attnviz.interventions.runs import decoder, per_token_loss

THRESHOLD = 0.4  # the Model overview labels a decoder's head "induction" above this score (stated on the page)
MAX_LENGTH = 256
BATCH = 10  # sequences averaged, as ARENA's course averages its induction scores over a batch of 10
SCORES = ("induction", "prefix", "duplicate")


@dataclass(frozen=True)
class Induction:
    """Repeated random sequences through a decoder: their loss per token and every head's scores, each averaged."""

    model: str
    ids: tuple[int, ...]  # the first sequence (the one drawn on the page)
    length: int  # n: the random part, each copy
    offset: int  # 1 with a BOS token first, else 0: where the first copy starts
    losses: Tensor  # (B, len(ids) - 1): per sequence, at position i the cross-entropy of token i + 1
    each: dict[str, Tensor]  # {score: (B, L, H)}: every head's score on each sequence
    patterns: Tensor  # (L, H, T, T) float32: every head's attention on the first sequence
    sinks: bool = False  # the model has learned sink logits: a row of patterns sums to less than 1

    def __repr__(self) -> str:
        (layer, head, score), *_ = self.best(1)
        return (
            f"Induction({self.model}: {self.batch} sequences, each {self.length} random tokens twice; scores "
            f"{', '.join(self.each)} (layers × heads); best induction head L{layer + 1}H{head + 1} (1-based) "
            f"{score:.2f})"
        )

    @property
    def batch(self) -> int:
        """How many sequences the scores average."""
        return int(self.losses.shape[0])

    @property
    def loss(self) -> Tensor:
        """(len(ids) - 1,): the loss at each position, averaged over the sequences."""
        return self.losses.mean(0)

    @property
    def induction(self) -> Tensor:
        """(L, H): the induction score averaged over the sequences."""
        return self.each["induction"].mean(0)

    @property
    def prefix(self) -> Tensor:
        """(L, H): the prefix-matching score averaged over the sequences."""
        return self.each["prefix"].mean(0)

    @property
    def duplicate(self) -> Tensor:
        """(L, H): the duplicate-token score averaged over the sequences."""
        return self.each["duplicate"].mean(0)

    def spread(self, score: str) -> Tensor:
        """(L, H): the standard deviation of a score over the sequences (0 for one sequence)."""
        values = self.each[score]
        return values.std(0) if values.shape[0] > 1 else torch.zeros(values.shape[1:])

    @property
    def first_copy_loss(self) -> float:
        """The mean loss on predicting the first copy's tokens after its first one (no way to know them)."""
        return float(self.loss[self.offset : self.offset + self.length - 1].mean())

    @property
    def second_copy_loss(self) -> float:
        """The mean loss on predicting the second copy's tokens (a model that copies knows them)."""
        return float(self.loss[self.offset + self.length - 1 :].mean())

    def best(self, k: int = 5) -> list[tuple[int, int, float]]:
        """The k heads with the highest mean induction score: (layer, head, score), 0-based."""
        flat = self.induction.flatten()
        top = flat.topk(min(k, flat.numel()))
        n_h = self.induction.shape[1]
        return [(int(i) // n_h, int(i) % n_h, float(v)) for v, i in zip(top.values, top.indices, strict=True)]

    def separated(self, a: tuple[int, int], b: tuple[int, int], score: str = "induction") -> bool:
        """Whether heads a and b ((layer, head), 0-based) differ in a score by more than twice the standard error of
        their paired difference over the sequences: a ranking of the two that is not inside the noise."""
        for head in (a, b):
            if not (isinstance(head, tuple | list) and len(head) == 2 and all(isinstance(i, int) for i in head)):
                raise ValueError(
                    f"separated compares two heads, each (layer, head) 0-based, on one score (score={score!r}): "
                    f"got {head!r}; e.g. run.separated((1, 4), (2, 3), score='prefix')"
                )
        if score not in self.each:
            raise ValueError(f"the scores are {', '.join(self.each)}, not {score!r}")
        values = self.each[score]
        diff = values[:, a[0], a[1]] - values[:, b[0], b[1]]  # (B,): the same sequences, so paired
        if diff.numel() < 2:
            return False
        return bool(diff.mean().abs() > 2 * diff.std() / diff.numel() ** 0.5)


def _vocabulary(engine: Engine) -> Tensor:
    hf = decoder(engine).tokenizer.hf
    special = set(hf.all_special_ids)
    return torch.tensor([i for i in range(len(hf)) if i not in special])


def sequences(engine: Engine, length: int, seed: int, batch: int = 1) -> tuple[list[list[int]], int]:
    """`batch` sequences as above, drawn one after another from one generator seeded with `seed` (the first is the
    same for any batch): (ids of each, offset of the first copy)."""
    if not 2 <= length <= MAX_LENGTH:
        raise ValueError(f"the random part is 2 to {MAX_LENGTH} tokens long (got {length})")
    if not 1 <= batch <= 64:
        raise ValueError(f"the batch is 1 to 64 sequences (got {batch})")
    vocab = _vocabulary(engine)
    gen = torch.Generator().manual_seed(seed)
    # the tokenizer's, as TransformerLens prepends it (the same on both backends)
    bos = decoder(engine).tokenizer.hf.bos_token_id
    head = [int(bos)] if isinstance(bos, int) else []
    out = []
    for _ in range(batch):
        random = vocab[torch.randint(len(vocab), (length,), generator=gen)].tolist()
        out.append(head + random + random)
    return out, len(head)


def repeated_ids(engine: Engine, length: int, seed: int) -> tuple[list[int], int]:
    """One sequence as above: (ids, offset of the first copy)."""
    seqs, offset = sequences(engine, length, seed)
    return seqs[0], offset


def scores(patterns: Tensor, length: int, offset: int) -> tuple[Tensor, Tensor, Tensor]:
    """(induction, prefix, duplicate), each (L, H), from patterns (L, H, T, T) of one sequence as above."""
    n = length
    induction = torch.diagonal(patterns, offset=-(n - 1), dim1=-2, dim2=-1)  # (L, H, T - n + 1): queries n - 1 ..
    second = torch.arange(offset + n, offset + 2 * n)  # the second copy's queries
    prefix = patterns[..., second, second - (n - 1)]  # (L, H, n): each on the token after its earlier occurrence
    duplicate = patterns[..., second, second - n]  # (L, H, n): each on its earlier occurrence
    return induction.mean(-1), prefix.mean(-1), duplicate.mean(-1)


def run(engine: Engine, length: int = 50, seed: int = 0, batch: int = BATCH) -> Induction:
    """The repeated sequences through the engine, one pass each: loss per token and every head's scores."""
    eng = decoder(engine)
    seqs, offset = sequences(engine, length, seed, batch)
    losses: list[Tensor] = []
    each: dict[str, list[Tensor]] = {name: [] for name in SCORES}
    first: Tensor | None = None
    for ids in seqs:
        hooks = Hooks(read=("pattern",))
        logits = eng.logits(ids, hooks)  # (T, V)
        patterns = hooks.stacked("pattern").float().cpu()  # (L, H, T, T)
        for name, value in zip(SCORES, scores(patterns, length, offset), strict=True):
            each[name].append(value)
        losses.append(per_token_loss(logits, ids))
        first = patterns if first is None else first
    if first is None:  # sequences() gives at least one
        raise ValueError("no sequence to score")
    stacked = {name: torch.stack(values) for name, values in each.items()}  # {score: (B, L, H)}
    return Induction(engine.name, tuple(seqs[0]), length, offset, torch.stack(losses), stacked, first, engine.sinks)
