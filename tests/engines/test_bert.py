"""The scratch BERT equals Hugging Face eager attention, layer by layer."""

import pytest
import torch
from conftest import SENTENCE
from transformers import AutoModel

from attnviz.engines import bert

TOL = 1e-5


def _hf_attentions(hf_model, ids, mask=None):
    with torch.no_grad():
        return hf_model(input_ids=ids, attention_mask=mask, output_attentions=True).attentions


def _max_diff(ours, theirs):
    assert len(ours) == len(theirs) > 0
    return max((a - b).abs().max().item() for a, b in zip(ours, theirs, strict=True))


@pytest.mark.parametrize("seed", [0, 1])
def test_tiny_random_bert_matches_hf(tiny_bert_dir, seed):
    hf = AutoModel.from_pretrained(tiny_bert_dir, attn_implementation="eager").eval()
    ours = bert.from_hf(hf)
    torch.manual_seed(seed)
    ids = torch.randint(0, hf.config.vocab_size, (3, 20))
    hidden, weights = ours(ids)
    assert _max_diff(weights, _hf_attentions(hf, ids)) < TOL
    with torch.no_grad():
        ref_hidden = hf(input_ids=ids).last_hidden_state
    assert (hidden - ref_hidden).abs().max() < 1e-4


def test_padding_mask_matches_hf(tiny_bert_dir):
    hf = AutoModel.from_pretrained(tiny_bert_dir, attn_implementation="eager").eval()
    ours = bert.from_hf(hf)
    ids = torch.randint(0, 1000, (2, 9))
    mask = torch.tensor([[1] * 9, [1] * 6 + [0] * 3])
    _, weights = ours(ids, mask)
    assert _max_diff(weights, _hf_attentions(hf, ids, mask)) < TOL


def test_bundled_bert_matches_hf(bundled_hf, bundled_scratch):
    ours = bundled_scratch.run(bundled_scratch.encode(SENTENCE))["self"]
    ref = bundled_hf.run(bundled_hf.encode(SENTENCE))["self"]
    assert ours.shape == ref.shape == (6, 12, 16, 16)
    assert ours.target_tokens == ref.target_tokens
    diff = (ours.weights - ref.weights).abs().max().item()
    assert diff < TOL, diff


def test_causal_what_if_hides_the_future_in_the_raw_weights(bundled_scratch):
    ids = torch.tensor([bundled_scratch.encode(SENTENCE).ids])
    with torch.no_grad():
        _, raw = bundled_scratch.model(ids, causal=True)  # before any AttentionResult checks them
    for w in raw:
        assert torch.count_nonzero(torch.triu(w, diagonal=1)) == 0
        assert torch.allclose(w.sum(-1), torch.ones(w.shape[:3]), atol=1e-5)


def test_causal_what_if_keeps_the_last_row_of_the_first_layer(bundled_scratch):
    bi = bundled_scratch.run(bundled_scratch.encode(SENTENCE))["self"].weights
    ca = bundled_scratch.run_causal(bundled_scratch.encode(SENTENCE))["causal"].weights
    assert (ca[0, :, -1] - bi[0, :, -1]).abs().max() < TOL  # the last token sees every token either way
    assert (ca[0, :, 1] - bi[0, :, 1]).abs().max() > 0.01  # an earlier one does not


def test_name_table_rejects_unknown_weights():
    with pytest.raises(KeyError, match="NAME_TABLE"):
        bert.translate_state_dict({"encoder.layer.0.mystery.weight": torch.zeros(1)})


def test_name_table_accepts_a_bert_prefix_and_skips_the_pooler():
    out = bert.translate_state_dict(
        {"bert.encoder.layer.3.attention.self.query.weight": torch.zeros(1), "bert.pooler.dense.weight": torch.zeros(1)}
    )
    assert list(out) == ["layers.3.attention.w_q.weight"]


def test_step_by_step_view_reproduces_the_forward_pass_in_every_layer(bundled_scratch):
    ids = torch.tensor([bundled_scratch.encode(SENTENCE).ids])
    for causal in (False, True):
        _, weights = bundled_scratch.model(ids, causal=causal)
        for layer in (0, 3, 5):
            _, steps = bundled_scratch.steps(SENTENCE, layer, causal=causal)
            assert torch.allclose(steps.weights, weights[layer], atol=1e-6)
