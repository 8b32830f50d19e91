"""Knocking heads out: zeroed or mean outputs before W_O, the loss per token, the importance grid."""

import pytest
import torch
from conftest import SENTENCE, eager_reference

from attnviz.engines import registry
from attnviz.engines.hooks import Hooks
from attnviz.interventions import ablation
from attnviz.interventions.runs import parse_heads, per_token_loss


@pytest.fixture(scope="module")
def tiny(tiny_llama_dir):
    hf = registry.load(str(tiny_llama_dir), "hf", "cpu")
    return hf, registry.scratch_engine(hf)


def test_zero_ablation_equals_transformers_eager_with_o_proj_s_input_zeroed(tiny, tiny_llama_dir):
    hf, ours = tiny
    reference = eager_reference(tiny_llama_dir)
    ids = list(hf.encode(SENTENCE).ids)
    dh = reference.config.head_dim

    def zero(module, args):
        x = args[0].clone()
        x[..., 2 * dh : 3 * dh] = 0.0
        return (x,)

    handle = reference.model.layers[0].self_attn.o_proj.register_forward_pre_hook(zero)
    try:
        with torch.no_grad():
            expected = per_token_loss(reference(input_ids=torch.tensor([ids])).logits[0], ids)
    finally:
        handle.remove()
    for engine in (hf, ours):
        got = ablation.ablate(engine, SENTENCE, {0: [2]}, "zero")
        assert (got.loss_after - expected).abs().max() < 1e-4
        assert (got.loss_after - got.loss_before).abs().max() > 1e-5  # the head mattered


def test_mean_ablation_gives_each_position_the_head_s_mean_over_the_reference_texts(tiny):
    _, ours = tiny
    means = ablation.reference_means(ours, [1])
    sums, count = torch.zeros_like(means[1]), 0
    for text in ablation.REFERENCE:  # every position of every reference text, one clean pass each
        hooks = Hooks(read=("z",), layers={1})
        ref_ids = list(ours.encode(text).ids)
        ours.logits(ref_ids, hooks)
        sums += hooks.get("z", 1)[0].sum(1)
        count += len(ref_ids)
    assert torch.allclose(means[1], sums / count, atol=1e-6)
    ids = list(ours.encode(SENTENCE).ids)
    hooks = Hooks(read=("z",), replace={"z": ablation.knock_out({1: [4]}, "mean", means)})
    ours.logits(ids, hooks)
    z = hooks.get("z", 1)[0]  # (H, T, Dh)
    assert torch.allclose(z[4], means[1][4][None].expand_as(z[4]))
    assert not torch.allclose(z[3], means[1][3][None].expand_as(z[3]))


def test_the_scored_text_is_left_out_of_mean_ablation_s_reference(tiny):
    _, ours = tiny
    assert SENTENCE in ablation.REFERENCE  # the lesson's sentence is one of the built-in corpus's
    assert SENTENCE not in ablation.reference_texts(SENTENCE)
    assert len(ablation.reference_texts(SENTENCE)) == len(ablation.REFERENCE) - 1
    assert ablation.reference_texts("a text of one's own") == ablation.REFERENCE


@pytest.mark.parametrize("engine_index", [0, 1])
def test_mean_ablation_never_carries_a_later_token_into_an_earlier_prediction(tiny, engine_index):
    """Two texts that share their first tokens: with a head mean-ablated, the loss on the shared part is the same
    (a mean over the scored text's own positions would bring what the later tokens wrote into it)."""
    engine = tiny[engine_index]
    a = "The animal didn't cross the street because it was too tired to walk any further today"
    b = "The animal didn't cross the street because the road was wide and full of cars"
    ids_a, ids_b = list(engine.encode(a).ids), list(engine.encode(b).ids)
    shared = next(i for i, (x, y) in enumerate(zip(ids_a, ids_b, strict=False)) if x != y)
    assert shared >= 5
    heads = {0: [1, 3], 1: [2]}
    got_a, got_b = (ablation.ablate(engine, t, heads, "mean") for t in (a, b))
    # loss index i predicts token i + 1 from tokens 0..i: the indices below shared - 1 see only shared tokens
    assert (got_a.loss_after[: shared - 1] - got_b.loss_after[: shared - 1]).abs().max() < 1e-5
    assert (got_a.loss_after - got_a.loss_before).abs().max() > 1e-5  # the heads mattered
    grid_a, _ = ablation.importance(engine, a[: len(a)], "mean")
    assert torch.isfinite(grid_a).all()


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_the_importance_grid_equals_one_ablation_per_head(tiny, mode):
    hf, ours = tiny
    grid, clean = ablation.importance(hf, SENTENCE, mode)
    assert grid.shape == (2, 6)
    for layer, head in ((0, 1), (1, 5)):
        one = ablation.ablate(hf, SENTENCE, {layer: [head]}, mode)
        assert grid[layer, head].item() == pytest.approx((one.loss_after - one.loss_before).mean().item(), abs=1e-4)
    assert (ablation.importance(ours, SENTENCE, mode)[0] - grid).abs().max() < 1e-4  # both backends


def test_heads_are_named_layer_dot_head_and_bert_is_told_it_cannot(bundled_hf):
    assert parse_heads("3.1, 10.4,3.2", 30, 9) == {3: [1, 2], 10: [4]}
    with pytest.raises(ValueError, match="LAYER.HEAD"):
        parse_heads("3-1", 30, 9)
    with pytest.raises(ValueError, match="layers 0-29"):
        parse_heads("30.0", 30, 9)
    with pytest.raises(ValueError, match="decoder"):
        ablation.ablate(bundled_hf, SENTENCE, {0: [0]})


def test_mean_ablation_without_reference_means_is_refused_when_asked_not_midway():
    """knock_out's "mean" replacement reads each head's reference mean: without them it says so at once (it raised
    a TypeError inside the model's pass)."""
    from attnviz.interventions.ablation import knock_out

    with pytest.raises(ValueError, match="reference means"):
        knock_out({0: [1]}, "mean")
    assert knock_out({0: [1]}, "zero")(1, torch.ones(1, 2, 3, 4)).sum() == 24  # another layer: untouched
