import pytest
import torch

from attnviz.result import AttentionResult, Results


def _uniform(l=2, h=3, tq=4, tk=4):
    return torch.full((l, h, tq, tk), 1.0 / tk)


def _causal(t=4):
    w = torch.tril(torch.ones(t, t))
    return (w / w.sum(-1, keepdim=True)).expand(2, 3, t, t).contiguous()


TOKS = ("a", "b", "c", "d")


def test_valid_self_result_exposes_its_shape():
    r = AttentionResult(_uniform(), TOKS, TOKS, "self", "m")
    assert (r.n_layers, r.n_heads, r.shape) == (2, 3, (2, 3, 4, 4))
    assert torch.equal(r.head(1, 2), r.weights[1, 2])


def test_rows_that_do_not_sum_to_one_are_rejected():
    with pytest.raises(ValueError, match="sum to 1"):
        AttentionResult(_uniform() * 1.1, TOKS, TOKS, "self", "m")


def test_token_count_must_match_weights():
    with pytest.raises(ValueError, match="query rows"):
        AttentionResult(_uniform(), TOKS[:3], TOKS[:3], "self", "m")


def test_self_attention_needs_equal_token_tuples():
    with pytest.raises(ValueError, match="same tokens"):
        AttentionResult(_uniform(), TOKS, ("a", "b", "c", "x"), "self", "m")


def test_causal_result_rejects_weight_above_the_diagonal():
    with pytest.raises(ValueError, match="above the diagonal"):
        AttentionResult(_uniform(), TOKS, TOKS, "causal", "m")
    AttentionResult(_causal(), TOKS, TOKS, "causal", "m")


def test_cross_result_allows_different_lengths():
    r = AttentionResult(_uniform(tq=2, tk=5), ("x", "y"), tuple("abcde"), "cross", "m")
    assert r.shape == (2, 3, 2, 5)


def test_duplicate_tokens_are_allowed_and_kept():
    toks = ("the", "cat", "the", "dog")
    assert AttentionResult(_uniform(), toks, toks, "self", "m").target_tokens == toks


@pytest.mark.parametrize(
    "bad", [torch.zeros(4, 4), _uniform().double(), _uniform().requires_grad_(), _uniform() * float("nan")]
)
def test_malformed_weights_are_rejected(bad):
    with pytest.raises((ValueError, TypeError)):
        AttentionResult(bad, TOKS, TOKS, "self", "m")


def test_unknown_kind_is_rejected():
    with pytest.raises(ValueError, match="kind"):
        AttentionResult(_uniform(), TOKS, TOKS, "sideways", "m")  # type: ignore[arg-type]


def test_a_result_made_from_another_computes_its_own_statistics():
    import dataclasses

    from attnviz.result import AttentionResult

    w = torch.softmax(torch.randn(1, 2, 4, 4), -1)
    first = AttentionResult(w, ("a", "b", "c", "d"), ("a", "b", "c", "d"), "self", "m")
    before = first.stats()["entropy"].clone()
    flat = dataclasses.replace(first, weights=torch.full((1, 2, 4, 4), 0.25))  # what view options do
    assert torch.allclose(flat.stats()["entropy"], torch.full((1, 2), float(torch.log(torch.tensor(4.0)))))
    assert torch.equal(first.stats()["entropy"], before)


def test_eager_hands_on_a_kind_of_a_run_that_held_every_weight_and_refuses_a_long_ones():
    r = AttentionResult(_uniform(), TOKS, TOKS, "self", "m")
    assert Results({"self": r}).eager() is r and Results({"self": r}).eager("self") is r
    with pytest.raises(ValueError, match="this text is long"):
        Results({"self": r}, lazy=True).eager()


def test_a_share_is_a_whole_percentage_but_never_all_or_none_of_it_by_rounding():
    from attnviz.result import percent

    assert [percent(x) for x in (0.65, 1.0, 0.0, 0.5049)] == ["65%", "100%", "0%", "50%"]
    assert [percent(x) for x in (0.996, 0.004, 0.9996, 0.0004)] == ["99.6%", "0.4%", "over 99.9%", "under 0.1%"]
