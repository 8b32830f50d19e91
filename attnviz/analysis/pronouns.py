"""Does attention resolve a pronoun? Per-head scores, the Maximum Attention Score, and benchmark readers.

For a case (text, pronoun, candidates, answer) and every layer and head: the attention from the
pronoun (the query; the mean over its word pieces) to each candidate (the key; the sum over the
pieces of the candidate's words). Each head picks the candidate it attends to most. The Maximum
Attention Score (Klein & Nabi 2019) lets every head vote for its candidate; most votes wins.

Words are found in the text, case-insensitively, as whole words: each candidate at its first
occurrence, the pronoun at its first occurrence after the first candidate's. Benchmarks name
candidates loosely ("the suitcase" for "the brown suitcase", "The son" for "his son"), so a
candidate not found as written is looked for without a leading determiner or possessive, then as
its last word (the head noun); only when none is found does the case fail, naming the word.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from attnviz.engines.base import Engine
from attnviz.result import AttentionResult
from attnviz.tokens import TokenAxis

PUBLISHED = {  # bert-base-uncased with the Maximum Attention Score (Klein & Nabi 2019)
    "WSC273": 0.60,
    "PDP-60": 0.68,
}


@dataclass(frozen=True)
class PronounCase:
    """A text, its pronoun, the candidates it could refer to, and the right one."""

    text: str
    pronoun: str
    candidates: tuple[str, ...]
    answer: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "candidates", tuple(self.candidates))
        if self.answer not in self.candidates:
            raise ValueError(f"the answer {self.answer!r} is not one of the candidates {list(self.candidates)}")
        if len(self.candidates) < 2:
            raise ValueError("a pronoun case needs at least two candidates")


def _find(text: str, word: str, start: int = 0) -> tuple[int, int]:
    """The span of `word` as a whole word in `text`, at or after `start`; a ValueError naming it if absent."""
    m = re.compile(r"(?<!\w)" + re.escape(word.strip()) + r"(?!\w)", re.IGNORECASE).search(text, start)
    if m is None:
        where = "" if start == 0 else " after the first candidate"
        raise ValueError(f"'{word.strip()}' was not found as a whole word{where} in: {text}")
    return m.span()


DETERMINERS = {"the", "a", "an", "his", "her", "their", "its", "my", "our", "your", "this", "that", "these", "those"}


def _find_candidate(text: str, candidate: str) -> tuple[int, int]:
    """The candidate as written, else without a leading determiner, else its last word."""
    words = candidate.split()
    forms = [candidate]
    if len(words) > 1 and words[0].lower() in DETERMINERS:
        forms.append(" ".join(words[1:]))
    if len(words) > 1:
        forms.append(words[-1].removesuffix("'s"))
    for form in forms:
        try:
            return _find(text, form)
        except ValueError:
            continue
    return _find(text, candidate)  # raises, naming the candidate as written


def locate(case: PronounCase) -> tuple[tuple[int, int], list[tuple[int, int]]]:
    """Character spans of the pronoun and of each candidate in the case's text."""
    spans = [_find_candidate(case.text, c) for c in case.candidates]
    first_end = min(end for _, end in spans)
    return _find(case.text, case.pronoun, first_end), spans


def pieces(axis: TokenAxis, span: tuple[int, int]) -> list[int]:
    """The tokens whose characters overlap [start, end)."""
    a, b = span
    found = [i for i, (s, e) in enumerate(axis.spans) if e > s and s < b and e > a]
    if not found:
        raise ValueError("a word of the case was cut off by the model's length limit")
    return found


def _check_text(result: AttentionResult, case: PronounCase) -> TokenAxis:
    axis = result.source
    if not any(e > s for s, e in axis.spans):
        raise ValueError("pronoun scoring needs each token's characters (a fast tokenizer)")
    if axis.text != case.text:
        raise ValueError("the result is not of this case's text")
    return axis


def scores(result: AttentionResult, case: PronounCase) -> Tensor:
    """(L, H, C): attention from the pronoun (mean over its pieces) to each candidate (sum over its pieces)."""
    axis = _check_text(result, case)
    pron_span, cand_spans = locate(case)
    q = pieces(axis, pron_span)
    rows = result.weights[:, :, q].mean(2)  # (L, H, Tk)
    return torch.stack([rows[:, :, pieces(axis, s)].sum(-1) for s in cand_spans], dim=-1)  # (L, H, C)


def pronoun_row(result: AttentionResult, case: PronounCase, layer: int, head: int) -> Tensor:
    """(Tk,): where the pronoun looks in one head (the mean over its pieces)."""
    q = pieces(_check_text(result, case), locate(case)[0])
    return result.weights[layer, head, q].mean(0)


def head_picks(case_scores: Tensor) -> Tensor:
    """(L, H): the candidate each head attends to most."""
    return case_scores.argmax(-1)


