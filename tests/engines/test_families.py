"""Decoder families beyond Llama through attnviz's one attention path (issue 52, the families whose attention is
scaled softmax over causal keys, within a sliding window or not): Qwen 2, Qwen 3 (q/k norms), Mistral (with and
without a window), OLMo 2 (q/k norms), Phi-3 (fused QKV projection), Gemma 3 (one key/value head, windows on most
layers, two rotary tables), GPT-2 (absolute positions, its own layer names). Each is a tiny seeded model built
offline from transformers' own config class, compared with transformers' eager attention (nothing of attnviz's on
the way): the weights of a short text, a long text's lazy weights and statistics, a pass through the hook points
(an ablation) and the layers run again from a layer (patching), all refused for every family but Llama before."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from conftest import eager_reference
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    Gemma2Config,
    Gemma3TextConfig,
    GPT2Config,
    GptOssConfig,
    MistralConfig,
    Olmo2Config,
    Phi3Config,
    Qwen2Config,
    Qwen3Config,
)

from attnviz import fused
from attnviz.analysis.head_stats import head_stats
from attnviz.blocks import block_mean
from attnviz.engines import base, hf, registry
from attnviz.engines.hooks import Hooks, zero_heads
from attnviz.lazy import LazyAttention
from attnviz.result import AttentionResult

TOL = 1e-5
SHAPE = dict(
    hidden_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
    max_position_embeddings=1024,
)  # fmt: skip
FAMILIES = {
    "qwen2": lambda v: Qwen2Config(vocab_size=v, **SHAPE),
    "qwen3": lambda v: Qwen3Config(vocab_size=v, head_dim=12, **SHAPE),
    "mistral": lambda v: MistralConfig(vocab_size=v, sliding_window=None, **SHAPE),
    "olmo2": lambda v: Olmo2Config(vocab_size=v, **SHAPE),
    "phi3": lambda v: Phi3Config(vocab_size=v, pad_token_id=0, **SHAPE),
    # Gemma 3's shape in small: one key/value head for every query head, a sliding window on two layers of three
    "gemma3_text": lambda v: Gemma3TextConfig(
        vocab_size=v,
        **{**SHAPE, "num_hidden_layers": 3, "num_key_value_heads": 1},
        head_dim=12,
        query_pre_attn_scalar=12,
        sliding_window=16,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
    ),
    "mistral-window": lambda v: MistralConfig(vocab_size=v, sliding_window=24, **SHAPE),
    "gpt2": lambda v: GPT2Config(vocab_size=v, n_embd=48, n_layer=2, n_head=4, n_positions=1024),
    # GPT-2 with a scale per layer: 1 / (sqrt(Dh) (l + 1))
    "gpt2-by-layer": lambda v: GPT2Config(
        vocab_size=v, n_embd=48, n_layer=2, n_head=4, n_positions=1024, scale_attn_by_inverse_layer_idx=True
    ),
    # Gemma 2: soft-capped scores (a cap near the scores' own size, so that it bends them), a window on layer 0
    "gemma2": lambda v: Gemma2Config(
        vocab_size=v, **SHAPE, head_dim=12, query_pre_attn_scalar=12, sliding_window=16, attn_logit_softcapping=CAP
    ),
    # gpt-oss: a learned sink logit a head (set away from zero below), a window on layer 0, experts
    "gpt_oss": lambda v: GptOssConfig(
        vocab_size=v,
        **SHAPE,
        head_dim=12,
        num_local_experts=4,
        num_experts_per_tok=2,
        sliding_window=16,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters={  # gpt-oss's YaRN, its factor 32 from a 32-token original context to SHAPE's 1,024
            "rope_type": "yarn",
            "factor": 32.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 32,
            "rope_theta": 150000.0,
        },  # fmt: skip
    ),
}
CAP = 0.05
WINDOWS = {"gemma3_text": (16, 16, 0), "mistral-window": (24, 24), "gemma2": (16, 0), "gpt_oss": (16, 0)}
TEXT = "The animal didn't cross the street because it was too tired, and the street was wide. " * 8


# The fast loop runs Gemma 3 (a window on two layers of three, one key/value head, its own scale): the richest shape;
# make test runs every family.
FAST_FAMILIES = {"gemma3_text"}


@pytest.fixture(
    scope="module",
    params=[pytest.param(f, marks=() if f in FAST_FAMILIES else pytest.mark.slow) for f in sorted(FAMILIES)],
)
def family_dir(request, tmp_path_factory):
    from attnviz.engines import registry as reg

    tokenizer = AutoTokenizer.from_pretrained(reg.default_model_dir(), model_max_length=1024)
    torch.manual_seed(7)
    model = AutoModelForCausalLM.from_config(FAMILIES[request.param](tokenizer.vocab_size), attn_implementation="eager")
    for block in getattr(model.base_model, "layers", []):
        if hasattr(block.self_attn, "sinks"):  # gpt-oss's start at zero: make them matter
            with torch.no_grad():
                block.self_attn.sinks.copy_(torch.linspace(-1.0, 3.0, block.self_attn.sinks.numel()))
    folder = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return request.param, folder


def test_a_family_runs_on_attnviz_s_attention_and_equals_eager(family_dir):
    family, folder = family_dir
    engine = registry.load(str(folder), "hf", "cpu")
    assert engine.family == family.split("-")[0] and engine.lazy and engine.hooked  # refused before: Llama only
    enc = engine.encode(TEXT[:200])
    ids = torch.tensor([enc.ids])
    with torch.inference_mode():
        ref = eager_reference(folder)(input_ids=ids, output_attentions=True).attentions
        ours = engine.weights_of(enc.ids)
    assert (ours - torch.cat(ref)).abs().max() < TOL
    if family == "gpt_oss":  # the sinks matter: they take a visible share of every row, the first rows most
        assert engine.sinks and ours.sum(-1).max() < 1 - 1e-3 and ours.sum(-1).min() < 0.5
    if family == "gemma2":  # the cap matters: without it, transformers' own weights differ
        with torch.inference_mode():
            kw = {"attn_implementation": "eager", "attn_logit_softcapping": None}
            uncapped = AutoModelForCausalLM.from_pretrained(folder, **kw)
            plain = torch.cat(uncapped(input_ids=ids, output_attentions=True).attentions)
        assert (plain - ours).abs().max() > 1e-3


def test_a_family_s_long_text_is_lazy_and_exact(family_dir, monkeypatch):
    family, folder = family_dir
    engine = registry.load(str(folder), "hf", "cpu")
    # each layer's feed-forward goes a long text's positions a block at a time (128 here: five blocks), a mixture of
    # experts whole; the weights below are of layers after it, and equal transformers' own
    blocked = ["forward" in vars(layer.mlp) for layer in hf.decoder_layers(engine.model)]
    assert blocked == [family != "gpt_oss"] * engine.n_layers
    monkeypatch.setattr(base, "FF_ROWS", 128)
    enc = engine.tokenizer.encode(TEXT * 2, 600)
    with torch.inference_mode():
        w = torch.cat(eager_reference(folder)(input_ids=torch.tensor([enc.ids]), output_attentions=True).attentions)
    lazy = engine.lazy_run(enc)
    assert isinstance(lazy, LazyAttention) and lazy.windows == WINDOWS.get(family, ())
    # where attnviz's CPU kernel runs, the forward pass computed the analysis (not for Gemma 2's soft-capping)
    assert lazy.has_stats() == (fused.in_forward(torch.device("cpu")) and family != "gemma2")
    for layer, window in enumerate(WINDOWS.get(family, ())):  # the premise, in transformers' own weights
        if window:  # nothing lands on a key as far back as the window
            assert w[layer, :, 100, : 100 - window + 1].abs().max() == 0
        else:  # a full layer sees every earlier key
            assert w[layer, :, 100, :100].min() > 0
    n_l, n_h, n, _ = w.shape
    assert (lazy.tile(range(n_l), range(n_h), slice(None), slice(None)) - w).abs().max() < TOL
    pooled, f, _ = lazy.pooled()  # a window's blocks start at its first key: pooled from there, and received
    assert f > 1 and abs(pooled - block_mean(w, f, f).numpy()).max() < TOL
    assert (lazy.received() - w.mean(-2)).abs().max() < TOL
    ours, ref = lazy.stats(), head_stats(AttentionResult(w, enc.axis, enc.axis, "causal", family, sinks=lazy.sinks))
    for key in ref:
        scale = ref[key].abs().clamp_min(1) if key in ("distance", "entropy") else 1
        assert ((ours[key] - ref[key]).abs() / scale).max() < TOL, key


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed")
@pytest.mark.slow  # 7 s under Triton's interpreter
def test_a_gpu_s_long_text_path_keeps_each_full_layer_s_normalisers(family_dir, monkeypatch):
    """The path a GPU takes (here Triton's kernel under its interpreter, on the CPU): the forward pass keeps each full
    layer's row normalisers from torch's kernel and the analysis starts from them; a sliding window's layer gives
    none (its blocks are not torch's causal kernel) and a sink's are not used (they leave the sink out). The statistics
    equal transformers' own weights'. Gemma 3's windows and gpt-oss's sinks."""
    family, folder = family_dir
    if family not in ("gemma3_text", "gpt_oss"):
        pytest.skip("the windows and the sinks are what differ on this path; every family's plain path is tested above")
    monkeypatch.setenv("ATTNVIZ_FUSED", "1")
    engine = registry.load(str(folder), "hf", "cpu")
    enc = engine.tokenizer.encode(TEXT * 2, 300)
    with torch.inference_mode():
        w = torch.cat(eager_reference(folder)(input_ids=torch.tensor([enc.ids]), output_attentions=True).attentions)
    lazy = engine.lazy_run(enc)
    if lazy.sinks:  # torch's kernel has no sink: that pass runs attnviz's own blocks, which give none
        assert lazy.normalisers == ()
    else:
        assert [t is not None for t in lazy.normalisers] == [not window for window in WINDOWS[family]]
    ours, ref = lazy.stats(), head_stats(AttentionResult(w, enc.axis, enc.axis, "causal", family, sinks=lazy.sinks))
    for key in ref:
        scale = ref[key].abs().clamp_min(1) if key in ("distance", "entropy") else 1
        assert ((ours[key] - ref[key]).abs() / scale).max() < TOL, key
    assert (lazy.received() - w.mean(-2)).abs().max() < TOL


def test_a_family_s_result_carries_each_keys_value_norm_as_kobayashi_defines_it(family_dir):
    """||f_h(x_j)|| = ||v_j W_O^h||, computed head by head from the module's own W_O and the V transformers passed
    in; both ways the code computes it (few keys: carried through; more: through W W^T). The value-weighted view
    said 'BERT and SmolLM2 only'."""
    from attnviz.engines.layers import attention_module, decoder_layers, out_weight

    family, folder = family_dir
    engine = registry.load(str(folder), "hf", "cpu")
    blocks = decoder_layers(engine.model)
    for text in (TEXT[:18], TEXT[:200]):  # fewer keys than a head's 12 dimensions, then more
        enc = engine.encode(text)
        result = engine.run(enc)["causal"]
        hooks = Hooks(read=("v",), n_layers=engine.n_layers)
        engine.logits(enc.ids, hooks)
        expected = torch.zeros(engine.n_layers, engine.n_heads, len(enc.ids))
        for layer, block in enumerate(blocks):
            v, w_o = hooks.get("v", layer)[0], out_weight(attention_module(block)).detach()  # (Hkv, T, Dh), (D, H*Dh)
            dh, group = v.shape[-1], engine.n_heads // v.shape[0]
            for h in range(engine.n_heads):
                expected[layer, h] = (v[h // group] @ w_o[:, h * dh : (h + 1) * dh].T).norm(dim=-1)
        assert result.value_norms is not None and result.value_norms.shape == expected.shape
        assert torch.allclose(result.value_norms, expected, rtol=1e-4, atol=1e-5), (family, len(enc.ids))


def test_a_family_s_head_can_be_knocked_out_through_the_hook_points(family_dir):
    family, folder = family_dir
    engine = registry.load(str(folder), "hf", "cpu")
    ids = engine.encode(TEXT[:120]).ids
    plain = engine.logits(ids)
    with torch.inference_mode():
        assert torch.allclose(
            plain, eager_reference(folder)(input_ids=torch.tensor([ids])).logits[0].float(), atol=1e-4
        )
    knocked = engine.logits(ids, Hooks(replace={"z": zero_heads({1: [0, 3]})}))
    assert (knocked - plain).abs().max() > 1e-3  # the heads' output changed the next-token logits


# the families whose layers normalise each head's Q and K before the scores
QK_NORMS = {"qwen3", "olmo2", "gemma3_text"}


def test_a_family_s_layer_step_by_step_equals_transformers_own(family_dir):
    """The Inside page's steps of a family's layer (engines.decoder_steps): what the layer's own modules give, retraced
    and checked against what attnviz's attention function received, equals transformers' eager pass: the weights,
    the attention's output after W_O (read from transformers' own module), a window's band; the same Q and K under
    the layer's own mask, scored again as the layer scores them (its scale, soft cap, sinks), give the same weights;
    and the rotary table turned back gives the Q and K before the turn (gpt-oss's half table, its YaRN scale)."""
    from attnviz.corpus.qk import unturn
    from attnviz.lessons import kernels

    family, folder = family_dir
    engine = registry.load(str(folder), "hf", "cpu")
    assert registry.why_no_steps(engine) is None
    reference = eager_reference(folder)
    outputs: dict[int, torch.Tensor] = {}
    for i, block in enumerate(hf.decoder_layers(reference)):  # the reference's own attention outputs (a test's model)
        hf.attention_module(block).register_forward_hook(lambda m, a, out, i=i: outputs.__setitem__(i, out[0]))
    for layer in range(engine.n_layers):
        enc, s = engine.steps(TEXT[:300], layer)
        n = len(enc.ids)
        assert n > 40  # past the windows (16 and 24 tokens)
        with torch.inference_mode():
            ref = reference(input_ids=torch.tensor([enc.ids]), output_attentions=True).attentions[layer]
        assert (s.weights - ref).abs().max() < TOL
        assert (s.output - outputs[layer]).abs().max() < 1e-4
        assert (kernels.reweigh(s, s.allowed().cpu()) - ref[0]).abs().max() < TOL
        window = WINDOWS.get(family, (0,) * engine.n_layers)[layer]
        assert s.window == window and (s.q_normed is not None) == (family in QK_NORMS)
        allowed = s.allowed()
        if window:  # the last token sees itself and the window - 1 tokens before it, no further
            assert allowed[n - 1, n - window :].all() and not allowed[n - 1, : n - window].any()
        else:
            assert allowed[n - 1].all()
        assert s.weights[0][:, ~allowed].abs().max() == 0
        assert (s.sinks is not None) == (family == "gpt_oss")
        table = engine.turns(layer, n)
        if table is not None:  # GPT-2 adds its positions before the first layer: nothing turned here
            before = s.q_heads if s.q_normed is None else s.q_normed
            assert (unturn(s.q_rotated, *table) - before).abs().max() < 1e-4
    names = [name for name, _ in s.trace()]
    assert names[:2] == ["X (the layer's input)", "LayerNorm(X)" if family.startswith("gpt2") else "RMSNorm(X)"] or (
        family == "olmo2" and names[1] == "Q = X·W_Q"  # OLMo 2 normalises after its attention, not before
    )


def test_a_model_whose_attention_attnviz_does_not_compute_is_not_stepped(tmp_path, bundled_hf):
    """BLOOM's ALiBi bias never reaches attnviz's attention function: it shows transformers' eager weights, its layers
    are not retraced, and the Inside page is told why; an encoder on the hf backend is not stepped either (the page
    rebuilds BERT on the scratch backend)."""
    from transformers import BloomConfig

    tokenizer = AutoTokenizer.from_pretrained(registry.default_model_dir())
    torch.manual_seed(0)
    bloom = AutoModelForCausalLM.from_config(BloomConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, n_layer=1))
    bloom.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    engine = registry.load(str(tmp_path), "hf", "cpu")  # it loads (its layers' `self_attention` once failed the load)
    weights = engine.run(engine.encode("The animal didn't cross the street.")).main.weights  # transformers' eager
    assert (weights.sum(-1) - 1).abs().max() < 1e-5 and weights.triu(1).abs().max() == 0
    assert "ALiBi" in registry.why_no_steps(engine)
    with pytest.raises(ValueError, match="cannot be shown step by step: .*ALiBi"):
        engine.steps("The animal didn't cross the street.", 0)
    assert registry.why_no_steps(bundled_hf).endswith("and 'default' is an encoder")


def test_what_keeps_a_family_off_the_path_is_said():
    from transformers import BloomConfig, Gemma2Config, GptOssConfig

    assert hf.supports_capture(Gemma2Config(attn_logit_softcapping=50.0))  # soft-capped scores: a term of the path
    assert hf.supports_capture(GPT2Config(scale_attn_by_inverse_layer_idx=True))  # a scale per layer: each its own
    assert hf.supports_capture(GptOssConfig())  # learned sinks: a term of every row's normaliser
    assert not hf.supports_capture(BloomConfig())  # ALiBi: a bias added to the scores that the function never sees
    assert hf.supports_capture(MistralConfig(sliding_window=64)) and hf.supports_capture(Qwen2Config())
    assert hf.sliding_window(Qwen2Config()) is None  # Qwen names a window it uses only with use_sliding_window
    assert hf.sliding_window(Qwen2Config(use_sliding_window=True, sliding_window=64)) == 64


def test_a_family_s_layers_run_again_from_a_layer_as_the_whole_pass(family_dir):
    """logits_from (activation patching): the residual stream entering layer 1, run through the rest of the model's
    own layers with attnviz's attention (no mask given: the causal mask and a layer's window are ours to apply,
    and Gemma 3's two rotary tables each to its layers), gives the whole pass's logits."""
    family, folder = family_dir
    engine = registry.load(str(folder), "hf", "cpu")
    ids = engine.encode(TEXT[:300]).ids
    assert len(ids) > 40  # past the windows (16 and 24 tokens)
    whole = engine.logits(ids)
    resid = engine.residuals(ids)  # (L, T, D): what enters each layer
    for layer in (1, engine.n_layers - 1):
        again = engine.logits_from(layer, resid[layer][None])[0]
        assert (again - whole).abs().max() < 1e-4, layer


@pytest.mark.slow  # eleven tiny models, ten views each: about 20 s
def test_the_support_table_in_docs_is_what_the_code_does():
    """docs/models.md's families x views table is scripts/support_table.py's: each view tried through attnviz's own
    entry points on a tiny model of each family (a family that gains or loses a view fails here until --write)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "support_table.py"
    spec = importlib.util.spec_from_file_location("support_table", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    made = module.table()
    assert made == module._documented()
    assert "| Gemma 3 (windows on 5 of 6 layers, one key/value head) (`gemma3_text`) | yes | lazy | yes |" in made


def test_a_family_s_json_from_the_command_line_names_its_windows_and_its_sinks(family_dir, tmp_path):
    """`attnviz attention --json` of a windowed model: which zeros are its mask's (each layer's window) and, with
    learned sinks, why a row sums to under 1; a model with neither writes neither field (BERT's layout is exact)."""
    import json

    from attnviz.cli import main

    family, folder = family_dir
    out = tmp_path / "a.json"
    assert main(["attention", TEXT, "--model", str(folder), "--json", str(out), "--device", "cpu"]) == 0
    got = json.loads(out.read_text())["results"]["causal"]
    assert got.get("windows") == (list(WINDOWS[family]) if family in WINDOWS else None)
    assert got.get("sinks") == (True if family == "gpt_oss" else None)
    w = torch.tensor(got["weights"])
    for layer, window in enumerate(got.get("windows", [])):  # 0 outside each layer's window, as the field says
        if window:
            assert w[layer].tril(-window).abs().max() == 0 and w[layer].diagonal(-window + 1, -2, -1).min() > 0
    sums = w.sum(-1)
    assert (sums < 1 - 1e-3).any() if family == "gpt_oss" else (sums - 1).abs().max() < 1e-4
