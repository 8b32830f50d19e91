"""Pronoun scoring on hand-built attention, on the real model, and the benchmark readers."""

import json

import pytest
import torch
from conftest import ROOT

from attnviz.analysis import pronouns
from attnviz.analysis.pronouns import PronounCase
from attnviz.result import AttentionResult
from attnviz.tokens import NO_SPAN, TokenAxis

TEXT = "The cat chased the mouse because it was hungry."
# characters -> one token per word: [CLS] the cat chased the mouse because it was hungry . [SEP]
WORDS = ["The", "cat", "chased", "the", "mouse", "because", "it", "was", "hungry", "."]


def _offsets(text, words):
    out, pos = [NO_SPAN], 0
    for w in words:
        start = text.index(w, pos)
        out.append((start, start + len(w)))
        pos = start + len(w)
    return out + [NO_SPAN]


def _axis(text, spans):
    n = len(spans)
    special = tuple(s == NO_SPAN for s in spans)
    return TokenAxis(tuple(text[a:b] or "[S]" for a, b in spans), special, tuple(range(n)), tuple(spans), text)


def _result(rows: dict[int, dict[int, float]], axis: TokenAxis, heads: int = 1) -> AttentionResult:
    t = len(axis)
    w = torch.full((1, heads, t, t), 0.0)
    w[..., :, 0] = 1.0  # every row on [CLS] unless told otherwise
    for q, keys in rows.items():
        w[..., q, :] = 0.0
        for k, v in keys.items():
            w[..., q, k] = v
    return AttentionResult(w, axis, axis, "self", "hand")


CASE = PronounCase(TEXT, "it", ("cat", "mouse"), "cat")
AXIS = _axis(TEXT, _offsets(TEXT, WORDS))


def test_a_head_attending_from_the_pronoun_to_the_answer_picks_it():
    r = _result({7: {2: 0.7, 5: 0.2, 0: 0.1}}, AXIS)  # "it" (token 7) -> "cat" (2) mostly
    s = pronouns.scores(r, CASE)
    assert torch.allclose(s[0, 0], torch.tensor([0.7, 0.2]))
    assert pronouns.mas_vote(s) == 0


def test_multi_piece_candidates_sum_and_multi_piece_pronouns_average():
    text = "The playwright met the actor because he was famous."
    offs = [
        (0, 0),
        (0, 3),
        (4, 8),
        (8, 14),
        (15, 18),
        (19, 22),
        (23, 28),
        (29, 36),
        (37, 39),
        (40, 43),
        (44, 50),
        (50, 51),
        (0, 0),
    ]  # "play" + "wright" are two pieces
    case = PronounCase(text, "he", ("playwright", "actor"), "playwright")
    r = _result({8: {2: 0.3, 3: 0.3, 6: 0.4}}, _axis(text, offs))
    assert torch.allclose(pronouns.scores(r, case)[0, 0], torch.tensor([0.6, 0.4]))


def test_a_result_of_another_text_is_refused():
    other = PronounCase(TEXT.replace("hungry", "tasty"), "it", ("cat", "mouse"), "mouse")
    with pytest.raises(ValueError, match="not of this case"):
        pronouns.scores(_result({}, AXIS), other)


def test_mas_counts_votes_not_totals():
    s = torch.tensor([[[0.51, 0.49], [0.51, 0.49], [0.0, 1.0]]])  # (1 layer, 3 heads, 2 candidates)
    assert pronouns.mas_vote(s) == 0  # two votes for the first beat one confident vote for the second


def test_per_head_accuracy_and_chance():
    right = pronouns.CaseResult(CASE, torch.tensor([[[0.9, 0.1], [0.2, 0.8]]]), "cat")
    case2 = PronounCase(TEXT.replace("hungry", "tasty"), "it", ("cat", "mouse"), "mouse")
    other = pronouns.CaseResult(case2, torch.tensor([[[0.9, 0.1], [0.1, 0.9]]]), "cat")
    b = pronouns.Benchmark([right, other], [])
    assert b.accuracy == 0.5 and b.chance == 0.5
    assert b.per_head.tolist() == [[0.5, 0.5]]


