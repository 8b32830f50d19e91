"""Head statistics and labels on hand-built attention."""

import math

import torch

from attnviz.analysis import head_stats
from attnviz.result import AttentionResult

TOKS = ("[CLS]", "a", "b", ",", "c", "[SEP]")


def _result(rows: torch.Tensor) -> AttentionResult:
    return AttentionResult(rows[None, None].float(), TOKS, TOKS, "self", "hand")  # (1, 1, T, T)


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
    s = head_stats.head_stats(_result(w), special=[True, False, False, False, False, True])
    assert math.isclose(s["cls"].item(), 0.5) and math.isclose(s["sep"].item(), 0.25)
    assert math.isclose(s["punct"].item(), 0.25)
    assert head_stats.labels(s, 6) == [["other"]]  # nothing above 0.5, and far from uniform


def test_cls_head_is_labelled():
    w = torch.zeros(6, 6)
    w[:, 0] = 0.9
    w[:, 2] = 0.1
    s = head_stats.head_stats(_result(w), special=[True, False, False, False, False, True])
    assert head_stats.labels(s, 6) == [["[CLS]"]]


def test_corpus_average_is_the_mean():
    a = head_stats.head_stats(_result(torch.eye(6)))
    b = head_stats.head_stats(_result(torch.full((6, 6), 1 / 6)))
    avg = head_stats.average([a, b])
    assert math.isclose(avg["self"].item(), (1 + 1 / 6) / 2, rel_tol=1e-6)
