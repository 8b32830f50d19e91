"""Pronoun scoring on hand-built attention and on the real model: the two metrics, the benchmark's statistics."""

import pytest
import torch
from conftest import ROOT

from attnviz import service
from attnviz.analysis import pronoun_cases, pronoun_scores
from attnviz.analysis.pronoun_cases import PronounCase
from attnviz.corpus import pronoun_files
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


def test_vote_reads_from_the_pronoun_and_mas_reads_to_it():
    # "it" (token 7) looks mostly at "cat" (2); "mouse" (5) looks mostly at "it"
    r = _result({7: {2: 0.7, 5: 0.2, 0: 0.1}, 5: {7: 0.9, 0: 0.1}}, AXIS)
    vote = pronoun_scores.scores(r, CASE, "vote")
    mas = pronoun_scores.scores(r, CASE, "mas")
    assert torch.allclose(vote[0, 0], torch.tensor([0.7, 0.2]))  # pronoun -> cat, pronoun -> mouse
    assert torch.allclose(mas[0, 0], torch.tensor([0.0, 0.9]))  # cat -> pronoun, mouse -> pronoun
    assert pronoun_scores.predict(vote, "vote") == (0, False) and pronoun_scores.predict(mas, "mas") == (1, False)


def test_a_candidate_of_several_pieces_takes_the_max_over_its_content_pieces_not_the_sum():
    text = "The playwright met the actor because he was famous."
    offs = [
        NO_SPAN,
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
        NO_SPAN,
    ]  # "play" + "wright" are two pieces
    case = PronounCase(text, "he", ("the playwright", "the actor"), "the playwright")
    r = _result({8: {1: 0.05, 2: 0.3, 3: 0.25, 5: 0.05, 6: 0.35}}, _axis(text, offs))
    vote = pronoun_scores.scores(r, case, "vote")[0, 0]
    assert torch.allclose(vote, torch.tensor([0.3, 0.35]))  # max(0.3, 0.25), not 0.55; "the" (token 1) left out
    assert pronoun_scores.predict(vote[None, None], "vote")[0] == 1  # the sum would have picked the longer candidate


def test_one_character_pieces_are_not_content_when_a_candidate_has_several():
    axis = TokenAxis(
        ("[CLS]", "dog", "'", "s", "x", "[SEP]"),
        (True, False, False, False, False, True),
        (0, 1, 2, 3, 4, 5),
        (NO_SPAN, (0, 3), (3, 4), (4, 5), (6, 7), NO_SPAN),
        "dog's x",
    )
    assert pronoun_cases.content_pieces(axis, (0, 5)) == [1]
    assert pronoun_cases.content_pieces(axis, (6, 7)) == [4]  # a one-piece candidate keeps its piece


def test_the_maximum_attention_score_follows_the_authors_rule():
    s = torch.tensor([[[0.51, 0.49], [0.52, 0.48], [0.0, 0.9]]])  # (1 layer, 3 heads, 2 candidates)
    # heads 1 and 2 give 0.51 and 0.52 to candidate 0; head 3 gives 0.9 to candidate 1
    assert torch.allclose(pronoun_scores.mas_values(s), torch.tensor([1.03, 0.9]) / 1.93)
    assert pronoun_scores.predict(s, "mas") == (0, False)
    assert pronoun_scores.predict(s, "vote") == (0, False)  # two votes beat one
    s2 = torch.tensor([[[0.2, 0.1], [0.0, 0.9]]])
    assert pronoun_scores.predict(s2, "mas")[0] == 1 and pronoun_scores.predict(s2, "vote") == (
        1,
        True,
    )  # one vote each


def test_per_head_accuracy_and_chance():
    right = pronoun_scores.CaseResult(CASE, torch.tensor([[[0.9, 0.1], [0.2, 0.8]]]), "vote", "cat")
    case2 = PronounCase(TEXT.replace("hungry", "tasty"), "it", ("cat", "mouse"), "mouse")
    other = pronoun_scores.CaseResult(case2, torch.tensor([[[0.9, 0.1], [0.1, 0.9]]]), "vote", "cat")
    b = pronoun_scores.Benchmark([right, other], [], "vote")
    assert b.accuracy == 0.5 and b.chance == 0.5
    assert b.per_head.tolist() == [[0.5, 0.5]]


