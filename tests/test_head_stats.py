"""Head statistics and labels on hand-built attention."""

import math

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
    assert head_stats.labels(s, 6) == [["broad"]]


def test_one_hot_rows_have_zero_entropy_and_full_confidence():
    s = head_stats.head_stats(_result(torch.eye(6)))
    assert abs(s["entropy"].item()) < 1e-6 and s["confidence"].item() == 1.0
    assert s["self"].item() == 1.0 and head_stats.labels(s, 6) == [["self"]]


def test_shifted_identity_has_previous_token_share_one_and_distance_one():
    w = torch.zeros(6, 6)
    w[torch.arange(1, 6), torch.arange(0, 5)] = 1.0  # every token looks at the one before it
    w[0, 1] = 1.0  # the first has none before it: it looks one step ahead, still at distance 1
    s = head_stats.head_stats(_result(w))
    assert s["prev"].item() == 1.0 and s["distance"].item() == 1.0
    assert head_stats.labels(s, 6) == [["previous-token"]]


def test_special_and_punctuation_shares():
    w = torch.zeros(6, 6)
    w[:, 0], w[:, 5], w[:, 3] = 0.5, 0.25, 0.25
    s = head_stats.head_stats(_result(w, SPECIAL))
    assert math.isclose(s["cls"].item(), 0.5) and math.isclose(s["sep"].item(), 0.25)
    assert math.isclose(s["punct"].item(), 0.25)
    assert head_stats.labels(s, 6) == [["other"]]  # nothing above 0.5, and far from uniform


def test_cls_head_is_labelled():
    w = torch.zeros(6, 6)
    w[:, 0] = 0.9
    w[:, 2] = 0.1
    s = head_stats.head_stats(_result(w, SPECIAL))
    assert head_stats.labels(s, 6) == [["[CLS]"]]


def test_corpus_average_is_the_mean():
    a = head_stats.head_stats(_result(torch.eye(6)))
    b = head_stats.head_stats(_result(torch.full((6, 6), 1 / 6)))
    avg = head_stats.average([a, b])
    assert math.isclose(avg["self"].item(), (1 + 1 / 6) / 2, rel_tol=1e-6)


def test_punctuation_is_judged_by_the_characters_a_token_covers():
    text = "Hi, you."
    axis = TokenAxis(("[CLS]", "Ġhi", "Ġ,", "you", "##.", "[SEP]"), SPECIAL, tuple(range(6)),
                     (NO_SPAN, (0, 2), (2, 3), (4, 7), (7, 8), NO_SPAN), text)  # fmt: skip
    assert head_stats.punctuation(axis) == [False, False, True, False, True, False]
