"""View options on hand-built and real results: hiding specials, merging word pieces, read from the token axes."""

import pytest
import torch

from attnviz.analysis import view_options
from attnviz.result import AttentionResult
from attnviz.tokens import NO_SPAN, TokenAxis


def _axis(tokens, special=None, words=None):
    n = len(tokens)
    return TokenAxis(tokens, special or (False,) * n, words or tuple(range(n)), (NO_SPAN,) * n)


def _result(weights, axis, kind="self"):
    w = torch.tensor(weights, dtype=torch.float32)[None, None]  # (1, 1, T, T)
    return AttentionResult(w, axis, axis, kind, "hand")


def test_hiding_renormalises_rows_and_drops_the_special_tokens():
    axis = _axis(("[CLS]", "a", "b"), special=(True, False, False))
    r = _result([[0.5, 0.25, 0.25], [0.5, 0.3, 0.2], [0.2, 0.2, 0.6]], axis)
    out = view_options.without_specials(r)
    assert out.target_tokens == ("a", "b")
    assert torch.allclose(out.weights[0, 0], torch.tensor([[0.6, 0.4], [0.25, 0.75]]))


def test_a_token_that_looks_like_a_special_token_but_is_not_marked_stays():
    r = _result(torch.full((2, 2), 0.5).tolist(), _axis(("[CLS]", "x")))  # typed as text: not special
    assert view_options.without_specials(r).target_tokens == ("[CLS]", "x")


def test_merging_sums_keys_and_averages_queries_by_the_axis_words():
    axis = _axis(("play", "##ing", "x"), words=(0, 0, 1))
    r = _result([[0.1, 0.3, 0.6], [0.5, 0.2, 0.3], [0.2, 0.2, 0.6]], axis)
    out = view_options.merge(r)
    assert out.target_tokens == ("play##ing", "x")  # no text to name the word by: its tokens joined
    expected = torch.tensor([[(0.4 + 0.7) / 2, (0.6 + 0.3) / 2], [0.4, 0.6]])
    assert torch.allclose(out.weights[0, 0], expected)


def test_merged_words_are_named_by_their_characters_in_the_text():
    text = "playing x"
    axis = TokenAxis(("play", "##ing", "x"), (False,) * 3, (0, 0, 1), ((0, 4), (4, 7), (8, 9)), text)
    r = _result(torch.full((3, 3), 1 / 3).tolist(), axis)
    assert view_options.merge(r).target_tokens == ("playing", "x")


def test_causal_stays_causal_after_merging_and_hiding():
    t = 5
    w = torch.tril(torch.rand(t, t)) + torch.eye(t)
    w = (w / w.sum(-1, keepdim=True))[None, None]
    axis = _axis(("[CLS]", "play", "##ing", "now", "[SEP]"), (True, False, False, False, True), (0, 1, 1, 2, 3))
    out = view_options.apply(AttentionResult(w, axis, axis, "causal", "hand"), hide_special=True, merge_words=True)
    assert out.target_tokens == ("play##ing", "now") and out.kind == "causal"


def test_a_sliding_window_is_kept_where_distances_stay_and_dropped_where_they_do_not():
    """A window counts tokens back from the query: setting the first token aside keeps every distance, so the maps
    still mark it; setting a middle token aside, or merging pieces into words, does not, and nothing is marked."""
    t, window = 6, 3
    i, j = torch.arange(t)[:, None], torch.arange(t)[None, :]
    w = ((j <= i) & (i - j < window)).float()
    w = (w / w.sum(-1, keepdim=True))[None, None]  # (1, 1, 6, 6): each query sees itself and the 2 before
    axis = _axis(("<s>", "a", "b", "c", "d", "e"), (True, False, False, True, False, False), (0, 1, 1, 2, 3, 4))
    r = AttentionResult(w, axis, axis, "causal", "hand", windows=(window,))
    assert r.layer_window(0) == 3
    assert view_options.without_first(r).windows == (3,)
    assert view_options.without_specials(r).windows == ()  # "c" in the middle went too: distances changed
    assert view_options.merge(r).windows == ()
    with pytest.raises(ValueError, match="1 sliding windows for 2 layers"):
        AttentionResult(w.expand(2, 1, t, t).contiguous(), axis, axis, "causal", "hand", windows=(window,))


def test_hiding_everything_is_a_clear_error():
    r = _result([[1.0]], _axis(("[CLS]",), special=(True,)))
    with pytest.raises(ValueError, match="Nothing is left"):
        view_options.without_specials(r)


def test_real_bert_view_options(bundled_hf):
    r = bundled_hf.run(bundled_hf.encode("Unbelievably, the playwright was playing."))["self"]
    both = view_options.apply(r, hide_special=True, merge_words=True)
    assert "[CLS]" not in both.target_tokens and "Unbelievably" in both.target_tokens
    assert both.target_tokens == ("Unbelievably", ",", "the", "playwright", "was", "playing", ".")
    assert torch.allclose(both.weights.sum(-1), torch.ones(both.weights.shape[:3]), atol=1e-5)
    # the merged map is the sum over a word's key pieces and the mean over its query pieces, read by hand
    pieces = [i for i, w in enumerate(r.target.words) if w == r.target.words[1]]  # "un", "##bel", ... of word 1
    assert len(pieces) > 1
    merged = view_options.merge(r)
    expected = r.weights[:, :, pieces][:, :, :, pieces].sum(-1).mean(-1)  # (L, H): word 1 reading word 1
    assert torch.allclose(merged.weights[:, :, 1, 1], expected, atol=1e-6)
