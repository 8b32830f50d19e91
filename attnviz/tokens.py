"""Tokens: checking typed text, encoding it within a model's limit, and what each token is.

`TokenAxis` is the one source of truth about the tokens on one axis of a map: each token as text a
person reads ("animal", "↵") and as the model's raw piece ("Ġanimal", "Ċ"), whether it is special,
which word it belongs to, and which characters of the text it covers. Engines build it once, from
the tokenizer's own word ids and offsets; hiding special tokens, merging word pieces, pronoun
matching and statistics read it and never re-parse token strings. Every label, hover, export and
snapshot shows the tokens as text; the raw pieces are in the one-head hovers and the JSON.
"""

from __future__ import annotations

import collections
import dataclasses
import re
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from attnviz.escape import html_text

MAX_CHARS = 200_000  # far beyond any model's positions; stops a paste of a whole book early
KEPT_TEXTS = 64  # texts a Tokenizer keeps encoded (the newest)
KEPT_CHARS = 4_000  # ... of at most this many characters: a long text is encoded anew, and not kept
NO_SPAN = (0, 0)  # a token that covers no character of the text (special tokens)
SHOWN_AS: dict[str, str | int | None] = {"\n": "↵", "\r": "↵", "\t": "⇥"}  # whitespace a label makes visible
# A token of characters that draw nothing (an emoji's zero-width joiner, a variation selector, a byte-order mark)
# was a label of nothing at all: "·6". Such a token is shown by these names, any other as its code point (⟨U+0085⟩).
INVISIBLE = {
    "\u00ad": "SHY",
    "\u200b": "ZWSP",
    "\u200c": "ZWNJ",
    "\u200d": "ZWJ",
    "\u200e": "LRM",
    "\u200f": "RLM",
    "\u2060": "WJ",
    "\ufe0e": "VS15",
    "\ufe0f": "VS16",
    "\ufeff": "BOM",
}
# Right-to-left letters (Hebrew, Arabic, Syriac, Thaana, N'Ko; their presentation forms; the historic scripts of
# the SMP's right-to-left blocks). A label "مرحبا ·13" was drawn "13· مرحبا": after Arabic letters the bidi algorithm
# reads 13 as an Arabic number, and the whole label ran right to left. A left-to-right mark after the token keeps
# its position where every other label has it.
RTL = re.compile("[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefe\U00010800-\U00010fff\U0001e800-\U0001efff]")
LRM = "\u200e"


def check_text(text: object) -> str:
    """The text to encode, or a ValueError saying what is wrong with it."""
    if not isinstance(text, str):
        raise ValueError(f"The text must be a string, not {type(text).__name__}.")
    if not text.strip():
        raise ValueError("The text is empty: type a sentence to see its attention.")
    if len(text) > MAX_CHARS:
        raise ValueError(
            f"The text is {len(text):,} characters long; attnviz reads at most {MAX_CHARS:,}. "
            "Paste a shorter passage (a model sees at most a few thousand tokens anyway)."
        )
    return text


def number_words(word_ids: Sequence[int | None], special: Sequence[bool]) -> tuple[int, ...]:
    """0, 1, 2, ... per token from a tokenizer's word ids: a special token is a word of its own."""
    words, w, prev = [], -1, None
    for i, (wid, sp) in enumerate(zip(word_ids, special, strict=True)):
        if sp or wid is None or wid != prev or (i > 0 and special[i - 1]):
            w += 1
        words.append(w)
        prev = None if sp else wid
    return tuple(words)


# A special token's name as tokenizers write them: [CLS], [SEP], [PAD] (WordPiece); <|endoftext|>, <|im_start|>
# (byte-level BPE); <s>, </s>, <pad>, <bos>, <start_of_turn> (SentencePiece and others).
_SPECIAL_NAME = re.compile(r"\[[A-Z]{2,10}\]|<\|[^|<>\s]{1,40}\|>|</?[a-z][a-z_]{0,29}>")


def named_special(token: str) -> bool:
    """Whether a token known only by its name is a tokenizer's special token (the rule above). Weights a user passes
    with their tokens are labelled as the same weights from attnviz's own run: the same heads read "[CLS]" (a head
    on a first token that is special), not "first-token"."""
    return bool(_SPECIAL_NAME.fullmatch(str(token)))