def test_a_causal_model_has_no_maximum_attention_score():
    w = torch.tril(torch.ones(12, 12))
    r = AttentionResult((w / w.sum(-1, keepdim=True))[None, None], AXIS, AXIS, "causal", "hand")
    with pytest.raises(ValueError, match="not defined for a causal model"):
        pronoun_scores.scores(r, CASE, "mas")
    assert pronoun_scores.scores(r, CASE, "vote").shape == (1, 1, 2)


def test_the_best_head_is_scored_on_the_half_it_was_not_picked_on():
    names = [("cat", "mouse"), ("dog", "bird"), ("fox", "hen"), ("owl", "rat")]  # four twin pairs
    texts = [
        "{} chased {} as it was {}.",
        "Yesterday {} met {} and it said {}.",
        "{}, {}: it ran {} times.",
        "Nobody knew why {} fled from {} when it was {}.",
    ]
    cases = [
        PronounCase(t.format(a, b, i), "it", (a, b), a) for t, (a, b) in zip(texts, names, strict=True) for i in (1, 2)
    ]
    # head 0 is right on the first half of pairs only, head 1 on the second half only
    rows = [[[0.9, 0.1], [0.1, 0.9]]] * 2 + [[[0.1, 0.9], [0.9, 0.1]]] * 2
    results = [pronoun_scores.CaseResult(c, torch.tensor([rows[i % 4]]), "vote", "cat") for i, c in enumerate(cases)]
    b = pronoun_scores.Benchmark(results, [], "vote")
    assert b.best_head[2] == 0.5 and b.held_out_best_head()[0] == 0.0  # each half's best head fails on the other
    assert 0.5 <= b.permutation_best_head(runs=200) <= 1.0


def test_a_missing_word_is_named():
    with pytest.raises(ValueError, match="'giraffe'"):
        pronoun_cases.locate(PronounCase(TEXT, "it", ("cat", "giraffe"), "cat"))
    with pytest.raises(ValueError, match="not one of the candidates"):
        PronounCase(TEXT, "it", ("cat", "mouse"), "dog")


@pytest.mark.parametrize("method", ["mas", "vote"])
def test_scores_equal_raw_hugging_face_attention_in_the_method_s_direction(bundled_hf, method):
    res = service.pronoun_case(bundled_hf, CASE, method)
    with torch.no_grad():
        enc = bundled_hf.tokenizer.hf(TEXT, return_tensors="pt")
        w = torch.stack(bundled_hf.model(**enc, output_attentions=True).attentions)[:, 0]  # raw HF, (L, H, T, T)
    toks = bundled_hf.tokenizer.hf.convert_ids_to_tokens(enc["input_ids"][0])
    it, cat, mouse = toks.index("it"), toks.index("cat"), toks.index("mouse")
    if method == "mas":
        expected = torch.stack([w[:, :, cat, it], w[:, :, mouse, it]], -1)
    else:
        expected = torch.stack([w[:, :, it, cat], w[:, :, it, mouse]], -1)
    assert (res.scores - expected).abs().max() < 1e-4


WSC = ROOT.parent / "shared/data/winograd/WSCollection.xml"  # shared/ sits beside the checkout, not in it


@pytest.mark.slow  # the whole WSC273 benchmark on BERT
def test_wsc273_scores_at_least_265_cases_each_at_its_annotated_pronoun(bundled_hf):
    if not WSC.exists():
        pytest.skip(f"the Winograd collection is not at {WSC}")
    cases = pronoun_files.read_winograd_xml(WSC)[:273]
    bench = service.pronoun_benchmark(bundled_hf, cases, "mas")
    assert bench.n == 259, bench.skip_reasons()  # 4 candidates not in the text, 10 on the same tokens
    for r in bench.results:
        assert pronoun_cases.locate(r.case).pronoun[0] == r.case.pronoun_at


def test_lesson_has_twenty_minimal_pairs_that_flip_the_answer(bundled_hf):
    lesson = pronoun_cases.LESSON
    assert len(lesson) >= 40
    for a, b in zip(lesson[::2], lesson[1::2], strict=True):
        assert a.candidates == b.candidates and a.answer != b.answer
        assert len(set(a.text.split()) ^ set(b.text.split())) == 2  # one word differs
        pronoun_cases.locate(a), pronoun_cases.locate(b)  # every word is found
    assert lesson[0].text == "The animal didn't cross the street because it was too tired."


