"""A pronoun case, where its words are in its text, and the lesson's minimal pairs.

A case is a text, its pronoun, the candidates it could refer to and the right one. The pronoun is the annotated
one: Winograd XML gives its position, a JSONL case may give "pronoun_at" (a character offset); otherwise it is the
first whole-word occurrence after the first candidate. Its first word piece is the one read (the authors'
reference_idx). Candidates are found in the text as written, then without a leading determiner, then by their head
noun (the last word), then by the head noun's singular or plural; a case whose candidate is still not found is
skipped, with the reason. How the cases are scored: attnviz.analysis.pronoun_scores; read from files:
attnviz.corpus.pronoun_files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from attnviz.tokens import TokenAxis

DETERMINERS = {"the", "a", "an", "his", "her", "their", "its", "my", "our", "your", "this", "that", "these", "those"}


@dataclass(frozen=True)
class PronounCase:
    """A text, its pronoun (and where it is), the candidates it could refer to, and the right one."""

    text: str
    pronoun: str
    candidates: tuple[str, ...]
    answer: str
    pronoun_at: int | None = None  # character offset of the annotated pronoun; None: find it

    def __post_init__(self) -> None:
        if not isinstance(self.candidates, list | tuple) or not all(isinstance(c, str) for c in self.candidates):
            raise ValueError("the candidates must be a list of words")
        object.__setattr__(self, "candidates", tuple(self.candidates))
        for name in ("text", "pronoun", "answer"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ValueError(f"the {name} must be a non-empty string")
        if len(self.candidates) < 2:
            raise ValueError("a pronoun case needs at least two candidates")
        if self.answer not in self.candidates:
            raise ValueError(f"the answer {self.answer!r} is not one of the candidates {list(self.candidates)}")
        at = self.pronoun_at
        if at is not None:
            if isinstance(at, bool) or not isinstance(at, int):
                raise ValueError("pronoun_at must be a character offset (a whole number)")
            if at < 0 or self.text[at : at + len(self.pronoun)].lower() != self.pronoun.lower():
                raise ValueError(f"the text has no '{self.pronoun}' at character {at}")
            end = at + len(self.pronoun)
            if (at > 0 and self.text[at - 1].isalnum()) or (end < len(self.text) and self.text[end].isalnum()):
                word = re.findall(r"\w*$", self.text[:at])[0] + re.findall(r"^\w*", self.text[at:])[0]
                raise ValueError(f"pronoun_at {at} is inside the word '{word}', not at the pronoun '{self.pronoun}'")


@dataclass(frozen=True)
class Located:
    """Where a case's words are in its text: character spans, and how each candidate was found."""

    pronoun: tuple[int, int]
    candidates: tuple[tuple[int, int], ...]  # the content of each candidate (a leading determiner left out)
    how: tuple[str, ...]  # "as written", "without a determiner", "head noun", "singular/plural"


def _find(text: str, word: str, start: int = 0) -> tuple[int, int] | None:
    """The span of `word` as a whole word in `text`, at or after `start`, or None."""
    m = re.compile(r"(?<!\w)" + re.escape(word.strip()) + r"(?!\w)", re.IGNORECASE).search(text, start)
    return m.span() if m else None


def number_forms(word: str) -> list[str]:
    """The other grammatical number of a noun, by English spelling rules: piece <-> pieces, city <-> cities."""
    w = word.lower()
    forms = []
    if w.endswith("ies") and len(w) > 4:
        forms.append(word[:-3] + "y")
    if w.endswith("es") and len(w) > 3:
        forms.append(word[:-2])
    if w.endswith("s") and not w.endswith("ss") and len(w) > 2:
        forms.append(word[:-1])
    if w.endswith("y") and len(w) > 2 and w[-2] not in "aeiou":
        forms.append(word[:-1] + "ies")
    forms += [word + "s", word + "es"]
    return list(dict.fromkeys(f for f in forms if f.lower() != w))


def _strip_determiner(text: str, span: tuple[int, int]) -> tuple[int, int]:
    """The span without a leading determiner ("The lamp" -> "lamp"), when more words follow."""
    words = text[span[0] : span[1]].split()
    if len(words) > 1 and words[0].lower() in DETERMINERS:
        return span[0] + text[span[0] : span[1]].index(words[1], len(words[0])), span[1]
    return span


def find_candidate(text: str, candidate: str) -> tuple[tuple[int, int], str]:
    """The content span of a candidate and how it was found; a ValueError naming it if it is not there."""
    words = candidate.split()
    head = words[-1].removesuffix("'s") if words else candidate
    tries = [(candidate, "as written")]
    if len(words) > 1 and words[0].lower() in DETERMINERS:
        tries.append((" ".join(words[1:]), "without a determiner"))
    if len(words) > 1:
        tries.append((head, "head noun"))
    tries += [(form, "singular/plural") for form in number_forms(head)]
    for form, how in tries:
        span = _find(text, form)
        if span:
            return _strip_determiner(text, span), how
    raise ValueError(
        f"candidate '{candidate.strip()}' is not in the text (as written, without a determiner, by its head noun "
        f"'{head}' or its singular/plural)"
    )


def locate(case: PronounCase) -> Located:
    """Character spans of the pronoun and of each candidate in the case's text."""
    found = [find_candidate(case.text, c) for c in case.candidates]
    spans = tuple(span for span, _ in found)
    if case.pronoun_at is not None:
        pron = (case.pronoun_at, case.pronoun_at + len(case.pronoun))
    else:
        first_end = min(end for _, end in spans)
        after = _find(case.text, case.pronoun, first_end)
        if after is None:
            raise ValueError(f"pronoun '{case.pronoun}' is not in the text after the first candidate")
        pron = after
    return Located(pron, spans, tuple(how for _, how in found))


def differ_after_pronoun(a: PronounCase, b: PronounCase) -> bool:
    """Whether two cases read the same up to and including their pronoun (the word that tells them apart comes
    after it, as in every lesson pair): a causal model's attention from the pronoun cannot tell them apart."""
    end = locate(a).pronoun[1]
    return locate(b).pronoun[1] == end and a.text[:end] == b.text[:end] and a.text != b.text


def _overlapping(axis: TokenAxis, span: tuple[int, int]) -> list[int]:
    """The tokens whose characters overlap [start, end)."""
    a, b = span
    found = [i for i, (s, e) in enumerate(axis.spans) if e > s and s < b and e > a]
    if not found:
        raise ValueError("a word of the case was cut off by the model's length limit")
    return found


def content_pieces(axis: TokenAxis, span: tuple[int, int]) -> list[int]:
    """A candidate's pieces: all of them if it is one piece, else those whose token is longer than one character."""
    found = _overlapping(axis, span)
    if len(found) == 1:
        return found
    return [i for i in found if len(axis.pieces[i]) > 1] or found  # the piece, "##" included, as the authors


def pronoun_piece(axis: TokenAxis, span: tuple[int, int]) -> int:
    """The pronoun's first word piece."""
    return _overlapping(axis, span)[0]


def _pair(text: str, word_a: str, answer_a: str, word_b: str, answer_b: str, cands: tuple[str, str], pron: str = "it"):
    """Two cases from one template: the word filled in flips the answer."""
    return [
        PronounCase(text.format(word_a), pron, cands, answer_a),
        PronounCase(text.format(word_b), pron, cands, answer_b),
    ]


# Minimal pairs written for attnviz: one word changes the answer. The first is the seed material's.
# The one `fmt: skip` left in the code: a pair to a line or two, so that the lesson reads as a table.
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
