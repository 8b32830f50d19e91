"""The Llama decoder rebuilt on the scratch engine: tiny random models, then the real SmolLM2."""

import pytest
import torch
from conftest import SENTENCE, eager_reference
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from attnviz.engines import llama, registry
from attnviz.engines.base import Engine, GeneratingEngine, SteppingEngine

TEXTS = [
    SENTENCE,
    "The trophy doesn't fit into the brown suitcase because it is too large.",
    "In 1969, two astronauts walked on the Moon while a third orbited above them.",
    "Attention is all you need, they said; nobody agreed on what attention was.",
]


def _raw(reference, ids):
    """The Hugging Face model's own eager weights and logits, nothing of ours on the way."""
    with torch.no_grad():
        out = reference(input_ids=torch.tensor([ids]), output_attentions=True)
    return torch.stack([w[0] for w in out.attentions]), out.logits[0]


@pytest.fixture(scope="module")
def tiny(tiny_llama_dir):
    hf = registry.load(str(tiny_llama_dir), "hf", "cpu")
    return hf, registry.scratch_engine(hf)


def test_the_rms_norm_matches_transformers():
    torch.manual_seed(0)
    ref = LlamaRMSNorm(16, eps=1e-5)
    ref.weight.data.normal_()
    ours = llama.RMSNorm(16, 1e-5)
    ours.weight.data.copy_(ref.weight.data)
    x = torch.randn(3, 5, 16) * 7
    assert (ours(x) - ref(x)).abs().max() < 1e-6


def test_tiny_random_llama_matches_hugging_face_weights_and_logits(tiny, tiny_llama_dir):
    hf, ours = tiny
    reference = eager_reference(tiny_llama_dir)
    for text in TEXTS[:2]:
        ids = list(hf.encode(text).ids)
        weights, logits = _raw(reference, ids)
        r = ours.run(ours.encode(text))["causal"]
        assert (r.weights - weights).abs().max() < 1e-5
        # the hf backend: transformers' layers, attnviz's attend
        assert (hf.run(hf.encode(text))["causal"].weights - weights).abs().max() < 1e-5
        hidden, _ = ours.model(torch.tensor([ids]))
        assert (ours.model.logits(hidden)[0] - logits).abs().max() < 1e-4


def test_the_decoder_hides_the_future_in_its_raw_weights(tiny):
    _, ours = tiny
    with torch.no_grad():
        _, raw = ours.model(torch.tensor([list(ours.encode(SENTENCE).ids)]))  # before AttentionResult checks them
    assert all(torch.count_nonzero(torch.triu(w, 1)) == 0 for w in raw)


def test_engines_say_what_they_can_do(tiny):
    hf, ours = tiny
    assert isinstance(hf, Engine) and isinstance(hf, GeneratingEngine) and isinstance(hf, SteppingEngine)
    assert isinstance(ours, SteppingEngine) and isinstance(ours, GeneratingEngine)
    assert ours.model.embed.weight.data_ptr() == hf.model.model.embed_tokens.weight.data_ptr()  # shared, not copied
    assert registry.can_rebuild(hf) and (ours.n_layers, ours.n_heads, ours.n_kv_heads) == (2, 6, 2)


def test_the_step_by_step_view_reproduces_every_layer(tiny):
    _, ours = tiny
    ids = torch.tensor([list(ours.encode(SENTENCE).ids)])
    _, weights = ours.model(ids)
    for layer in range(2):
        _, s = ours.steps(SENTENCE, layer)
        assert torch.allclose(s.weights, weights[layer], atol=1e-6)
        assert s.group == 3 and s.k_heads.shape[1] == 2 and s.x_normed is not None
        names = [n for n, _ in s.trace()]
        assert names[:2] == ["X (the layer's input)", "RMSNorm(X)"] and "K turned by position (RoPE)" in names


def test_the_hf_backend_s_steps_equal_the_rebuilt_engine_s(tiny):
    """The same Llama stepped two ways, its layers rebuilt on the scratch backend and its own modules retraced around
    attnviz's attention function (engines.decoder_steps): every intermediate agrees."""
    hf, ours = tiny
    for layer in range(2):
        _, a = hf.steps(SENTENCE, layer)
        _, b = ours.steps(SENTENCE, layer)
        for name in ("x_query", "x_normed", "q", "k", "v", "q_rotated", "k_rotated", "scores", "weights", "output"):
            assert (getattr(a, name) - getattr(b, name)).abs().max() < 1e-5, name
        assert [n for n, _ in a.trace()] == [n for n, _ in b.trace()]
        assert (a.angles.cos() - b.angles.cos()).abs().max() < 1e-5


def test_value_norms_come_with_the_scratch_result(tiny):
    _, ours = tiny
    r = ours.run(ours.encode(SENTENCE))["causal"]
    assert r.value_norms.shape == (2, 6, len(r.target)) and (r.value_norms > 0).all()


def test_the_name_table_rejects_unknown_weights():
    with pytest.raises(KeyError, match="NAME_TABLE"):
        llama.translate_state_dict({"model.layers.0.mystery.weight": torch.zeros(1)}, tied=True)


def test_a_model_the_scratch_backend_cannot_rebuild_says_so(tiny_gpt2_dir):
    with pytest.raises(ValueError, match="rebuilds BERT encoders and Llama decoders"):
        registry.load(str(tiny_gpt2_dir), "scratch", "cpu")


# --- the real SmolLM2 (converted once into the local cache on first use) ---