def test_pronoun_is_found_after_the_first_candidate_as_a_whole_word():
    case = PronounCase("It rained, so the dog and the cat stayed in; itself, it slept.", "it", ("dog", "cat"), "dog")
    (start, end), _ = pronouns.locate(case)
    assert case.text[start:end] == "it" and start > case.text.index("cat")


def test_a_missing_word_is_named():
    with pytest.raises(ValueError, match="'giraffe'"):
        pronouns.locate(PronounCase(TEXT, "it", ("cat", "giraffe"), "cat"))
    with pytest.raises(ValueError, match="not one of the candidates"):
        PronounCase(TEXT, "it", ("cat", "mouse"), "dog")


def test_scores_equal_raw_hugging_face_entries_for_one_piece_words(bundled_hf):
    res = pronouns.score_case(bundled_hf, CASE)
    with torch.no_grad():
        enc = bundled_hf.tokenizer.hf(TEXT, return_tensors="pt")
        w = torch.stack(bundled_hf.model(**enc, output_attentions=True).attentions)[:, 0]  # raw HF, (L, H, T, T)
    toks = bundled_hf.tokenizer.hf.convert_ids_to_tokens(enc["input_ids"][0])
    it, cat, mouse = toks.index("it"), toks.index("cat"), toks.index("mouse")
    assert torch.allclose(res.scores[..., 0], w[:, :, it, cat]) and torch.allclose(
        res.scores[..., 1], w[:, :, it, mouse]
    )


def test_winograd_xml_reader_on_a_fixture():
    cases = pronouns.read_winograd_xml(ROOT / "tests/data/winograd_fixture.xml")
    assert cases[0] == PronounCase(
        "The lamp lit the desk because it was switched on.", "it", ("The lamp", "the desk"), "The lamp"
    )
    assert cases[1].answer == "the tree" and cases[1].text == "The kite hit the tree because it was tall."


def test_jsonl_reader(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"text": TEXT, "pronoun": "it", "candidates": ["cat", "mouse"], "answer": "cat"}) + "\n\n")
    assert pronouns.read_cases(p) == [CASE]
    p.write_text(json.dumps({"text": TEXT, "pronoun": "it"}) + "\n")
    with pytest.raises(ValueError, match="line 1"):
        pronouns.read_cases(p)


def test_the_whole_winograd_collection_parses():
    path = ROOT.parent / "shared/data/winograd/WSCollection.xml"  # shared/ sits beside the checkout, not in it
    if not path.exists():
        pytest.skip(f"the Winograd collection is not at {path}")
    cases = pronouns.read_winograd_xml(path)
    assert len(cases) == 285 and all(c.answer in c.candidates for c in cases)


def test_lesson_has_twenty_minimal_pairs_that_flip_the_answer(bundled_hf):
    lesson = pronouns.LESSON
    assert len(lesson) >= 40
    for a, b in zip(lesson[::2], lesson[1::2], strict=True):
        assert a.candidates == b.candidates and a.answer != b.answer
        assert len(set(a.text.split()) ^ set(b.text.split())) == 2  # one word differs
        pronouns.locate(a), pronouns.locate(b)  # every word is found
    assert lesson[0].text == "The animal didn't cross the street because it was too tired."


def test_loosely_named_candidates_fall_back_to_the_head_noun():
    case = PronounCase(
        "The trophy did not fit into the brown suitcase because it was small.",
        "it",
        ("the trophy", "the suitcase"),
        "the suitcase",
    )
    _, (trophy, suitcase) = pronouns.locate(case)
    assert case.text[slice(*trophy)] == "The trophy" and case.text[slice(*suitcase)] == "suitcase"
