"""Attention rollout and flow."""

import pytest
import torch

from attnviz.analysis import rollout
from attnviz.result import AttentionResult


def _result(per_layer: list[torch.Tensor], heads: int = 1) -> AttentionResult:
    w = torch.stack([m.expand(heads, *m.shape) for m in per_layer]).float()  # (L, H, T, T)
    toks = tuple(f"t{i}" for i in range(w.shape[-1]))
    return AttentionResult(w.contiguous(), toks, toks, "self", "hand")


def test_identity_attention_rolls_out_to_the_identity():
    r = _result([torch.eye(4)] * 3)
    assert torch.allclose(rollout.rollout(r), torch.eye(4).expand(3, 4, 4))


def test_rows_sum_to_one_and_the_first_layer_is_half_attention_half_identity():
    torch.manual_seed(0)
    layers = [torch.rand(5, 5).softmax(-1) for _ in range(3)]
    r = _result(layers, heads=2)
    out = rollout.rollout(r)
    assert torch.allclose(out.sum(-1), torch.ones(3, 5), atol=1e-6)
    assert torch.allclose(out[0], 0.5 * layers[0] + 0.5 * torch.eye(5), atol=1e-6)


def test_two_layers_three_tokens_by_hand():
    a1 = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    a2 = torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.5, 0.5, 0.0]])
    out = rollout.rollout(_result([a1, a2]))
    r1 = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])  # 0.5 A1 + 0.5 I
    r2_layer = torch.tensor([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.25, 0.25, 0.5]])  # 0.5 A2 + 0.5 I
    expected = torch.tensor([[0.75, 0.25, 0.0], [0.5, 0.5, 0.0], [0.375, 0.125, 0.5]])
    assert torch.allclose(r2_layer @ r1, expected)
    assert torch.allclose(out[1], expected, atol=1e-6)


def test_flow_equals_rollout_at_the_first_layer():
    torch.manual_seed(1)
    r = _result([torch.rand(4, 4).softmax(-1) for _ in range(2)])
    assert torch.allclose(rollout.flow(r, upto=0), rollout.rollout(r)[0], atol=1e-5)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_flow_rows_sum_to_one_on_real_bert(bundled_hf):
    r = bundled_hf.run(bundled_hf.encode("The cat sat on the mat."))["self"]
    f = rollout.flow(r)
    assert f.shape == (9, 9) and torch.allclose(f.sum(-1), torch.ones(9), atol=1e-5)


def test_flow_refuses_long_inputs_with_a_message():
    r = _result([torch.eye(40)])
    try:
        rollout.flow(r)
    except ValueError as err:
        assert "rollout" in str(err)
    else:
        raise AssertionError("flow accepted 40 tokens")


def test_the_first_token_share_is_the_mean_of_the_first_column():
    rolled = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.9, 0.05, 0.05]])
    assert rollout.first_token_share(rolled) == pytest.approx(0.8)
