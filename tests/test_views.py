"""View options on hand-built and real results: hiding specials, merging word pieces."""

import pytest
import torch

from attnviz.analysis import views
from attnviz.result import AttentionResult


def _result(weights, tokens, kind="self"):
    w = torch.tensor(weights, dtype=torch.float32)[None, None]  # (1, 1, T, T)
    return AttentionResult(w, tokens, tokens, kind, "hand")


def test_wordpiece_groups_and_specials():
    ax = views.token_axis(["[CLS]", "play", "##ing", "fast", "[SEP]"], {"[CLS]", "[SEP]"})
    assert ax.words == (0, 1, 1, 2, 3)
    assert ax.special == (True, False, False, False, True)


def test_byte_level_and_sentencepiece_groups():
    assert views.token_axis(["Ġthe", "Ġplay", "ing", "Ġcat"]).words == (0, 1, 1, 2)
    assert views.token_axis(["▁the", "▁play", "ing", "</s>"]).words == (0, 1, 1, 2)
    assert views.token_axis(["<s>", "x"]).special == (True, False)


def test_hiding_renormalises_rows():
    toks = ("[CLS]", "a", "b")
    r = _result([[0.5, 0.25, 0.25], [0.5, 0.3, 0.2], [0.2, 0.2, 0.6]], toks)
    out = views.hide(r, [False, True, True], [False, True, True])
    assert out.target_tokens == ("a", "b")
    assert torch.allclose(out.weights[0, 0], torch.tensor([[0.6, 0.4], [0.25, 0.75]]))


def test_merging_sums_keys_and_averages_queries():
    toks = ("play", "##ing", "x")
    r = _result([[0.1, 0.3, 0.6], [0.5, 0.2, 0.3], [0.2, 0.2, 0.6]], toks)
    out = views.merge(r, [0, 0, 1], [0, 0, 1])
    assert out.target_tokens == ("playing", "x")
    expected = torch.tensor([[(0.4 + 0.7) / 2, (0.6 + 0.3) / 2], [0.4, 0.6]])
    assert torch.allclose(out.weights[0, 0], expected)


def test_causal_stays_causal_after_merging_and_hiding():
    t = 5
    w = torch.tril(torch.rand(t, t)) + torch.eye(t)
    w = (w / w.sum(-1, keepdim=True))[None, None]
    toks = ("[CLS]", "play", "##ing", "now", "[SEP]")
    r = AttentionResult(w, toks, toks, "causal", "hand")
    ax = views.token_axis(toks)
    out = views.prepare(r, ax, ax, hide_special=True, merge_words=True)
    assert out.target_tokens == ("playing", "now")
    assert torch.count_nonzero(torch.triu(out.weights, 1)) == 0


def test_hiding_everything_is_a_clear_error():
    r = _result([[1.0]], ("[CLS]",))
    with pytest.raises(ValueError, match="Nothing is left"):
        views.hide(r, [False], [False])


def test_real_bert_view_options(bundled_hf, bundled_tokenizer):
    r = bundled_hf.run("Unbelievably, the playwright was playing.")["self"]
    ax = views.token_axis(r.target_tokens, set(bundled_tokenizer.all_special_tokens))
    both = views.prepare(r, ax, ax, hide_special=True, merge_words=True)
    assert "[CLS]" not in both.target_tokens and "unbelievably" in both.target_tokens
    assert len(both.target_tokens) < len(r.target_tokens) - 2
    assert torch.allclose(both.weights.sum(-1), torch.ones(both.weights.shape[:3]), atol=1e-5)