def vote_counts(case_scores: Tensor) -> Tensor:
    """(C,): how many heads pick each candidate."""
    return torch.bincount(head_picks(case_scores).flatten(), minlength=case_scores.shape[-1])


def best_heads(share: Tensor, k: int = 5) -> list[tuple[int, int, float]]:
    """The k heads with the largest values of an (L, H) map, as (layer, head, value), 0-based."""
    order = torch.argsort(share.flatten(), descending=True)[:k]
    n_h = share.shape[1]
    return [(int(i) // n_h, int(i) % n_h, share.flatten()[i].item()) for i in order]


FLIP_NAMES = {2: "flips with the word", 1: "same pick both times", 0: "flips the wrong way"}


def flip_categories(a: CaseResult, b: CaseResult) -> Tensor:
    """(L, H) for a minimal pair: 2 where the head picks the right word both times (it flips with the word),
    1 where it picks the same word both times, 0 otherwise."""
    pick_a, pick_b = head_picks(a.scores), head_picks(b.scores)
    right = (pick_a == a.case.candidates.index(a.case.answer)) & (pick_b == b.case.candidates.index(b.case.answer))
    return torch.where(right, 2, torch.where(pick_a == pick_b, 1, 0))


def mas_vote(case_scores: Tensor) -> int:
    """The Maximum Attention Score: every head votes for its top candidate; ties go to the larger total."""
    votes = torch.bincount(case_scores.argmax(-1).flatten(), minlength=case_scores.shape[-1]).float()  # (C,)
    totals = case_scores.sum((0, 1))  # (C,)
    return int((votes + 1e-6 * totals / totals.sum().clamp_min(1e-12)).argmax())


@dataclass(frozen=True)
class CaseResult:
    """One case scored: (L, H, C) scores and the candidate most heads picked."""

    case: PronounCase
    scores: Tensor  # (L, H, C)
    predicted: str

    @property
    def correct(self) -> bool:
        """The prediction is the right answer."""
        return self.predicted == self.case.answer


@dataclass(frozen=True)
class Benchmark:
    """Many cases scored, and the ones that could not be."""

    results: list[CaseResult]
    skipped: list[tuple[PronounCase, str]]  # cases whose words could not be found, and why

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
    def per_head(self) -> Tensor:
        """(L, H): the share of cases where the head's top candidate is the answer."""
        hits = [r.scores.argmax(-1) == r.case.candidates.index(r.case.answer) for r in self.results]
        return torch.stack(hits).float().mean(0)

    @property
    def best_head(self) -> tuple[int, int, float]:
        """(layer, head, accuracy) of the head right most often (0-based)."""
        acc = self.per_head
        flat = int(acc.argmax())
        return flat // acc.shape[1], flat % acc.shape[1], acc.flatten()[flat].item()


def score_result(result: AttentionResult, case: PronounCase) -> CaseResult:
    """Score a case on the attention of its text."""
    case_scores = scores(result, case)
    return CaseResult(case, case_scores, case.candidates[mas_vote(case_scores)])


def score_case(engine: Engine, case: PronounCase) -> CaseResult:
    """Run the engine on the case's text (once) and score it."""
    return score_result(next(iter(engine.run(case.text).values())), case)


def evaluate(engine: Engine, cases: Iterable[PronounCase], progress: Callable[[int], None] | None = None) -> Benchmark:
    """Score every case on the engine; a case whose words cannot be found is skipped with the reason."""
    return evaluate_with(lambda case: score_case(engine, case), cases, progress)


def evaluate_with(
    score: Callable[[PronounCase], CaseResult],
    cases: Iterable[PronounCase],
    progress: Callable[[int], None] | None = None,
) -> Benchmark:
    """Score every case with `score`; a case whose words cannot be found is skipped with the reason."""
    results, skipped = [], []
    for i, case in enumerate(cases):
        try:
            results.append(score(case))
        except ValueError as err:
            skipped.append((case, str(err)))
        if progress:
            progress(i + 1)
    return Benchmark(results, skipped)


def _clean(s: str | None) -> str:
    """Whitespace collapsed to single spaces."""
    return " ".join((s or "").split())


def read_winograd_xml(source: str | bytes | Path) -> list[PronounCase]:
    """Cases from the Winograd Schema Challenge XML (WSCollection.xml, PDPChallenge2016.xml)."""
    data = Path(source).read_bytes() if isinstance(source, Path) else source
    root = ET.fromstring(data)
    cases = []
    for schema in root.iter("schema"):
        text = schema.find("text")
        parts = [_clean(text.findtext("txt1")), _clean(text.findtext("pron")), _clean(text.findtext("txt2"))]
        pronoun = parts[1]
        answers = [_clean(a.text).rstrip(".,;:") for a in schema.find("answers").iter("answer")]
        letter = _clean(schema.findtext("correctAnswer")).strip(" .").upper()
        index = ord(letter[0]) - ord("A") if letter else -1
        if not 0 <= index < len(answers):
            raise ValueError(f"a schema's correct answer {letter!r} is not one of its {len(answers)} answers")
        body = " ".join(p for p in parts if p)
        body = re.sub(r"\s+([.,;:!?])", r"\1", body)
        cases.append(PronounCase(body, pronoun, tuple(answers), answers[index]))
    return cases


def read_jsonl(lines: Iterable[str]) -> list[PronounCase]:
    """Cases from JSON lines: {"text", "pronoun", "candidates", "answer"} each."""
    cases = []
    for n, line in enumerate(lines, 1):
        if line.strip():
            d = json.loads(line)
            try:
                cases.append(PronounCase(d["text"], d["pronoun"], tuple(d["candidates"]), d["answer"]))
            except KeyError as err:
                raise ValueError(f"line {n} has no {err.args[0]!r}") from err
    return cases


def read_cases(path: Path) -> list[PronounCase]:
    """A .jsonl file or a Winograd .xml file."""
    if path.suffix.lower() == ".xml":
        return read_winograd_xml(path)
    if path.suffix.lower() in (".jsonl", ".json"):
        return read_jsonl(path.read_text(encoding="utf-8").splitlines())
    raise ValueError(f"{path.name}: give a .jsonl file or a Winograd .xml file")


def _pair(text: str, word_a: str, answer_a: str, word_b: str, answer_b: str, cands: tuple[str, str], pron: str = "it"):
    """Two cases from one template: the word filled in flips the answer."""
    return [
        PronounCase(text.format(word_a), pron, cands, answer_a),
        PronounCase(text.format(word_b), pron, cands, answer_b),
    ]


# Minimal pairs written for attnviz: one word changes the answer. The first is the seed material's.
LESSON: list[PronounCase] = [
    *_pair("The animal didn't cross the street because it was too {}.", "tired", "animal", "wide", "street",
           ("animal", "street")),
    *_pair("The sofa would not go through the door because it was too {}.", "wide", "sofa", "narrow", "door",
           ("sofa", "door")),
    *_pair("The boat could not pass under the bridge because it was too {}.", "tall", "boat", "low", "bridge",
           ("boat", "bridge")),
    *_pair("The bottle did not fit in the bag because it was too {}.", "big", "bottle", "small", "bag",
           ("bottle", "bag")),
    *_pair("The book did not fit on the shelf because it was too {}.", "thick", "book", "short", "shelf",
           ("book", "shelf")),
    *_pair("The ball broke the window because it was {}.", "heavy", "ball", "fragile", "window", ("ball", "window")),
    *_pair("The cat chased the mouse because it was {}.", "hungry", "cat", "tasty", "mouse", ("cat", "mouse")),
    *_pair("The car overtook the truck because it was {}.", "faster", "car", "slower", "truck", ("car", "truck")),
    *_pair("The river flooded the village because it was {}.", "swollen", "river", "low-lying", "village",
           ("river", "village")),
    *_pair("The storm damaged the roof because it was {}.", "violent", "storm", "old", "roof", ("storm", "roof")),
    *_pair("The sun melted the snow because it was {}.", "strong", "sun", "thin", "snow", ("sun", "snow")),
    *_pair("The key did not open the lock because it was {}.", "bent", "key", "jammed", "lock", ("key", "lock")),
    *_pair("The phone slipped out of the pocket because it was {}.", "smooth", "phone", "shallow", "pocket",
           ("phone", "pocket")),
    *_pair("The bird could not crack the seed because it was too {}.", "weak", "bird", "hard", "seed",
           ("bird", "seed")),
    *_pair("The hammer smashed the vase because it was {}.", "heavy", "hammer", "brittle", "vase",
           ("hammer", "vase")),
    *_pair("Tom lent Jake money because he was {}.", "rich", "Tom", "broke", "Jake", ("Tom", "Jake"), "he"),
    *_pair("Emma beat Lucy at chess because she was {}.", "clever", "Emma", "careless", "Lucy", ("Emma", "Lucy"),
           "she"),
    *_pair("The nurse helped the patient because she was {}.", "kind", "nurse", "weak", "patient",
           ("nurse", "patient"), "she"),
    *_pair("The coach praised the player because he was {}.", "impressed", "coach", "brilliant", "player",
           ("coach", "player"), "he"),
    *_pair("The teacher scolded the student because she was {}.", "strict", "teacher", "late", "student",
           ("teacher", "student"), "she"),
    *_pair("Maria thanked Anna because she was {}.", "grateful", "Maria", "generous", "Anna", ("Maria", "Anna"),
           "she"),
    *_pair("The truck could not climb the hill because it was too {}.", "heavy", "truck", "steep", "hill",
           ("truck", "hill")),
]  # fmt: skip