@pytest.mark.slow  # loads SmolLM2 (about 20 s the first time)
def test_smollm2_is_a_grouped_query_causal_llama(smollm2_hf):
    r = smollm2_hf.run(smollm2_hf.encode(SENTENCE))["causal"]
    assert r.shape == (30, 9, 13, 13) and r.kind == "causal"
    assert smollm2_hf.config.num_key_value_heads == 3 and smollm2_hf.family == "llama"
    assert r.weights[..., 0].mean() > 0.25  # an attention sink: much of every head's attention on the first token


@pytest.mark.slow  # loads SmolLM2 (about 20 s the first time)
@pytest.mark.parametrize("text", TEXTS)
def test_smollm2_scratch_equals_hugging_face_eager(smollm2_hf, smollm2_scratch, smollm2_eager, text):
    ids = list(smollm2_hf.encode(text).ids)
    weights, logits = _raw(smollm2_eager, ids)
    assert (smollm2_hf.run(smollm2_hf.encode(text))["causal"].weights - weights).abs().max() < 1e-4
    ours = smollm2_scratch.run(smollm2_scratch.encode(text))["causal"]
    assert (ours.weights - weights).abs().max() < 1e-4
    with torch.no_grad():
        hidden, _ = smollm2_scratch.model(torch.tensor([ids]))
    assert (smollm2_scratch.model.logits(hidden)[0] - logits).abs().max() < 1e-3


@pytest.mark.slow  # loads SmolLM2 (about 20 s the first time)
def test_smollm2_writes_the_same_answer_on_both_backends_and_shows_every_step(smollm2_hf, smollm2_scratch):
    a = smollm2_hf.generate("What is the capital of France?", 12)
    b = smollm2_scratch.generate("What is the capital of France?", 12)
    assert "Paris" in a.text and a.written == b.written and a.stopped == "end token"
    assert a.steps.shape == (30, 9, len(a.written), len(a.result.target))
    assert (a.steps - b.steps).abs().max() < 1e-4
    # step s is the row of the query that wrote token s: row P - 1 + s of the whole causal map
    p = a.prompt_tokens
    assert torch.equal(a.steps[:, :, 0], a.result.weights[:, :, p - 1])
    assert a.result.target.tokens[0] == "<|im_start|>" and a.result.target.special[0]  # the chat template's marker
    assert smollm2_hf.has_chat_template and smollm2_scratch.has_chat_template and a.chat and b.chat


def test_a_model_with_no_chat_template_writes_after_the_prompt_as_written_and_says_so(tiny):
    """The Generate page's 'As a chat message' did nothing on Gemma 3 270M (a base model: no template) and its
    caption said the template was included."""
    for eng in tiny:
        assert not eng.has_chat_template
        asked, plain = eng.generate("a b c", 3, chat=True), eng.generate("a b c", 3, chat=False)
        assert not asked.chat and asked.written == plain.written and asked.prompt_tokens == plain.prompt_tokens
        assert asked.result.target.tokens[: asked.prompt_tokens] == eng.encode("a b c").axis.tokens


@pytest.mark.slow  # loads SmolLM2 (about 20 s the first time)
def test_the_smollm2_shaped_llama_has_smollm2s_exact_shape_and_runs_on_both_backends(tmp_path):
    """What travels to a GPU machine in SmolLM2's place: its config field for field, seeded random weights."""
    import json

    from attnviz.engines import smollm2

    real = json.loads((smollm2.converted() / "config.json").read_text())
    real_rope = real.pop("rope_parameters", {})
    for key, value in smollm2.SHAPE.items():
        expected = real_rope.get("rope_theta") if key == "rope_theta" else real[key]
        assert value == expected, key
    assert real_rope.get("rope_type", "default") == "default"
    folder = smollm2.shaped(tmp_path / "a", registry.default_model_dir(), seed=3)
    hf = registry.load(str(folder), "hf", "cpu")
    ours = registry.scratch_engine(hf)
    assert (hf.n_layers, hf.n_heads, ours.n_kv_heads, hf.max_tokens) == (30, 9, 3, 8192)
    text = "The animal didn't cross the street because it was too tired."
    a, b = hf.run(hf.encode(text))["causal"].weights, ours.run(ours.encode(text))["causal"].weights
    assert (a - b).abs().max() < 1e-5
    twin = smollm2.shaped(tmp_path / "b", registry.default_model_dir(), seed=3)
    reloaded = registry.load(str(twin), "hf", "cpu")
    again = reloaded.run(reloaded.encode(text))["causal"].weights
    assert torch.equal(a, again)  # seeded: the same weights wherever it is built


@pytest.mark.slow  # converts SmolLM2 from its GGUF file (about 9 s)
def test_a_conversion_parses_its_gguf_file_once_and_writes_what_the_cache_holds(tmp_path, monkeypatch):
    """transformers reads the file for the config, the tokenizer and the weights: one parse serves the three
    (bundles._one_reading), the reader's name is restored after, and the folder is the one the cache holds."""
    import gguf
    from safetensors.torch import load_file

    from attnviz.engines import bundles

    cached = bundles.SMOLLM2.converted()
    parses = []

    class Counted(gguf.GGUFReader):
        def __init__(self, path, mode="r"):
            parses.append(str(path))
            super().__init__(path, mode)

    monkeypatch.setattr(gguf, "GGUFReader", Counted)
    monkeypatch.setenv(bundles.CACHE_ENV, str(tmp_path))
    folder = bundles.SMOLLM2.converted()
    assert folder == tmp_path / bundles.SMOLLM2.folder and bundles.SMOLLM2.ready()
    assert len(parses) == 1 and parses[0].endswith(bundles.SMOLLM2_GGUF)
    assert gguf.GGUFReader is Counted  # the shared reader was this block's only
    ours, theirs = load_file(folder / "model.safetensors"), load_file(cached / "model.safetensors")
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert (folder / "tokenizer.json").read_bytes() == (cached / "tokenizer.json").read_bytes()
