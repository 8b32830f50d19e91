"""The from-scratch engines' shared part: both take over their Hugging Face engine the same way, and one eager pass's
result holds the Hugging Face backend's weights and, beside them, each head's value norms (which it has not)."""

import pytest
import torch

from attnviz.engines import registry
from attnviz.engines.bert import ScratchBertEngine
from attnviz.engines.llama import ScratchLlamaEngine
from attnviz.engines.rebuilt import RebuiltEngine

TEXT = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module", params=["bert", "llama"])
def pair(request, tiny_llama_dir):
    folder = "default" if request.param == "bert" else str(tiny_llama_dir)
    hf = registry.load(folder, "hf", "cpu")
    return hf, registry.scratch_engine(hf)


def test_a_rebuilt_engine_takes_over_its_hugging_face_engine(pair):
    hf, ours = pair
    assert isinstance(ours, RebuiltEngine) and isinstance(ours, ScratchBertEngine | ScratchLlamaEngine)
    assert ours.backend == "scratch" and ours.tokenizer is hf.tokenizer  # one tokenizer, one lock
    assert (ours.name, ours.device, ours.max_tokens) == (hf.name, hf.device, hf.max_tokens)
    assert (ours.n_layers, ours.n_heads) == (hf.n_layers, hf.n_heads)
    assert ours.encode(TEXT).ids == hf.encode(TEXT).ids


def test_one_eager_pass_gives_hugging_faces_weights_and_each_heads_value_norms(pair):
    hf, ours = pair
    kind = ours.kinds[0]
    a, b = hf.run(hf.encode(TEXT))[kind], ours.run(ours.encode(TEXT))[kind]
    t = len(ours.encode(TEXT).ids)
    assert b.weights.shape == (ours.n_layers, ours.n_heads, t, t) and b.value_norms.shape == (
        ours.n_layers,
        ours.n_heads,
        t,
    )
    assert torch.allclose(b.weights.sum(-1), torch.ones(ours.n_layers, ours.n_heads, t), atol=1e-5)
    assert (a.weights - b.weights).abs().max() < 1e-5
    assert (b.value_norms >= 0).all() and b.value_norms.isfinite().all()
    if kind == "causal":  # a decoder on attnviz's attention carries them on the hf backend too: the same numbers
        assert a.value_norms is not None and torch.allclose(a.value_norms, b.value_norms, rtol=1e-4, atol=1e-5)
    else:  # BERT on transformers' own attention: the scratch backend alone
        assert a.value_norms is None
    assert b.target_tokens == a.target_tokens and b.device == "cpu"


def test_the_rebuilt_engines_refuse_another_family(tiny_llama_dir):
    bert = registry.load("default", "hf", "cpu")
    with pytest.raises(ValueError, match="rebuilds Llama"):
        ScratchLlamaEngine(bert)
    with pytest.raises(ValueError, match="rebuilds BERT"):
        ScratchBertEngine(registry.load(str(tiny_llama_dir), "hf", "cpu"))
