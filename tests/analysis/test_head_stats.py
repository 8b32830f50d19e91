"""Head statistics and labels on hand-built attention."""

import math

import pytest
import torch

from attnviz.analysis import head_stats
from attnviz.result import AttentionResult
from attnviz.tokens import NO_SPAN, TokenAxis

TOKS = ("[CLS]", "a", "b", ",", "c", "[SEP]")
SPECIAL = (True, False, False, False, False, True)


def _result(rows: torch.Tensor, special=(False,) * 6) -> AttentionResult:
    axis = TokenAxis(TOKS, special, tuple(range(6)), (NO_SPAN,) * 6)
    return AttentionResult(rows[None, None].float(), axis, axis, "self", "hand")  # (1, 1, T, T)


def test_uniform_rows_have_entropy_ln_n_and_are_broad():
    s = head_stats.head_stats(_result(torch.full((6, 6), 1 / 6)))
    assert math.isclose(s["entropy"].item(), math.log(6), rel_tol=1e-5)
    assert head_stats.labels(s, head_stats.uniform_entropy(_result(torch.eye(6))), "self") == [["broad"]]


def test_one_hot_rows_have_zero_entropy_and_full_confidence():
    s = head_stats.head_stats(_result(torch.eye(6)))
    assert abs(s["entropy"].item()) < 1e-6 and s["confidence"].item() == 1.0
    assert s["self"].item() == 1.0 and head_stats.labels(
        s, head_stats.uniform_entropy(_result(torch.eye(6))), "self"
    ) == [["self"]]


def test_shifted_identity_has_previous_token_share_one_and_distance_one():
    w = torch.zeros(6, 6)
    w[torch.arange(1, 6), torch.arange(0, 5)] = 1.0  # every token looks at the one before it
    w[0, 1] = 1.0  # the first has none before it: it looks one step ahead, still at distance 1
    s = head_stats.head_stats(_result(w))
    assert s["prev"].item() == 1.0 and s["distance"].item() == 1.0
    assert head_stats.labels(s, head_stats.uniform_entropy(_result(torch.eye(6))), "self") == [["previous-token"]]


def test_special_and_punctuation_shares():
    w = torch.zeros(6, 6)
    w[:, 0], w[:, 5], w[:, 3] = 0.5, 0.25, 0.25
    s = head_stats.head_stats(_result(w, SPECIAL))
    assert math.isclose(s["cls"].item(), 0.5) and math.isclose(s["sep"].item(), 0.25)
    assert math.isclose(s["punct"].item(), 0.25)
    assert head_stats.labels(s, head_stats.uniform_entropy(_result(torch.eye(6))), "self") == [
        ["other"]
    ]  # nothing above 0.5, and far from uniform


def test_the_statistics_shown_leave_out_cls_for_a_decoder_and_sep_for_a_text_without_one():
    every = head_stats.STATS
    assert head_stats.shown_stats(_result(torch.eye(6), SPECIAL)) == every  # BERT's [CLS] ... [SEP]
    no_sep = tuple(k for k in every if k != "sep")
    assert head_stats.shown_stats(_result(torch.eye(6))) == no_sep  # no special token at all
    both = TokenAxis(TOKS, SPECIAL, tuple(range(6)), (NO_SPAN,) * 6)
    causal = AttentionResult(torch.eye(6)[None, None], both, both, "causal", "hand")
    assert head_stats.shown_stats(causal) == tuple(k for k in every if k not in ("cls", "next"))  # [SEP] is there
    bos = TokenAxis(TOKS, (True,) + (False,) * 5, tuple(range(6)), (NO_SPAN,) * 6)  # Gemma 3's <bos>, nothing else
    assert head_stats.shown_stats(AttentionResult(torch.eye(6)[None, None], bos, bos, "causal", "hand")) == tuple(
        k for k in every if k not in ("cls", "sep", "next")
    )
    table = head_stats.table({k: torch.zeros(1, 1) for k in every}, [["other"]], no_sep)
    assert list(table[0]) == ["layer", "head", "label", *no_sep]


def test_cls_head_is_labelled():
    w = torch.zeros(6, 6)
    w[:, 0] = 0.9
    w[:, 2] = 0.1
    s = head_stats.head_stats(_result(w, SPECIAL))
    assert head_stats.labels(s, head_stats.uniform_entropy(_result(torch.eye(6))), "self") == [["[CLS]"]]


