"""Tokens: checking typed text, encoding it within a model's limit, and naming tokens for people."""

from __future__ import annotations

import html
from dataclasses import dataclass

MAX_CHARS = 200_000  # far beyond any model's positions; stops a paste of a whole book early


def check_text(text: object) -> str:
    """The text to encode, or a ValueError saying what is wrong with it."""
    if not isinstance(text, str):
        raise ValueError(f"The text must be a string, not {type(text).__name__}.")
    if not text.strip():
        raise ValueError("The text is empty: type a sentence to see its attention.")
    if len(text) > MAX_CHARS:
        raise ValueError(
            f"The text is {len(text):,} characters long; attnviz reads at most {MAX_CHARS:,}. "
            "Paste a shorter passage (a model sees at most a few hundred tokens anyway)."
        )
    return text


@dataclass(frozen=True)
class Encoded:
    """One text as a model sees it."""

    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    word_ids: tuple[int | None, ...]  # the word each token belongs to; None for special tokens
    special: tuple[bool, ...]  # True for [CLS], [SEP], <s>, ...
    truncated: int  # tokens dropped to fit the model's limit
    offsets: tuple[tuple[int, int], ...] = ()  # each token's [start, end) characters in the text; (0, 0) for specials


def encode(tokenizer, text: str, max_tokens: int) -> Encoded:
    """Tokenize `text` with special tokens, keeping at most `max_tokens` of them."""
    text = check_text(text)
    full = len(tokenizer(text, add_special_tokens=True, verbose=False)["input_ids"])
    enc = tokenizer(
        text,
        add_special_tokens=True,
        truncation=True,
        max_length=max_tokens,
        return_special_tokens_mask=True,
        return_offsets_mapping=tokenizer.is_fast,
    )
    ids = tuple(enc["input_ids"])
    special = tuple(bool(s) for s in enc["special_tokens_mask"])
    if all(special):
        raise ValueError(
            "The text has no characters this model can read (only spaces, control or "
            "zero-width characters?): type some words."
        )
    word_ids = tuple(enc.word_ids()) if enc.is_fast else tuple(None if s else i for i, s in enumerate(special))
    offsets = tuple(tuple(o) for o in enc["offset_mapping"]) if tokenizer.is_fast else ()
    return Encoded(ids, tuple(tokenizer.convert_ids_to_tokens(list(ids))), word_ids, special, full - len(ids), offsets)


def display_labels(tokens: tuple[str, ...] | list[str]) -> list[str]:
    """Escaped, unique labels for a browser axis: "it ·9" (1-based position), so equal tokens stay apart."""
    return [f"{html.escape(tok)} ·{i + 1}" for i, tok in enumerate(tokens)]