@dataclass(frozen=True)
class TokenAxis:
    """The tokens along one axis of a map, and what each one is."""

    tokens: tuple[str, ...]  # as text to read: "[CLS]", "play", "##ing", "the" (see `shown`)
    special: tuple[bool, ...]  # [CLS], [SEP], <s>, </s>, ...
    words: tuple[int, ...]  # the word each token belongs to, 0, 1, 2, ... in order
    spans: tuple[tuple[int, int], ...]  # each token's [start, end) characters in `text`; NO_SPAN if none
    text: str = ""  # the text the spans index into ("" when unknown)
    pieces: tuple[str, ...] = ()  # as the model names them: "Ġthe", "Ċ" (the tokens themselves if not given)

    def __post_init__(self) -> None:
        for name in ("tokens", "special", "words", "spans", "pieces"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not self.pieces:
            object.__setattr__(self, "pieces", self.tokens)
        n = len(self.tokens)
        if not len(self.special) == len(self.words) == len(self.spans) == len(self.pieces) == n:
            raise ValueError("a token axis needs one special flag, word, span and piece per token")
        previous = (-1, *self.words)[: len(self.words)]
        if any(b - a not in (0, 1) for a, b in zip(previous, self.words, strict=True)):
            raise ValueError("word numbers must start at 0 and go up by at most one per token")

    @classmethod
    def plain(cls, tokens: Sequence[str]) -> TokenAxis:
        """Tokens known only by name: special where the name says so (named_special), each its own word, no
        characters."""
        n = len(tokens)
        return cls(tuple(tokens), tuple(named_special(t) for t in tokens), tuple(range(n)), (NO_SPAN,) * n)

    def __len__(self) -> int:
        return len(self.tokens)

    def surface(self, i: int) -> str:
        """The characters of the text token i covers ("" for special tokens and unknown text)."""
        start, end = self.spans[i]
        return self.text[start:end]

    def groups(self) -> list[list[int]]:
        """Token positions word by word."""
        out: list[list[int]] = []
        for i, w in enumerate(self.words):
            if w == len(out):
                out.append([])
            out[w].append(i)
        return out

    def merged(self) -> TokenAxis:
        """One token per word, named by the word's characters in the text (or its tokens joined)."""
        groups = self.groups()
        spans, names = [], []
        for g in groups:
            covered = [self.spans[i] for i in g if self.spans[i] != NO_SPAN]
            span = (covered[0][0], covered[-1][1]) if covered else NO_SPAN
            spans.append(span)
            name = self.text[span[0] : span[1]].strip()
            names.append(shown(name) if name else "".join(self.tokens[i] for i in g))
        special = tuple(self.special[g[0]] for g in groups)
        pieces = tuple("".join(self.pieces[i] for i in g) for g in groups)
        return TokenAxis(tuple(names), special, tuple(range(len(groups))), tuple(spans), self.text, pieces)

    def subset(self, keep: Sequence[bool]) -> TokenAxis:
        """The tokens kept, with their words renumbered."""
        idx = [i for i, k in enumerate(keep) if k]
        return TokenAxis(
            tuple(self.tokens[i] for i in idx),
            tuple(self.special[i] for i in idx),
            number_words([self.words[i] for i in idx], [False] * len(idx)),
            tuple(self.spans[i] for i in idx),
            self.text,
            tuple(self.pieces[i] for i in idx),
        )

    def shifted_right(self, start_token: str) -> TokenAxis:
        """What a decoder reads when teacher-forced: a start token, then every token but the last."""
        return TokenAxis(
            (start_token, *self.tokens[:-1]),
            (True, *self.special[:-1]),
            (0, *(w + 1 for w in self.words[:-1])),
            (NO_SPAN, *self.spans[:-1]),
            self.text,
            (start_token, *self.pieces[:-1]),
        )

    def window(self, start: int, stop: int) -> TokenAxis:
        """Tokens start..stop-1, words renumbered from 0."""
        return self.subset([start <= i < stop for i in range(len(self))])


@dataclass(frozen=True)
class Encoded:
    """One text as a model sees it."""

    ids: tuple[int, ...]
    axis: TokenAxis
    truncated: int  # tokens dropped to fit the model's limit

    @property
    def tokens(self) -> tuple[str, ...]:
        """The tokens as the model names them."""
        return self.axis.tokens


def shown(text: str) -> str:
    """A token's characters as a label: the one leading space that marks a word's start left out, any other
    leading space as ␣, newlines as ↵ and tabs as ⇥; a token of spaces alone as ␣ per space."""
    body = text[1:] if text.startswith(" ") and text.strip() else text
    lead = len(body) - len(body.lstrip(" "))
    body = "␣" * lead + body[lead:]
    body = body.replace("\r\n", "↵").translate(str.maketrans(SHOWN_AS))
    if body and all(_draws_nothing(c) for c in body):
        return "".join(f"⟨{INVISIBLE.get(c) or f'U+{ord(c):04X}'}⟩" for c in body)
    return body.replace(" ", "␣") if not body.replace("␣", "").strip() else body


def _draws_nothing(c: str) -> bool:
    return c in INVISIBLE or unicodedata.category(c) in ("Cf", "Cc") or "\ufe00" <= c <= "\ufe0f"


def ltr_end(label: str) -> str:
    """A token's label, then a left-to-right mark where it holds right-to-left letters: what comes after it in a
    label (its position, " ·13") stays after it."""
    return label + LRM if RTL.search(label) else label


def readable(
    hf_tokenizer, pieces: Sequence[str], special: Sequence[bool], spans=None, text: str = ""
) -> tuple[str, ...]:
    """Each token as text to read: its piece decoded by the tokenizer ("Ġanimal" -> "animal", "Ċ" -> "↵",
    "<0x0A>" -> "↵"; WordPiece's "##ing" stays), a piece holding part of a character read from the text it
    covers (an emoji's byte pieces each show the emoji), a special token as it is named."""
    memo: dict[str, str] = {}
    spans = spans or (NO_SPAN,) * len(pieces)
    out = []
    for piece, sp, (start, end) in zip(pieces, special, spans, strict=True):
        if sp:
            out.append(piece)
            continue
        if piece not in memo:
            try:
                memo[piece] = hf_tokenizer.convert_tokens_to_string([piece])
            except Exception:  # noqa: BLE001 - a tokenizer that cannot decode one piece: show the piece
                memo[piece] = piece
        decoded = memo[piece]
        if "\ufffd" in decoded and end > start:
            decoded = text[start:end]  # part of a character: the character it belongs to
        out.append(shown(decoded) if decoded else piece)
    return tuple(out)


def axis_of(tokenizer, enc, ids: Sequence[int], special: Sequence[bool], text: str) -> TokenAxis:
    """The token axis of one Hugging Face encoding (a BatchEncoding for one text)."""
    pieces = tuple(tokenizer.convert_ids_to_tokens(list(ids)))
    special = tuple(special)
    if not getattr(enc, "is_fast", False):  # a slow tokenizer knows no words or offsets
        words, spans = number_words(list(range(len(ids))), special), (NO_SPAN,) * len(ids)
        return TokenAxis(readable(tokenizer, pieces, special), special, words, spans, pieces=pieces)
    spans = tuple(NO_SPAN if sp else tuple(o) for o, sp in zip(enc["offset_mapping"], special, strict=True))
    names = readable(tokenizer, pieces, special, spans, text)
    return TokenAxis(names, special, number_words(enc.word_ids(), special), spans, text, pieces)


class Tokenizer:
    """A Hugging Face tokenizer behind one lock: the fast tokenizer is not thread-safe ("Already borrowed").

    The last KEPT_TEXTS texts of up to KEPT_CHARS characters are kept encoded: a page encodes its text on every run,
    and a class's 30 followers draw the same text at once, one after another behind the lock."""

    def __init__(self, hf_tokenizer) -> None:
        self.hf = hf_tokenizer
        self._lock = threading.Lock()
        self._kept: collections.OrderedDict[tuple, Encoded] = collections.OrderedDict()

    def _call(self, text: str, *, target: bool, max_tokens: int | None = None) -> tuple[tuple[int, ...], TokenAxis]:
        """Ids and axis of one text, special tokens added (hold the lock)."""
        cut = {"truncation": True, "max_length": max_tokens} if max_tokens else {}
        enc = self.hf(
            **{"text_target" if target else "text": text},
            add_special_tokens=True,
            return_special_tokens_mask=True,
            return_offsets_mapping=self.hf.is_fast,
            **cut,
        )
        ids = tuple(enc["input_ids"])
        return ids, axis_of(self.hf, enc, ids, [bool(s) for s in enc["special_tokens_mask"]], text)

    def encode(self, text: str, max_tokens: int, *, target: bool = False, specials_by_id: bool = False) -> Encoded:
        """Tokenize `text` with special tokens, keeping at most `max_tokens` of them.

        target=True encodes a decoder's text (the labels of an encoder-decoder). A special token's name typed in
        the text ("[CLS]", "<bos>") is cut as Hugging Face's tokenizer cuts it, into that marker's own id, which the
        model reads as its marker; the axis flags only the markers the tokenizer adds (its special_tokens_mask), so
        a typed one is drawn and counted as text ("Hide the model's markers" keeps it; the share on [SEP] and the
        other markers leaves it out). specials_by_id flags every marker by its id (a chat template, whose markers
        are written as text).
        """
        text = check_text(text)
        key = (text, max_tokens, target, specials_by_id)
        if len(text) <= KEPT_CHARS:
            with self._lock:
                if key in self._kept:
                    self._kept.move_to_end(key)
                    return self._kept[key]
        encoded = self._encode(text, max_tokens, target=target, specials_by_id=specials_by_id)
        if len(text) <= KEPT_CHARS:
            with self._lock:
                self._kept[key] = encoded
                while len(self._kept) > KEPT_TEXTS:
                    self._kept.popitem(last=False)
        return encoded

    def _encode(self, text: str, max_tokens: int, *, target: bool, specials_by_id: bool) -> Encoded:
        with self._lock:
            full = len(self._call(text, target=target)[0])
            ids, axis = self._call(text, target=target, max_tokens=max_tokens)
            if specials_by_id:
                special_ids = set(self.hf.all_special_ids)
                special = tuple(i in special_ids for i in ids)
                axis = dataclasses.replace(axis, special=special, words=number_words(list(axis.words), special))
        if not target and all(axis.special):
            raise ValueError(
                "The text has no characters this model can read (only spaces, control or "
                "zero-width characters?): type some words."
            )
        return Encoded(ids, axis, full - len(ids))

    def cut(self, text: str, max_tokens: int) -> list[str]:
        """`text` in pieces of at most `max_tokens` tokens each with the special tokens added, cut where a word starts
        (inside a word only when one word is longer than a piece); the whitespace at a cut is dropped."""
        with self._lock:
            specials = len(self.hf("", add_special_tokens=True)["input_ids"])
            enc = self.hf(text, add_special_tokens=False, return_offsets_mapping=self.hf.is_fast, verbose=False)
        room, ids = max(1, max_tokens - specials), enc["input_ids"]
        if not self.hf.is_fast:  # no offsets: the pieces are the ids decoded
            return [self.decode(ids[i : i + room]) for i in range(0, len(ids), room)]
        offsets, words, pieces, start = enc["offset_mapping"], enc.word_ids(), [], 0
        while start < len(ids):
            stop = min(len(ids), start + room)
            back = stop
            while stop < len(ids) and back > start and words[back] is not None and words[back] == words[back - 1]:
                back -= 1
            stop = back if back > start else stop
            piece = text[offsets[start][0] : offsets[stop - 1][1]].strip()
            if piece:
                pieces.append(piece)
            start = stop
        return pieces

    def encode_whole(self, text: str) -> Encoded:
        """Tokenize `text` with special tokens, all of it (one pass: nothing is cut, so nothing is counted)."""
        text = check_text(text)
        with self._lock:
            ids, axis = self._call(text, target=False)
        if all(axis.special):
            raise ValueError("The text has no characters this model can read: type some words.")
        return Encoded(ids, axis, 0)

    def extended(self, axis: TokenAxis, ids: Sequence[int]) -> TokenAxis:
        """The axis with tokens a model wrote after it: each its own word, special by its id, no characters."""
        pieces, special, names = self._read(ids)
        n_words = len(axis.groups())
        return TokenAxis(
            (*axis.tokens, *names),
            (*axis.special, *special),
            (*axis.words, *range(n_words, n_words + len(ids))),
            (*axis.spans, *[NO_SPAN] * len(ids)),
            axis.text,
            (*axis.pieces, *pieces),
        )

    def _read(self, ids: Sequence[int]) -> tuple[tuple[str, ...], tuple[bool, ...], tuple[str, ...]]:
        """The raw pieces of ids, whether each is special (by its id), and each as text to read."""
        with self._lock:
            pieces = tuple(self.hf.convert_ids_to_tokens(list(ids)))
            special_ids = set(self.hf.all_special_ids)
            special = tuple(i in special_ids for i in ids)
            return pieces, special, readable(self.hf, pieces, special)

    def plain_axis(self, ids: Sequence[int]) -> TokenAxis:
        """Ids known only as tokens: each its own word, special by its id, no characters."""
        pieces, special, names = self._read(ids)
        n = len(pieces)
        return TokenAxis(names, special, tuple(range(n)), (NO_SPAN,) * n, pieces=pieces)

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ids, special tokens left out."""
        with self._lock:
            return self.hf.decode(list(ids), skip_special_tokens=True)

    def axis_for_ids(self, ids: Sequence[int]) -> TokenAxis:
        """The axis of ids a model wrote itself: its words and characters when re-encoding its text gives
        the same ids, else each token its own word."""
        ids = tuple(ids)
        with self._lock:
            text = self.hf.decode(list(ids), skip_special_tokens=True)
            if text.strip():
                again, axis = self._call(text, target=True)
                if again == ids:
                    return axis
        return self.plain_axis(ids)


def plain_labels(tokens: Sequence[str]) -> list[str]:
    """Unique labels as plain text ("it ·9"), for widgets and stored answers; escape them where they are shown."""
    return [f"{ltr_end(tok[:80])} ·{i + 1}" for i, tok in enumerate(tokens)]


def display_labels(tokens: Sequence[str]) -> list[str]:
    """Escaped, unique labels for a browser axis: "it ·9" (1-based position), so equal tokens stay apart."""
    return [f"{ltr_end(html_text(tok, limit=80))} ·{i + 1}" for i, tok in enumerate(tokens)]