def test_a_decoders_head_on_its_start_token_is_a_sink_never_cls():
    """Gemma 3's <bos> is special and first: an encoder's head there is "[CLS]", a decoder's is a "sink"; so is a
    decoder's head on a first token that is not special (SmolLM2's)."""
    w = torch.zeros(6, 6)
    w[:, 0] = 0.95
    w[torch.arange(1, 6), torch.arange(1, 6)] = 0.05
    w[0, 0] = 1.0  # causal: the first query sees only itself
    for special in (SPECIAL, (False,) * 6):
        axis = TokenAxis(TOKS, special, tuple(range(6)), (NO_SPAN,) * 6)
        r = AttentionResult(w[None, None], axis, axis, "causal", "hand")
        s = head_stats.head_stats(r)
        assert head_stats.labels(s, head_stats.uniform_entropy(r), "causal") == [["sink"]], special
        # no [CLS] in a decoder, and its special start token is the first token only, not "another special token"
        end = 0.05 / 4 if special[-1] else 0.0  # the last query's weight on itself, a special end, over 4 rows
        assert s["cls"].item() == 0.0 and math.isclose(s["sep"].item(), end, abs_tol=1e-7), special
    encoder = head_stats.head_stats(_result(w, SPECIAL))
    assert head_stats.labels(encoder, head_stats.uniform_entropy(_result(w)), "self") == [["[CLS]"]]
    assert "sink" in head_stats.LABELS and "[CLS]" not in head_stats.share_labels("causal").values()


def test_a_decoders_forced_rows_count_in_no_statistic_and_sink_mass_does_not_hide_a_heads_kind():
    """The first query sees only itself and the second's previous token is the first: a decoder's statistics leave
    both rows out, so a head giving the start token 60% and the previous token 40% has exactly those shares, and is
    judged previous-token on the 40% it gives the other tokens; one giving the start token 95% and itself 5% is a
    sink (less than SINK_REST is left to judge it by)."""
    n = 8
    axis = TokenAxis(tuple("abcdefgh"), (False,) * n, tuple(range(n)), (NO_SPAN,) * n)

    def stats(w):
        r = AttentionResult(w[None, None], axis, axis, "causal", "hand")
        return head_stats.head_stats(r), head_stats.uniform_entropy(r)

    w = torch.zeros(n, n)
    w[0, 0] = w[1, 0] = 1.0
    w[torch.arange(2, n), 0] = 0.6
    w[torch.arange(2, n), torch.arange(1, n - 1)] = 0.4
    s, uniform = stats(w)
    assert math.isclose(s["first"].item(), 0.6, rel_tol=1e-6) and math.isclose(s["prev"].item(), 0.4, rel_tol=1e-6)
    assert s["self"].item() == 0.0 and math.isclose(
        s["entropy"].item(), -(0.6 * math.log(0.6) + 0.4 * math.log(0.4)), rel_tol=1e-5
    )
    assert head_stats.labels(s, uniform, "causal") == [["previous-token"]]
    assert head_stats.labels(s, uniform, "self") == [["first-token"]]  # an encoder's rule: the raw shares
    w = torch.zeros(n, n)
    w[0, 0] = 1.0
    w[torch.arange(1, n), 0] = 0.95
    w[torch.arange(1, n), torch.arange(1, n)] = 0.05
    s, uniform = stats(w)
    assert math.isclose(s["self"].item(), 0.05, rel_tol=1e-5) and head_stats.labels(s, uniform, "causal") == [["sink"]]


def test_a_learned_sink_s_share_is_a_statistic_and_counts_as_the_sink_s_in_the_labels():
    """gpt-oss: a learned sink logit in each row's softmax takes part of every row, so its weights over the tokens sum
    to the rest. A head whose sink takes 50%, the start token 20% and the previous token 30% is previous-token (30 of
    the 30% the sink and start token leave); one whose sink takes 90% is a sink. Distance and entropy are over the
    tokens: 0.3 x 1 token back, and -sum w log w of the row's own weights."""
    n = 8
    axis = TokenAxis(tuple("abcdefgh"), (False,) * n, tuple(range(n)), (NO_SPAN,) * n)
    w = torch.zeros(n, n)
    w[0, 0], w[1, 0] = 0.5, 0.5  # the forced rows: left out of every statistic, the sink's share too
    w[torch.arange(2, n), 0] = 0.2
    w[torch.arange(2, n), torch.arange(1, n - 1)] = 0.3
    with pytest.raises(ValueError, match="sum to 1"):
        AttentionResult(w[None, None], axis, axis, "causal", "hand")  # without sinks, such rows are refused
    r = AttentionResult(w[None, None], axis, axis, "causal", "hand", sinks=True)
    s, learned = head_stats.head_stats(r), head_stats.sink_share(r)
    assert learned is not None and math.isclose(learned.item(), 0.5, rel_tol=1e-6)
    rows = torch.arange(2, n, dtype=torch.float32)
    assert math.isclose(s["distance"].item(), (0.2 * rows + 0.3).mean().item(), rel_tol=1e-6)
    assert math.isclose(s["entropy"].item(), -(0.2 * math.log(0.2) + 0.3 * math.log(0.3)), rel_tol=1e-5)
    uniform = head_stats.uniform_entropy(r)
    assert head_stats.labels({**s, "sink": learned}, uniform, "causal") == [["previous-token"]]
    assert head_stats.labels(s, uniform, "causal") == [["other"]]  # the learned share left out: 0.3 / 0.8 is not half
    w[torch.arange(2, n), 0], w[torch.arange(2, n), torch.arange(1, n - 1)] = 0.05, 0.05
    r = AttentionResult(w[None, None], axis, axis, "causal", "hand", sinks=True)
    learned = head_stats.sink_share(r)
    assert learned is not None and math.isclose(learned.item(), 0.9, rel_tol=1e-6)
    assert head_stats.labels({**head_stats.head_stats(r), "sink": learned}, uniform, "causal") == [["sink"]]
    assert head_stats.sink_share(_result(torch.eye(6))) is None  # no learned sinks: no such statistic


