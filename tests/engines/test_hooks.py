"""Hook points: reading and replacing attention's insides for one call, on both backends, never on the shared model."""

import threading

import pytest
import torch
from conftest import SENTENCE, eager_reference

from attnviz.engines import registry
from attnviz.engines.hooks import POINTS, Hooks, zero_heads

ALL_BUT_FUSED = tuple(p for p in POINTS)


@pytest.fixture(scope="module")
def tiny(tiny_llama_dir):
    hf = registry.load(str(tiny_llama_dir), "hf", "cpu")
    return hf, registry.scratch_engine(hf)


def _logits(engine, enc, hooks):
    """The next-token logits (1, T, V) of one pass with these hooks, on either backend."""
    out = engine.forward(enc, hooks)
    if engine.backend == "hf":
        return out.logits
    with torch.inference_mode():
        return engine.model.logits(out[0])


def _identity(layer, x):
    return x.clone()


@pytest.mark.parametrize("backend", ["hf", "scratch"])
def test_a_no_op_replacement_at_every_point_leaves_the_output_bit_identical(tiny, backend):
    engine = dict(zip(("hf", "scratch"), tiny, strict=True))[backend]
    enc = engine.encode(SENTENCE)
    plain = _logits(engine, enc, Hooks())
    points = [p for p in POINTS if backend == "scratch" or p in ("q", "k", "v", "scores", "pattern", "z")]
    if "lse" in points:
        points.remove("lse")  # read only (a fused pass's)
    replaced = _logits(engine, enc, Hooks(replace={p: _identity for p in points}))
    assert torch.equal(plain, replaced)


@pytest.mark.parametrize("backend", ["hf", "scratch"])
def test_a_zeroed_head_is_exactly_zero_before_w_o_and_changes_the_output_as_transformers_does(
    tiny, tiny_llama_dir, backend
):
    engine = dict(zip(("hf", "scratch"), tiny, strict=True))[backend]
    enc = engine.encode(SENTENCE)
    plain = _logits(engine, enc, Hooks())
    hooks = Hooks(read=("z",), replace={"z": zero_heads({1: [4]})})
    ablated = _logits(engine, enc, hooks)
    z = hooks.get("z", 1)  # (1, H, T, Dh): what W_O read
    assert torch.count_nonzero(z[:, 4]) == 0 and torch.count_nonzero(z[:, 3]) > 0
    assert (ablated - plain).abs().max() > 1e-3  # the head mattered to the output
    # the reference: transformers' own eager model, head 4 of layer 1 zeroed at o_proj's input (B, T, H*Dh)
    reference = eager_reference(tiny_llama_dir)
    dh = reference.config.head_dim

    def zero_o_proj_input(module, args):
        x = args[0].clone()
        x[..., 4 * dh : 5 * dh] = 0.0
        return (x,)

    handle = reference.model.layers[1].self_attn.o_proj.register_forward_pre_hook(zero_o_proj_input)
    try:
        with torch.no_grad():
            expected = reference(input_ids=torch.tensor([list(enc.ids)])).logits
    finally:
        handle.remove()
    assert (ablated - expected).abs().max() < 1e-4


def test_both_backends_read_the_same_queries_keys_and_patterns(tiny):
    hf, ours = tiny
    enc = hf.encode(SENTENCE)
    read = ("q", "k", "v", "pattern", "z")
    a, b = Hooks(read=read), Hooks(read=read)
    hf.forward(enc, a)
    ours.forward(enc, b)
    for name in read:
        assert (a.stacked(name) - b.stacked(name)).abs().max() < 1e-5, name


def test_hooks_of_two_threads_on_one_shared_model_never_mix(tiny):
    _, ours = tiny
    texts = {0: SENTENCE, 1: "A transformer turns every word into a vector."}
    got, errors = {}, []

    def run(i):
        try:
            hooks = Hooks(read=("pattern",), replace={"z": zero_heads({0: [i]})})
            for _ in range(5):
                ours.forward(ours.encode(texts[i]), hooks)
            got[i] = hooks
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(i,)) for i in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i, text in texts.items():
        n = len(ours.encode(text).ids)
        assert got[i].get("pattern", 0).shape[-1] == n  # each call kept its own text's maps
        alone = Hooks(read=("pattern",), replace={"z": zero_heads({0: [i]})})
        ours.forward(ours.encode(text), alone)
        assert torch.equal(alone.get("pattern", 1), got[i].get("pattern", 1))


def test_a_fused_pass_refuses_to_read_the_pattern_and_unknown_points_are_named():
    with pytest.raises(ValueError, match="fused pass forms no scores or pattern"):
        Hooks(read=("pattern",), fused=True)
    with pytest.raises(ValueError, match="unknown hook points"):
        Hooks(read=("attn_weights",))
    with pytest.raises(ValueError, match="lse is read only"):
        Hooks(replace={"lse": lambda layer, x: x}, fused=True)


def test_bert_s_hooks_read_what_its_result_shows(bundled_scratch):
    enc = bundled_scratch.encode(SENTENCE)
    hooks = Hooks(read=("pattern", "value_norms"))
    bundled_scratch.forward(enc, hooks)
    r = bundled_scratch.run(bundled_scratch.encode(SENTENCE))["self"]
    assert torch.equal(hooks.stacked("pattern").float(), r.weights)
    assert torch.equal(hooks.stacked("value_norms").float(), r.value_norms)


def test_gathered_points_go_into_one_tensor_not_a_stacked_copy():
    """A long text's Q and K: each layer's tensor is copied into one (L, ...) tensor as it arrives, and `stacked` is
    that tensor (stacking kept lists doubled the pass's peak memory); `get` still answers each layer."""
    hooks = Hooks(read=("q",), n_layers=3, gather=True)
    layers = [torch.randn(1, 2, 5, 4) for _ in range(3)]
    for i, x in enumerate(layers):
        assert hooks.point("q", i, x) is x  # the model goes on with its own tensor
    out = hooks.stacked("q")
    assert out.shape == (3, 2, 5, 4) and torch.equal(out, torch.cat(layers))
    assert out.data_ptr() == hooks.gathered["q"].data_ptr()  # the gathered tensor itself
    assert torch.equal(hooks.get("q", 1), layers[1])
    plain = Hooks(read=("q",), n_layers=3)
    for i, x in enumerate(layers):
        plain.point("q", i, x)
    assert torch.equal(plain.stacked("q"), out) and not plain.gathered
