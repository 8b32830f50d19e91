"""The bundled Gemma 3 270M (engines/bundles.py): converted once from its packages' GGUF file, then read from the cache;
attnviz's attention on it equals transformers' eager attention, and its sliding windows give exactly zero weight to
keys further back than 512 tokens, on the short path and the long one.

The reference is transformers' eager attention on the converted folder (config, tokenizer, float32 safetensors that
the conversion saved from transformers' own GGUF loader): the GGUF itself is read once, by the conversion, not per
test (about 30 s here). Its first and second load times are bench/RESULTS.md's (python bench/gemma_load.py).
"""

from __future__ import annotations

import json

import pytest
import torch
from conftest import eager_reference

from attnviz.analysis.head_stats import head_stats
from attnviz.engines import bundles, registry
from attnviz.lazy import LazyAttention
from attnviz.result import AttentionResult

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not bundles.GEMMA3.installed(), reason=f"Gemma 3 is not installed: {bundles.GEMMA3.install}"),
]
SENTENCE = "The animal didn't cross the street because it was too tired."
PROSE = (
    "Attention lets every token look back at the tokens before it. A sliding window keeps only the nearest ones, "
    "so a long text costs less: each query reads a fixed number of keys, whatever the length. "
)
TOL = 1e-4


@pytest.fixture(scope="module")
def gemma3():
    return registry.load("gemma3", "hf", "cpu")


@pytest.fixture(scope="module")
def gemma3_eager():
    return eager_reference(bundles.GEMMA3.converted())


def test_gemma3_is_converted_once_and_then_read_from_its_folder(gemma3, monkeypatch):
    folder = bundles.GEMMA3.path
    assert bundles.GEMMA3.ready()
    assert json.loads((folder / bundles.MARKER).read_text()) == bundles.GEMMA3.fingerprint()
    assert {"config.json", "tokenizer.json", "model.safetensors"} <= {p.name for p in folder.iterdir()}
    joined = folder.parent.glob(f"{bundles.GEMMA3.scratch_prefixes[1]}*")
    assert not list(folder.glob("*.gguf")) and not list(joined)  # the joined file is not kept

    def converts(*_):
        raise AssertionError("converted again")

    monkeypatch.setattr(bundles, "_convert", converts)
    assert bundles.GEMMA3.converted() == folder
    config = json.loads((folder / "config.json").read_text())
    assert (config["model_type"], config["num_hidden_layers"], config["num_attention_heads"]) == ("gemma3_text", 18, 4)
    assert config["num_key_value_heads"] == 1 and config["sliding_window"] == 512
    assert gemma3.windows == tuple(0 if (i + 1) % 6 == 0 else 512 for i in range(18))


def test_gemma3_weights_equal_transformers_eager(gemma3, gemma3_eager):
    r = gemma3.run(gemma3.encode(SENTENCE))
    ours = r.main.weights
    enc = gemma3.tokenizer.encode(SENTENCE, 100)
    assert enc.axis.tokens[0] == "<bos>" and r.main.target.tokens == enc.axis.tokens
    with torch.inference_mode():
        ref = torch.cat(gemma3_eager(input_ids=torch.tensor([enc.ids]), output_attentions=True).attentions)
    assert ours.shape == ref.shape == (18, 4, len(enc.ids), len(enc.ids))
    assert (ours - ref).abs().max() < TOL
    assert (ours.sum(-1) - 1).abs().max() < 1e-5