def test_corpus_average_is_the_mean():
    a = head_stats.head_stats(_result(torch.eye(6)))
    b = head_stats.head_stats(_result(torch.full((6, 6), 1 / 6)))
    avg = head_stats.average([a, b])
    assert math.isclose(avg["self"].item(), (1 + 1 / 6) / 2, rel_tol=1e-6)


def test_punctuation_is_judged_by_the_characters_a_token_covers():
    text = "Hi, you."
    axis = TokenAxis(
        ("[CLS]", "Ġhi", "Ġ,", "you", "##.", "[SEP]"),
        SPECIAL,
        tuple(range(6)),
        (NO_SPAN, (0, 2), (2, 3), (4, 7), (7, 8), NO_SPAN),
        text,
    )
    assert head_stats.punctuation(axis) == [False, False, True, False, True, False]


def test_a_uniform_causal_head_is_labelled_broad():
    w = torch.tril(torch.ones(6, 6))
    w = w / w.sum(-1, keepdim=True)  # query i spreads evenly over the i + 1 keys it can see
    axis = TokenAxis(tuple("abcdef"), (False,) * 6, tuple(range(6)), (NO_SPAN,) * 6)
    r = AttentionResult(w[None, None], axis, axis, "causal", "hand")
    s = head_stats.head_stats(r)
    uniform = head_stats.uniform_entropy(r)
    assert math.isclose(uniform, sum(math.log(i + 1) for i in range(2, 6)) / 4, rel_tol=1e-6)  # past the forced rows
    assert math.isclose(s["entropy"].item(), uniform, rel_tol=1e-5)
    assert head_stats.labels(s, uniform, "causal") == [["broad"]]
    assert head_stats.labels(s, math.log(6), "causal") == [
        ["other"]
    ]  # judged against all six keys, it would never be broad


def test_confidence_leaves_out_the_end_token_by_default_as_voita_et_al():
    w = torch.zeros(6, 6)
    w[:, 5], w[:, 2] = 0.7, 0.3  # every row puts most of its weight on [SEP]
    r = _result(w, SPECIAL)
    assert math.isclose(head_stats.head_stats(r)["confidence"].item(), 0.3, rel_tol=1e-6)
    assert math.isclose(head_stats.head_stats(r, confidence_excludes="none")["confidence"].item(), 0.7, rel_tol=1e-6)
    assert math.isclose(
        head_stats.head_stats(r, confidence_excludes="specials")["confidence"].item(), 0.3, rel_tol=1e-6
    )
    with pytest.raises(ValueError, match="confidence can leave out"):
        head_stats.head_stats(r, confidence_excludes="cls")


def test_the_punctuation_tokens_are_named():
    assert head_stats.punctuation_tokens(_result(torch.eye(6)).source) == [","]


def test_a_learned_sink_s_heads_are_labelled_alike_wherever_heads_are_labelled(tiny_gpt_oss_dir, tmp_path):
    """gpt-oss's heads whose sink logit takes 85% of each row: the Model overview called them "sink" (it adds
    sink_share), while `attnviz stats`, a notebook's view and a class's "head type" answer, from the statistics
    alone, called them "other". Every one of them now labels with the sink's share (head_stats.with_sink)."""
    import json

    from conftest import SENTENCE

    from attnviz.analysis import poll_answers
    from attnviz.cli import main
    from attnviz.engines import registry
    from attnviz.notebook.view import View

    eng = registry.load(str(tiny_gpt_oss_dir), "hf", "cpu")
    r = eng.run(eng.encode(SENTENCE))["causal"]
    uniform = head_stats.uniform_entropy(r)
    want = head_stats.labels(head_stats.with_sink(r.stats(), r), uniform, r.kind)
    assert "sink" in want[0] and want != head_stats.labels(r.stats(), uniform, r.kind)
    for layer, row in enumerate(want):
        for head, label in enumerate(row):
            assert poll_answers.model_answer(r, "head type", {"layer": layer, "head": head}) == (label, label)
    assert main(["stats", SENTENCE, "--model", str(tiny_gpt_oss_dir), "--json", str(tmp_path / "s.json")]) == 0
    told = json.loads((tmp_path / "s.json").read_text())
    assert told["labels"] == want and "sink" in told["stats"]
    grid = View(r).figures()[0]
    assert [list(row) for row in grid.data[0].customdata] == want