@pytest.mark.slow  # SmolLM2 on a pair
def test_a_causal_model_scores_both_sentences_of_a_lesson_pair_the_same_and_bert_does_not(bundled_hf, smollm2_hf):
    a, b = pronoun_cases.LESSON[:2]
    lesson = pronoun_cases.LESSON
    assert all(pronoun_cases.differ_after_pronoun(x, y) for x, y in zip(lesson[::2], lesson[1::2], strict=True))
    dog = PronounCase(a.text.replace("animal", "dog"), "it", ("dog", "street"), "dog")
    assert not pronoun_cases.differ_after_pronoun(a, dog)  # they differ before the pronoun
    same = pronoun_scores.same_scores
    assert same(*(service.pronoun_case(smollm2_hf, c, "vote").scores for c in (a, b)))
    assert not same(*(service.pronoun_case(bundled_hf, c, "vote").scores for c in (a, b)))


def test_a_benchmark_counts_the_cases_a_decoders_pronoun_cannot_tell_from_their_twin():
    def bench(cases):
        results = [pronoun_scores.CaseResult(c, torch.zeros(1, 1, 2), "vote", c.candidates[0]) for c in cases]
        return pronoun_scores.Benchmark(results, [], "vote")

    lesson = pronoun_cases.LESSON
    assert bench(lesson).undecided_at_pronoun() == len(lesson)  # every pair's word comes after "it"
    a = lesson[0]
    dog = PronounCase(a.text.replace("animal", "dog"), "it", ("dog", "street"), "street")
    assert bench([a, dog]).undecided_at_pronoun() == 0  # twins that differ before the pronoun
    same_answer = PronounCase(lesson[1].text, "it", a.candidates, "animal")
    assert bench([a, same_answer]).undecided_at_pronoun() == 0  # a twin with the same answer


def test_wsc273s_cases_undecided_at_the_pronoun_are_the_figure_docs_quote():
    if not WSC.exists():
        pytest.skip(f"the Winograd collection is not at {WSC}")
    located = []
    for case in pronoun_files.read_winograd_xml(WSC)[:273]:
        try:
            pronoun_cases.locate(case)
        except ValueError:
            continue
        located.append(pronoun_scores.CaseResult(case, torch.zeros(1, 1, 2), "vote", case.candidates[0]))
    assert (len(located), pronoun_scores.Benchmark(located, [], "vote").undecided_at_pronoun()) == (269, 200)
    assert "200 of WSC273's 269 located cases" in (ROOT / "docs/pronouns.md").read_text().replace("\n  ", " ")


def test_candidates_on_the_same_tokens_are_skipped_with_the_reason_not_forced():
    text = "The old house was replaced by a new one because it was falling apart."
    words = [
        "The",
        "old",
        "house",
        "was",
        "replaced",
        "by",
        "a",
        "new",
        "one",
        "because",
        "it",
        "was",
        "falling",
        "apart",
        ".",
    ]
    axis = _axis(text, _offsets(text, words))
    case = PronounCase(text, "it", ("the old house", "the new house"), "the old house")
    where = pronoun_cases.locate(case)  # "the new house" is not in the text: its head noun is old house's `house`
    assert where.how == ("as written", "head noun") and where.candidates[1][0] > where.candidates[0][0]
    r = _result({11: {2: 0.5, 3: 0.5}}, axis)
    with pytest.raises(ValueError, match="land on the same tokens"):
        pronoun_scores.scores(r, case, "vote")
    bench = pronoun_scores.evaluate_with(lambda c: pronoun_scores.score_result(r, c, "vote"), [case], "vote")
    assert bench.n == 0 and 'land on the same tokens ("house")' in bench.skipped[0][1]


def test_a_candidate_inside_another_is_skipped_joe_and_joe_s_uncle():
    text = "Joe's uncle can still beat him at tennis, even though he is 30 years younger."
    words = ["Joe", "'", "s", "uncle", "can", "still", "beat", "him", "at", "tennis", ",", "even", "though", "he"]
    axis = _axis(text, _offsets(text, words)[:-1] + [NO_SPAN])
    case = PronounCase(text, "he", ("Joe", "Joe's uncle"), "Joe")
    with pytest.raises(ValueError, match='"Joe" and "Joe\'s uncle" land on the same tokens'):
        pronoun_scores.scores(_result({}, axis), case, "vote")


def test_ties_inside_heads_are_counted():
    s = torch.tensor([[[0.4, 0.4], [0.1, 0.9], [0.3, 0.3]]])  # heads 1 and 3 tie at the top
    assert pronoun_scores.head_ties(s) == 2
    r = pronoun_scores.CaseResult(CASE, s, "vote", "cat", head_ties=pronoun_scores.head_ties(s))
    assert pronoun_scores.Benchmark([r, r], [], "vote").head_ties == 4


