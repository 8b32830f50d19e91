"""Does attention resolve a pronoun? Two per-head metrics, each under its own name, and a benchmark's statistics.

For a case (text, pronoun, candidates, answer), every layer and head scores each candidate:

- `mas`, the Maximum Attention Score of Klein & Nabi (ACL 2019): the attention *from* each
  candidate's tokens (queries) *to* the pronoun (the key), a candidate of several word pieces
  reduced by the max over its content pieces (a leading determiner left out, and, when there
  are several pieces, those whose raw piece, "##" included, is one character long). Each head
  gives the candidate it scores highest that head's maximum value; the values are summed over
  all heads and normalised, and the largest sum is the prediction. That sum is the authors'
  (computeMaximumAttentionScore, SAP-samples/acl2019-commonsense); the tokens it reads are
  attnviz's, and every difference from the authors' code is listed in docs/pronouns.md: they encode a
  sentence pair split at the pronoun, rewrite the candidate strings ("the " and " a " deleted
  anywhere), take each piece's first occurrence before the pronoun and match a one-piece candidate
  by fuzzy ratio, list the right answer first (so argmax gives it every tie), and score cases whose
  candidates share their tokens; attnviz encodes one segment, reads the candidate's own characters,
  keeps the file's order and counts ties, and skips such cases (`same_tokens`).
- `vote`, what the lesson shows (what "it" looks at): the attention from the pronoun (the query)
  to each candidate, max over the candidate's content pieces; each head votes for its highest
  candidate; most votes wins (ties go to the larger summed score).

Where a case's words are (the pronoun and the candidates, found in its text): attnviz.analysis.pronoun_cases.

A causal model's candidate cannot see a later pronoun, so `mas` is not defined there.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Literal

import torch
from torch import Tensor

from attnviz.analysis.pronoun_cases import PronounCase, content_pieces, differ_after_pronoun, locate, pronoun_piece
from attnviz.escape import csv_cell
from attnviz.result import Attention
from attnviz.tokens import TokenAxis

Method = Literal["mas", "vote"]
METHODS: tuple[Method, ...] = ("mas", "vote")
METHOD_NAMES = {"mas": "Maximum Attention Score", "vote": "Head vote"}  # a method as a page names it
METHOD_ABOUT = {  # ... and as the command line says what it scored with
    "mas": "Maximum Attention Score (Klein & Nabi 2019): attention from each candidate to the pronoun",
    "vote": "head vote: attention from the pronoun to each candidate, one vote per head",
}
PUBLISHED = {  # bert-base-uncased with the Maximum Attention Score (Klein & Nabi 2019)
    "WSC273": 0.60,
    "PDP-60": 0.68,
}
PERMUTATIONS = 1000  # random relabellings for the best-head baseline


def _check_text(result: Attention, case: PronounCase) -> TokenAxis:
    axis = result.source
    if not any(e > s for s, e in axis.spans):
        raise ValueError("pronoun scoring needs each token's characters (a fast tokenizer)")
    if axis.text != case.text:
        raise ValueError("the result is not of this case's text")
    return axis


def scores(result: Attention, case: PronounCase, method: Method = "mas") -> Tensor:
    """(L, H, C): each head's score for each candidate, in the method's direction (see the module's docstring)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: use one of {', '.join(METHODS)}")
    axis = _check_text(result, case)
    where = locate(case)
    p = pronoun_piece(axis, where.pronoun)
    pieces = [content_pieces(axis, span) for span in where.candidates]
    same_tokens(case, axis, pieces)
    w = result.weights  # (L, H, T, T)
    if method == "mas":
        if result.kind == "causal" and any(min(pc) < p for pc in pieces):
            raise ValueError(
                "The Maximum Attention Score is not defined for a causal model: a candidate before the pronoun "
                "cannot attend to it. Use the head vote (from the pronoun to the candidates)."
            )
        return torch.stack([w[:, :, pc, p].amax(-1) for pc in pieces], dim=-1)  # candidate -> pronoun
    return torch.stack([w[:, :, p, pc].amax(-1) for pc in pieces], dim=-1)  # pronoun -> candidate


def same_tokens(case: PronounCase, axis: TokenAxis, pieces: list[list[int]]) -> None:
    """A ValueError where one candidate's content pieces equal or hold another's ("the old house" and "the new
    house" -> both `house`; "Joe" inside "Joe's uncle"): a max over pieces then ties in every head or can never
    pick the smaller one, so the case cannot be scored."""
    for i, a in enumerate(pieces):
        for j, b in enumerate(pieces):
            if i != j and set(a) <= set(b):
                shared = " ".join(axis.tokens[k] for k in a)
                raise ValueError(
                    f'candidates "{case.candidates[i].strip()}" and "{case.candidates[j].strip()}" land on the same '
                    f'tokens ("{shared}"): no head can tell them apart'
                )


def head_picks(case_scores: Tensor) -> Tensor:
    """(L, H): the candidate each head scores highest."""
    return case_scores.argmax(-1)


def head_ties(case_scores: Tensor) -> int:
    """How many heads give their top score to two candidates or more (argmax then takes the first)."""
    top = case_scores.amax(-1, keepdim=True)  # (L, H, 1)
    return int(((case_scores == top).sum(-1) > 1).sum())


def vote_counts(case_scores: Tensor) -> Tensor:
    """(C,): how many heads pick each candidate."""
    return torch.bincount(head_picks(case_scores).flatten(), minlength=case_scores.shape[-1])


def mas_values(case_scores: Tensor) -> Tensor:
    """(C,): the Maximum Attention Score of each candidate: every head's maximum value added to the candidate
    it scores highest, summed over heads and normalised to sum to 1 (all zeros if every score is 0)."""
    flat = case_scores.reshape(-1, case_scores.shape[-1])  # (L*H, C)
    best, winner = flat.max(-1)  # (L*H,)
    total = torch.zeros(case_scores.shape[-1], dtype=flat.dtype).index_add_(0, winner, best)
    return total / total.sum() if total.sum() > 0 else total


def predict(case_scores: Tensor, method: Method) -> tuple[int, bool]:
    """The predicted candidate, and whether the top was tied.

    mas: the largest Maximum Attention Score (a tie goes to the first candidate, as numpy's argmax does);
    vote: the most votes (a tie in votes goes to the larger summed score).
    """
    if method == "mas":
        values = mas_values(case_scores)
        return int(values.argmax()), int((values == values.max()).sum()) > 1
    votes = vote_counts(case_scores)
    tied = (votes == votes.max()).nonzero().flatten()
    sums = case_scores.sum((0, 1))  # (C,)
    return int(tied[sums[tied].argmax()]), len(tied) > 1


@dataclass(frozen=True)
class CaseResult:
    """One case scored: (L, H, C) scores, the method, and the candidate it predicts."""

    case: PronounCase
    scores: Tensor  # (L, H, C)
    method: Method
    predicted: str
    tie: bool = False
    head_ties: int = 0  # heads whose top score is shared by two candidates or more

    @property
    def correct(self) -> bool:
        """The prediction is the right answer."""
        return self.predicted == self.case.answer

    @property
    def answer_index(self) -> int:
        """The right answer's position among the candidates."""
        return self.case.candidates.index(self.case.answer)


def score_result(result: Attention, case: PronounCase, method: Method = "mas") -> CaseResult:
    """Score a case on the attention of its text."""
    case_scores = scores(result, case, method)
    index, tie = predict(case_scores, method)
    return CaseResult(case, case_scores, method, case.candidates[index], tie, head_ties(case_scores))


def pronoun_row(result: Attention, case: PronounCase, layer: int, head: int) -> Tensor:
    """(Tk,): where the pronoun (its first piece) looks in one head."""
    axis = _check_text(result, case)
    return result.weights[layer, head, pronoun_piece(axis, locate(case).pronoun)]


def best_heads(share: Tensor, k: int = 5) -> list[tuple[int, int, float]]:
    """The k heads with the largest values of an (L, H) map, as (layer, head, value), 0-based."""
    order = torch.argsort(share.flatten(), descending=True, stable=True)[:k]
    n_h = share.shape[1]
    return [(int(i) // n_h, int(i) % n_h, share.flatten()[i].item()) for i in order]


FLIP_NAMES = {2: "flips with the word", 1: "same pick both times", 0: "flips the wrong way"}


def same_scores(a: Tensor, b: Tensor, atol: float = 1e-5) -> bool:
    """Whether every head scores the candidates the same in two cases, (L, H, C) each (to `atol`): what a causal
    model must do on a pair whose differing word comes after the pronoun."""
    return a.shape == b.shape and bool(torch.allclose(a, b, atol=atol))


def flip_categories(a: CaseResult, b: CaseResult) -> Tensor:
    """(L, H) for a minimal pair: 2 where the head picks the right word both times (it flips with the word),
    1 where it picks the same word both times, 0 otherwise."""
    pick_a, pick_b = head_picks(a.scores), head_picks(b.scores)
    right = (pick_a == a.answer_index) & (pick_b == b.answer_index)
    return torch.where(right, 2, torch.where(pick_a == pick_b, 1, 0))


@dataclass(frozen=True)
class Benchmark:
    """Many cases scored with one method, and the ones that could not be (with the reason)."""

    results: list[CaseResult]
    skipped: list[tuple[PronounCase, str]]
    method: Method = "mas"
    skipped_at: tuple[int, ...] = ()  # where each skipped case was among the cases given (0-based), in order

    def rows(self) -> list[dict]:
        """Every case in the order given, as a table's rows: its text, pronoun, candidates, answer, the candidate
        predicted, whether that is right, whether it won a tie, and why a case was skipped. Text from the cases is
        made safe for a spreadsheet (escape.csv_cell)."""
        scored, skipped = iter(self.results), iter(self.skipped)
        total = self.n + len(self.skipped)
        # made by hand without their positions: the skipped cases last
        gone = set(self.skipped_at) if len(self.skipped_at) == len(self.skipped) else set(range(self.n, total))
        out = []
        for i in range(total):
            if i in gone:
                case, why = next(skipped)
                row: dict[str, str | bool] = {"predicted": "", "correct": "", "tie": "", "skipped": why}
            else:
                r = next(scored)
                case, row = r.case, {"predicted": r.predicted, "correct": r.correct, "tie": r.tie, "skipped": ""}
            given = {"case": i + 1, "text": case.text, "pronoun": case.pronoun}
            given |= {"candidates": " | ".join(case.candidates), "answer": case.answer}
            out.append({k: csv_cell(v) if isinstance(v, str) else v for k, v in (given | row).items()})
        return out

    @property
    def n(self) -> int:
        """Cases scored."""
        return len(self.results)

    @property
    def accuracy(self) -> float:
        """The share of cases predicted right."""
        return sum(r.correct for r in self.results) / self.n if self.n else 0.0

    @property
    def chance(self) -> float:
        """The accuracy of a uniform guess among each case's candidates."""
        return sum(1 / len(r.case.candidates) for r in self.results) / self.n if self.n else 0.0

    @property
    def ties(self) -> int:
        """Cases whose prediction won a tie."""
        return sum(r.tie for r in self.results)

    @property
    def head_ties(self) -> int:
        """Heads, over every case, whose top score was shared by two candidates or more."""
        return sum(r.head_ties for r in self.results)

    def undecided_at_pronoun(self) -> int:
        """Scored cases that read word for word like a twin of their group (groups()) up to and including the
        pronoun, where the twin's answer is another: what decides between them comes after the pronoun, which a
        causal model's pronoun has not read, so its vote is the same on both and at most one of them is right."""
        cases = [r.case for r in self.results]
        members: dict[int, list[PronounCase]] = {}
        for g, case in zip(groups(cases), cases, strict=True):
            members.setdefault(g, []).append(case)

        def blind(a: PronounCase, twins: list[PronounCase]) -> bool:
            other = [b for b in twins if b.answer.strip().lower() != a.answer.strip().lower()]
            return any(differ_after_pronoun(a, b) for b in other)

        return sum(blind(a, twins) for twins in members.values() for a in twins)

    def _hits(self, results: Sequence[CaseResult]) -> Tensor:
        """(N, L, H): whether each head's own pick is the right answer, case by case."""
        return torch.stack([head_picks(r.scores) == r.answer_index for r in results])

    @property
    def per_head(self) -> Tensor:
        """(L, H): the share of cases where the head's own pick is the answer."""
        return self._hits(self.results).float().mean(0)

    @property
    def best_head(self) -> tuple[int, int, float]:
        """(layer, head, accuracy) of the head right most often, picked on these very cases (0-based)."""
        layer, head, value = best_heads(self.per_head, 1)[0]
        return layer, head, value

    def halves(self) -> tuple[list[CaseResult], list[CaseResult]]:
        """Two halves of the cases, every group whole (see `groups`): groups 1, 3, 5, ... and 2, 4, 6, ..."""
        numbers = groups([r.case for r in self.results])
        a = [r for r, g in zip(self.results, numbers, strict=True) if g % 2 == 0]
        b = [r for r, g in zip(self.results, numbers, strict=True) if g % 2 == 1]
        return a, b

    def held_out_best_head(self) -> tuple[float, list[tuple[int, int]]]:
        """The best head picked on one half, scored on the other (and the reverse), averaged; and the two heads."""
        a, b = self.halves()
        if not a or not b:
            return float("nan"), []
        out, picked = [], []
        for pick_on, score_on in ((a, b), (b, a)):
            layer, head, _ = best_heads(self._hits(pick_on).float().mean(0), 1)[0]
            picked.append((layer, head))
            out.append(self._hits(score_on)[:, layer, head].float().mean().item())
        return sum(out) / 2, picked

    def permutation_best_head(self, runs: int = PERMUTATIONS, seed: int = 0) -> float:
        """The expected accuracy of the best of L x H heads when every case's answer is drawn at random
        from its candidates: what picking the best head finds by chance alone."""
        if not self.n:
            return float("nan")
        gen = torch.Generator().manual_seed(seed)
        picks = torch.stack([head_picks(r.scores).flatten() for r in self.results])  # (N, L*H)
        sizes = torch.tensor([len(r.case.candidates) for r in self.results])  # (N,)
        answers = (torch.rand(runs, self.n, generator=gen, dtype=torch.float64) * sizes).long()  # (R, N)
        hits = picks[None] == answers[:, :, None]  # (R, N, L*H)
        return hits.float().mean(1).amax(-1).mean().item()

    def skip_reasons(self) -> Counter:
        """How many cases were skipped for each reason (the candidate or word named in it left out)."""
        return Counter(re.sub(r"\"[^\"]*\"|'[^']*'", "…", why) for _, why in self.skipped)


TWIN_SIMILARITY = 0.8  # texts at least this alike (difflib's ratio) are one schema's variants


def groups(cases: Sequence[PronounCase]) -> list[int]:
    """0, 1, 2, ... per case: a case joins the group of the case before it when the two name the same candidates
    or their texts are at least TWIN_SIMILARITY alike (a Winograd schema and its twins: WSC273's pairs, its
    triple, PDP's passages asked more than once), whatever their index or the cases skipped between them.
    Two neighbouring schemas that happen to share names join one group: coarser, still whole."""
    out: list[int] = []
    for i, case in enumerate(cases):
        if i == 0:
            out.append(0)
            continue
        before = cases[i - 1]
        names = sorted(c.strip().lower() for c in case.candidates) == sorted(
            c.strip().lower() for c in before.candidates
        )
        alike = SequenceMatcher(None, before.text.lower(), case.text.lower()).ratio() >= TWIN_SIMILARITY
        out.append(out[-1] + (not (names or alike)))
    return out


def evaluate_with(
    score: Callable[[PronounCase], CaseResult],
    cases: Iterable[PronounCase],
    method: Method = "mas",
    progress: Callable[[int], None] | None = None,
) -> Benchmark:
    """Score every case with `score`; a case whose words cannot be found is skipped with the reason."""
    results, skipped, skipped_at = [], [], []
    for i, case in enumerate(cases):
        try:
            results.append(score(case))
        except ValueError as err:
            if "not defined for a causal model" in str(err):
                raise
            skipped.append((case, str(err)))
            skipped_at.append(i)
        if progress:
            progress(i + 1)
    return Benchmark(results, skipped, method, tuple(skipped_at))
