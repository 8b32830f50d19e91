"""Lazy attention equals eager attention: tiles, rows, pooled maps and every statistic, at N up to 1,024.

Eager weights are the reference: the model's own output_attentions (Hugging Face) or our scratch forward pass.
Tolerances are absolute 1e-5 on weights and shares; statistics measured in tokens or nats (distance, entropy)
are compared relative to their size, since float32 eager sums carry their own rounding of that order.
"""

import dataclasses
import math
import threading

import pytest
import torch

from attnviz.analysis.head_stats import head_stats
from attnviz.blocks import block_mean, pool_factor
from attnviz.engines import registry
from attnviz.engines.base import eager_tokens
from attnviz.lazy import LazyAttention, of
from attnviz.result import AttentionResult, Results
from attnviz.tokens import TokenAxis

TOL = 1e-5
PARAGRAPH = (
    "The animal didn't cross the street because it was too tired. In 1969, two astronauts walked on the Moon "
    "while a third orbited above them; nobody agreed on what attention was, but everyone used it. "
)


def _text_of(engine, n: int) -> str:
    """A text of more than n tokens for this engine's tokenizer (one encoding: a paragraph is under 60 tokens)."""
    text = PARAGRAPH * (n // 30 + 1)
    assert len(engine.tokenizer.encode(text, n + 1).ids) > n
    return text


def _assert_matches(computed: LazyAttention, eager: AttentionResult) -> None:
    """Both ways a LazyAttention gets its analysis: as its forward pass left it (computed there where attnviz's CPU
    kernel runs: lazy.ForwardStats), and the same queries and keys with nothing cached (its own pass); each against
    the eager weights' own pooled maps, attention received and statistics, computed once for both (SmolLM2's at 1,024
    tokens took as long as a lazy pass)."""
    w, n = eager.weights, eager.weights.shape[2]
    ref = {"received": w.mean(-2), "stats": head_stats(eager)}
    for side in (96, 32):
        f = pool_factor(n, side)
        ref[side] = f, block_mean(w, f, f)
    _assert_one_matches(computed, eager, ref)
    bare = dataclasses.replace(computed, _cache={}, _lock=threading.Lock())
    assert "lse" not in bare._cache  # before the first pass: tiles and rows normalise their own rows
    _assert_one_matches(bare, eager, ref)


def _assert_one_matches(lazy: LazyAttention, eager: AttentionResult, ref: dict) -> None:
    w = eager.weights
    n_l, n_h, n, _ = w.shape
    assert lazy.shape == w.shape
    for layer in range(n_l):  # a layer at a time: SmolLM2's 1,024 tokens are 1.1 GB a copy of every layer's maps
        assert (lazy.tile([layer], range(n_h), slice(None), slice(None))[0] - w[layer]).abs().max() < TOL
    assert (lazy.tile([n_l - 1], [1], slice(3, 40), slice(0, 20))[0, 0] - w[-1, 1, 3:40, :20]).abs().max() < TOL
    picked = [0, 1, n // 2, n - 1]
    assert (lazy.rows(picked) - w[:, :, picked]).abs().max() < TOL
    assert (lazy.lse().exp() > 0).all()
    for side in (96, 32):
        pooled, f, _ = lazy.pooled(side)
        assert pooled.shape[-1] == math.ceil(n / f) <= side and f == ref[side][0]
        assert (torch.from_numpy(pooled) - ref[side][1]).abs().max() < TOL
    one, f = lazy.pooled_head(n_l - 1, n_h - 1, 40)
    assert (torch.from_numpy(one) - block_mean(w[-1, -1], f, f)).abs().max() < TOL
    assert (lazy.received() - ref["received"]).abs().max() < TOL
    ours, theirs = lazy.stats(), ref["stats"]
    assert set(ours) == set(theirs)
    for key in theirs:
        scale = theirs[key].abs().clamp_min(1) if key in ("distance", "entropy") else 1
        assert ((ours[key] - theirs[key]).abs() / scale).max() < TOL, key
    inside, outside = lazy.window(n - 40, n)
    assert (inside - w[..., n - 40 :, n - 40 :]).abs().max() < TOL
    assert (inside.sum(-1) + outside - 1).abs().max() < TOL  # what the window misses, each row's rest


@pytest.fixture(scope="module")
def long_tiny(tiny_long_llama_dir):
    hf = registry.load(str(tiny_long_llama_dir), "hf", "cpu")
    return hf, registry.scratch_engine(hf)


@pytest.mark.parametrize("n", [256, 512, pytest.param(1024, marks=pytest.mark.slow)])  # 1,024: eager and lazy, slow
@pytest.mark.parametrize("backend", ["hf", "scratch"])
def test_lazy_equals_eager_on_a_tiny_llama(long_tiny, backend, n):
    engine = long_tiny[0] if backend == "hf" else long_tiny[1]
    enc = engine.tokenizer.encode(_text_of(engine, n), n)
    assert len(enc.ids) == n
    with torch.inference_mode():
        w = engine.weights_of(enc.ids)  # every weight, the eager way: the reference
    eager = AttentionResult(w, enc.axis, enc.axis, "causal", engine.name)
    lazy = engine.lazy_run(enc)
    _assert_matches(lazy, eager)  # its analysis from the forward pass where the CPU kernel runs, and its own
    for heads in (6, 3, 1):  # every head a block, one group of 3 sharing a key head, one head: 37 rows a block
        blocked = LazyAttention(
            lazy.q,
            lazy.k,
            lazy.target,
            lazy.source,
            "causal",
            lazy.model,
            scale=lazy.scale,
            block_bytes=4 * heads * n * 37,
            max_rows=37,
        )
        assert {h.stop - h.start for h, _ in blocked._blocks()} == {heads}
        _assert_matches(blocked, eager)


@pytest.mark.slow  # loads SmolLM2 (about 20 s the first time)
def test_smollm2_lazy_equals_its_eager_weights_at_1024_tokens(smollm2_hf, smollm2_eager):
    enc = smollm2_hf.tokenizer.encode(_text_of(smollm2_hf, 1024), 1024)
    with torch.inference_mode():  # transformers' own eager attention: the reference
        attentions = smollm2_eager(input_ids=torch.tensor([list(enc.ids)]), output_attentions=True).attentions
        w = torch.stack([a[0] for a in attentions]).float()
        del attentions  # one copy of the 1.1 GB of maps, not two
    eager = AttentionResult(w, enc.axis, enc.axis, "causal", "smollm2")
    lazy = smollm2_hf.lazy_run(enc)
    _assert_matches(lazy, eager)
    del w, eager


@pytest.mark.slow  # loads SmolLM2 (about 20 s the first time)
def test_the_scratch_smollm2_lazy_queries_and_keys_equal_hugging_faces(smollm2_hf, smollm2_scratch):
    enc = smollm2_hf.tokenizer.encode(_text_of(smollm2_hf, 512), 512)
    a, b = smollm2_hf.lazy_run(enc), smollm2_scratch.lazy_run(enc)
    assert (a.q - b.q).abs().max() < 1e-3 and (a.k - b.k).abs().max() < 1e-3  # pre-softmax, |q| ~ 10..100
    assert (a.rows([0, 300, 511]) - b.rows([0, 300, 511])).abs().max() < TOL


def test_one_rule_decides_eager_or_lazy(long_tiny, monkeypatch):
    hf, ours = long_tiny
    monkeypatch.setenv("ATTNVIZ_EAGER_MB", "1")
    limit = eager_tokens(2, 6)  # 147 tokens of 2 layers x 6 heads in 1 MB
    assert limit == int((2**20 / (4 * 2 * 6)) ** 0.5)
    short, long = _text_of(hf, 20).split(".")[0], _text_of(hf, limit + 50)
    for engine in (hf, ours):
        assert isinstance(engine.run(engine.encode(short))["causal"], AttentionResult)
        seen: list[tuple[int, int]] = []
        result = engine.run(engine.encode(long), progress=lambda done, total, seen=seen: seen.append((done, total)))[
            "causal"
        ]
        assert isinstance(result, LazyAttention) and result.n_tokens > limit
        assert seen[-1] == (2, 2)  # the forward pass reported each layer


def test_bert_keeps_its_512_positions_and_stays_eager(bundled_hf):
    result = bundled_hf.run(bundled_hf.encode(PARAGRAPH * 60))["self"]
    assert isinstance(result, AttentionResult) and len(result.target) == 512 and result.truncated > 0


def test_bidirectional_lazy_attention_is_a_plain_softmax():
    torch.manual_seed(0)
    q, k = torch.randn(2, 4, 50, 8), torch.randn(2, 2, 50, 8)
    axis = TokenAxis.plain([f"t{i}" for i in range(50)])
    lazy = LazyAttention(q, k, axis, axis, "self", "random", block_bytes=4 * 4 * 50 * 7)
    ref = torch.softmax(q @ k.repeat_interleave(2, 1).transpose(-1, -2) / math.sqrt(8), -1)
    _assert_matches(lazy, AttentionResult(ref, axis, axis, "self", "random"))


def test_causal_lazy_weights_hide_the_future():
    torch.manual_seed(0)
    axis = TokenAxis.plain([f"t{i}" for i in range(30)])
    lazy = LazyAttention(torch.randn(1, 2, 30, 4), torch.randn(1, 1, 30, 4), axis, axis, "causal", "random")
    w = lazy.tile([0], [0, 1], slice(None), slice(None))
    assert torch.count_nonzero(torch.triu(w, 1)) == 0
    assert (w.sum(-1) - 1).abs().max() < 1e-6


def test_of_hands_on_a_long_runs_kind_and_refuses_an_eager_runs():
    axis = TokenAxis.plain(["a", "b"])
    lazy = LazyAttention(torch.zeros(1, 2, 2, 4), torch.zeros(1, 1, 2, 4), axis, axis, "causal", "m")
    assert (
        of(Results({"causal": lazy}, lazy=True)) is lazy and of(Results({"causal": lazy}, lazy=True), "causal") is lazy
    )
    eager = AttentionResult(torch.tensor([[[[1.0, 0.0], [0.5, 0.5]]]]), axis, axis, "causal", "m")
    with pytest.raises(ValueError, match="not long"):
        of(Results({"causal": eager}))


def test_mismatched_queries_and_keys_are_refused():
    axis = TokenAxis.plain(["a", "b"])
    with pytest.raises(ValueError, match="do not match"):
        LazyAttention(torch.zeros(1, 4, 2, 8), torch.zeros(1, 3, 2, 8), axis, axis, "causal", "m")
    with pytest.raises(ValueError, match="self or causal"):
        LazyAttention(torch.zeros(1, 4, 2, 8), torch.zeros(1, 4, 2, 8), axis, axis, "cross", "m")


@pytest.mark.slow  # loads SmolLM2 (about 20 s the first time)
def test_the_readme_states_what_a_long_text_keeps_at_4096_tokens_on_smollm2():
    from conftest import ROOT

    from attnviz.memo import nbytes

    n = 4096  # SmolLM2: 30 layers, 9 query heads, 3 key/value heads, 64 dimensions a head
    axis = TokenAxis.plain(tuple(f"t{i}" for i in range(n)))
    lazy = LazyAttention(torch.empty(30, 9, n, 64), torch.empty(30, 3, n, 64), axis, axis, "causal", "smollm2")
    kept = nbytes(lazy.q) + nbytes(lazy.k)
    readme = "\n".join(f.read_text() for f in sorted((ROOT / "docs").glob("*.md")))
    assert f"{kept / 1e6:.0f} MB per 4,096-token text" in readme and f"{kept / 1e6:.0f} MB, at 4,096 tokens" in readme
    assert nbytes(lazy) >= kept  # what the memo counts for it


def test_the_long_input_bench_reads_as_many_tokens_as_it_asks_for(bundled_hf):
    """bench/long_inputs.py takes its texts from the repository's prose, cut to what n tokens need: the whole of it
    grew past the tokenizer's limit on one text (200,000 characters), which refused every size."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import long_inputs

    for n in (256, 32768):
        assert len(long_inputs._encode(bundled_hf, n).ids) == n


def test_the_fused_pass_gives_sdpa_one_key_head_per_query_head(long_tiny, monkeypatch):
    """In float32, SDPA with enable_gqa falls back on CUDA to its math kernel, which builds every head's N x N scores
    (bench/RESULTS.md, the CUDA section: 88 GiB at 32,768 tokens); the fused pass hands it K and V per query head."""
    from torch.nn import functional

    real, calls = functional.scaled_dot_product_attention, []

    def sdpa(q, k, v, *args, **kwargs):
        calls.append((q.shape[1], k.shape[1], v.shape[1], kwargs.get("enable_gqa", False)))
        return real(q, k, v, *args, **kwargs)

    monkeypatch.setattr(functional, "scaled_dot_product_attention", sdpa)
    monkeypatch.setenv("ATTNVIZ_FUSED", "0")  # where the CPU kernel runs, the forward pass calls no SDPA at all
    for engine in long_tiny:  # hf and scratch: 6 query heads sharing 2 key/value heads
        enc = engine.tokenizer.encode(_text_of(engine, 300), 300)
        engine.lazy_run(enc)
    assert calls and set(calls) == {(6, 6, 6, False)}