def test_groups_keep_a_schema_and_its_twins_whole_whatever_was_skipped():
    twin = [
        PronounCase(
            "The trophy doesn't fit in the suitcase because it is too " + w + ".",
            "it",
            ("the trophy", "the suitcase"),
            a,
        )
        for w, a in (("big", "the trophy"), ("small", "the suitcase"))
    ]
    triple = [
        PronounCase(f"George gave the tickets to Eric because he {w} the play.", "he", ("George", "Eric"), "Eric")
        for w in ("liked", "loved", "hated")
    ]
    minnow = [
        PronounCase(f"The duck ate the {x} because it was hungry.", "it", (f"the {x}", "the duck"), "the duck")
        for x in ("minnow", "shark")
    ]  # twins that name different candidates: their texts are alike
    cases = [triple[0], *twin, *triple[1:], *minnow]  # not in file order: a group is consecutive only
    assert pronoun_scores.groups(cases) == [0, 1, 1, 2, 2, 3, 3]
    cases = [*twin, *triple, *minnow]  # the triple after a pair: pairing by index would cut it
    assert pronoun_scores.groups(cases) == [0, 0, 1, 1, 1, 2, 2]
    results = [pronoun_scores.CaseResult(c, torch.zeros(1, 1, 2), "vote", c.answer) for c in cases]
    a, b = pronoun_scores.Benchmark(results, [], "vote").halves()
    assert [r.case for r in a] == [*twin, *minnow] and [r.case for r in b] == triple


@pytest.mark.slow  # the whole WSC273 benchmark on BERT
def test_wsc273_groups_are_whole_in_the_halves_and_the_same_token_cases_are_skipped(bundled_hf):
    if not WSC.exists():
        pytest.skip(f"the Winograd collection is not at {WSC}")
    cases = pronoun_files.read_winograd_xml(WSC)[:273]
    numbers = pronoun_scores.groups(cases)
    assert numbers[252] == numbers[253] == numbers[254] != numbers[251]  # George and Eric: WSC273's triple
    bench = service.pronoun_benchmark(bundled_hf, cases, "mas")
    same = [c.candidates for c, why in bench.skipped if "land on the same tokens" in why]
    assert len(same) == 10 and ("The old house", "The new house") in same and ("Joe", "Joe's uncle") in same
    a, b = bench.halves()
    group_of = dict(zip(map(id, cases), numbers, strict=True))
    assert not {group_of[id(r.case)] for r in a} & {group_of[id(r.case)] for r in b}


def test_a_benchmarks_rows_keep_the_cases_order_the_skipped_ones_why_and_no_formula_for_a_spreadsheet():
    """The Benchmark tab's CSV of every case: a researcher's own file comes back in its order, the cases that could
    not be scored in their places with the reason, and a text that starts like a formula as text."""
    cases = [
        CASE,
        PronounCase("=HYPERLINK(1) The cat chased the mouse because it was hungry.", "it", ("cat", "mouse"), "cat"),
        PronounCase(TEXT.replace("hungry", "tasty"), "it", ("cat", "mouse"), "mouse"),
    ]

    def score(case):
        if case.text.startswith("="):
            raise ValueError("candidate not found")
        return pronoun_scores.CaseResult(case, torch.tensor([[[0.9, 0.1]]]), "vote", "cat", tie=case is CASE)

    bench = pronoun_scores.evaluate_with(score, cases, "vote")
    rows = bench.rows()
    assert [r["case"] for r in rows] == [1, 2, 3] and bench.skipped_at == (1,)
    assert [r["correct"] for r in rows] == [True, "", False] and [r["tie"] for r in rows] == [True, "", False]
    assert rows[1]["skipped"] == "candidate not found" and rows[1]["predicted"] == ""
    assert rows[1]["text"] == "'" + cases[1].text  # a spreadsheet shows it, never runs it
    assert rows[2] == {
        "case": 3,
        "text": cases[2].text,
        "pronoun": "it",
        "candidates": "cat | mouse",
        "answer": "mouse",
        "predicted": "cat",
        "correct": False,
        "tie": False,
        "skipped": "",
    }
    by_hand = pronoun_scores.Benchmark(bench.results, bench.skipped, "vote")  # no positions: the skipped ones last
    assert [r["skipped"] for r in by_hand.rows()] == ["", "", "candidate not found"]