def test_a_gemma3_text_longer_than_its_window_is_lazy_exact_and_zero_outside_the_window(gemma3, gemma3_eager):
    enc = gemma3.tokenizer.encode(PROSE * 40, 700)
    n = len(enc.ids)
    assert n == 700
    lazy = gemma3.lazy_run(enc)
    assert isinstance(lazy, LazyAttention) and lazy.windows == gemma3.windows
    with torch.inference_mode():
        ref = torch.cat(gemma3_eager(input_ids=torch.tensor([enc.ids]), output_attentions=True).attentions)
    ours = lazy.tile(range(18), range(4), slice(None), slice(None))
    assert (ours - ref).abs().max() < TOL
    for layer, window in enumerate(gemma3.windows):
        far = ours[layer, :, window:, :].tril(-window) if window else None  # keys j <= i - window
        if window:  # exactly zero, on ours and on transformers' own
            assert far.abs().max() == 0 and ref[layer, :, window:, :].tril(-window).abs().max() == 0
            assert ours[layer, :, 650, 650 - window + 1 : 651].min() > 0  # and every key inside it has some
        else:  # a full layer reaches past the window (some keys' weights underflow to 0 in float32, as in eager)
            assert ours[layer, :, 650, : 650 - 512 + 1].sum(-1).min() > 0
    stats, want = lazy.stats(), head_stats(AttentionResult(ref, enc.axis, enc.axis, "causal", "gemma3"))
    for key in want:
        scale = want[key].abs().clamp_min(1) if key in ("distance", "entropy") else 1
        assert ((stats[key] - want[key]).abs() / scale).nan_to_num(0).max() < TOL, key


def test_a_gemma3_text_past_its_window_held_whole_marks_each_layer_s_window_on_its_maps(gemma3):
    """600 tokens: every weight held (under the eager budget), yet past the 512-token window: the result knows each
    layer's window (it checks that the weights beyond it are 0), and the Heads page's maps draw those cells grey, as
    the long path does, where they drew them as weight 0."""
    import numpy as np

    from attnviz.figures import interactive

    enc = gemma3.tokenizer.encode(PROSE * 40, 600)
    r = gemma3.run(enc).main
    assert isinstance(r, AttentionResult) and r.windows == gemma3.windows
    z = np.asarray(interactive.head_map(r, 0, 0, max_side=600).data[0].z, dtype=float)  # layer 1: a window of 512
    i, j = np.indices(z.shape)
    assert np.array_equal(np.isnan(z), (j > i) | (i - j >= 512)) and np.isnan(z[599, 0]) and z[599, 88] > 0
    full = np.asarray(interactive.head_map(r, 5, 0, max_side=600).data[0].z, dtype=float)  # layer 6: every key
    assert np.array_equal(np.isnan(full), j > i)
    with pytest.raises(ValueError, match="beyond its sliding window"):  # a window the weights do not keep
        AttentionResult(r.weights[5:6], r.target, r.source, "causal", "m", windows=(512,))


def test_gemma3_s_layers_step_by_step_equal_transformers_own(gemma3, gemma3_eager):
    """The Inside page's steps of Gemma 3 270M (engines.decoder_steps): its norm, its Q and K normalised per head and
    turned by position, one key/value head for its four query heads, each layer's own window (layer 1: 512, layer
    6: none); the weights are transformers' own, and the last token of a text longer than the window gives nothing
    past layer 1's window."""
    assert gemma3.n_kv_heads == 1
    enc = gemma3.encode(PROSE * 15)
    n = len(enc.ids)
    assert n > 560
    with torch.inference_mode():  # one eager pass for both layers
        refs = gemma3_eager(input_ids=torch.tensor([enc.ids]), output_attentions=True).attentions
    for layer, window in ((0, 512), (5, 0)):
        got, s = gemma3.steps(PROSE * 15, layer)
        assert got.ids == enc.ids and s.window == window == gemma3.windows[layer]
        assert (s.weights - refs[layer]).abs().max() < TOL
        assert s.q_normed.shape == (1, 4, n, 256) and s.k_rotated.shape == (1, 1, n, 256) and s.group == 4
        far = s.weights[0, :, n - 1, : n - 512]  # the keys 512 or more tokens back
        assert far.abs().max() == 0 if window else far.sum(-1).min() > 0
    names = [name for name, _ in s.trace()]
    assert "Q normalised (RMSNorm)" in names and "scores = Q·Kᵀ/√256" in names
