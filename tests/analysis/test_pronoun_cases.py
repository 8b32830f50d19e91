"""A pronoun case: checked as it is made, and its words found in its text (annotated, loosely named, plural)."""

import json

import pytest

from attnviz.analysis import pronoun_cases
from attnviz.analysis.pronoun_cases import PronounCase
from attnviz.corpus import pronoun_files


def test_the_annotated_pronoun_is_scored_when_the_pronoun_occurs_twice():
    text = "John saw Bill when he ran. He was glad."
    first = PronounCase(text, "he", ("John", "Bill"), "John")
    annotated = PronounCase(text, "He", ("John", "Bill"), "John", pronoun_at=text.index("He was"))
    he, second = text.index("he ran"), text.index("He was")
    assert pronoun_cases.locate(first).pronoun == (
        he,
        he + 2,
    )  # without a position: the first after the first candidate
    assert pronoun_cases.locate(annotated).pronoun == (second, second + 2)
    with pytest.raises(ValueError, match="no 'he' at character 3"):
        PronounCase(text, "he", ("John", "Bill"), "John", pronoun_at=3)


def test_a_candidate_written_in_the_plural_is_found_by_its_singular_and_the_reverse():
    case = PronounCase(
        "The teller gave the men a bag because they asked.", "they", ("the tellers", "the men"), "the men"
    )
    (teller, men) = pronoun_cases.locate(case).candidates
    assert case.text[slice(*teller)] == "teller" and case.text[slice(*men)] == "men"
    assert pronoun_cases.locate(case).how == ("singular/plural", "as written")
    assert pronoun_cases.number_forms("piece") == ["pieces", "piecees"] and "city" in pronoun_cases.number_forms(
        "cities"
    )


def test_loosely_named_candidates_fall_back_to_the_head_noun_and_drop_the_determiner():
    case = PronounCase(
        "The trophy did not fit into the brown suitcase because it was small.",
        "it",
        ("the trophy", "the suitcase"),
        "the suitcase",
    )
    where = pronoun_cases.locate(case)
    trophy, suitcase = where.candidates
    assert case.text[slice(*trophy)] == "trophy" and case.text[slice(*suitcase)] == "suitcase"
    assert where.how == ("as written", "without a determiner")
    assert (
        pronoun_cases.locate(PronounCase(case.text, "it", ("trophy", "the old suitcase"), "trophy")).how[1]
        == "head noun"
    )


def test_a_pronoun_position_inside_a_word_is_refused_with_the_word():
    text = "I went with Bill because it was late."
    with pytest.raises(ValueError, match="inside the word 'with'"):
        PronounCase(text, "it", ("I", "Bill"), "Bill", pronoun_at=text.index("with") + 1)
    with pytest.raises(ValueError, match="no 'it' at character -1"):
        PronounCase(text, "it", ("I", "Bill"), "Bill", pronoun_at=-1)
    ok = PronounCase(text, "it", ("I", "Bill"), "Bill", pronoun_at=text.index(" it ") + 1)
    assert ok.text[ok.pronoun_at : ok.pronoun_at + 2] == "it"
    (case,) = pronoun_files.read_jsonl(
        [
            json.dumps(
                {
                    "text": text,
                    "pronoun": "it",
                    "candidates": ["I", "Bill"],
                    "answer": "Bill",
                    "pronoun_at": text.index(" it ") + 1,
                }
            )
        ]
    )
    assert case.pronoun_at == text.index(" it ") + 1
