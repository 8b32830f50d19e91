"""The Hugging Face engine on tiny random models loaded through the real loader, and the bundled BERT."""

import pytest
import torch
from conftest import SENTENCE

from attnviz.engines import registry
from attnviz.engines.hf import check_layers


def test_bundled_bert_gives_self_attention(bundled_hf):
    res = bundled_hf.run(bundled_hf.encode(SENTENCE))
    assert set(res) == {"self"}
    r = res["self"]
    assert r.shape == (6, 12, 16, 16)
    assert r.target_tokens[0] == "[CLS]" and r.target_tokens[-1] == "[SEP]" and "animal" in r.target_tokens
    assert torch.allclose(r.weights.sum(-1), torch.ones(6, 12, 16), atol=1e-5)
    assert r.device == "cpu" and r.truncated == 0


def test_decoder_only_gives_causal_attention(tiny_gpt2_dir):
    eng = registry.load(str(tiny_gpt2_dir), "hf", "cpu")
    res = eng.run(eng.encode("a small test sentence"))
    assert set(res) == {"causal"}
    r = res["causal"]
    assert r.shape[:2] == (2, 4) and r.shape[2] == r.shape[3] == len(r.target_tokens)
    with torch.no_grad():  # the model's own weights, before AttentionResult checks them
        raw = eng.model(input_ids=torch.tensor([eng.encode("a small test sentence").ids]), output_attentions=True)
    assert all(torch.count_nonzero(torch.triu(w, diagonal=1)) == 0 for w in raw.attentions)
    assert torch.equal(r.weights, torch.stack([w[0] for w in raw.attentions]))


def test_encoder_decoder_with_target_gives_three_kinds(tiny_marian_dir, bundled_tokenizer):
    eng = registry.load(str(tiny_marian_dir), "hf", "cpu")
    res = eng.run(eng.encode("the cat sat on the mat"), target="die katze")
    assert set(res) == {"self", "causal", "cross"}
    src, tgt = res["self"].source_tokens, res["causal"].target_tokens
    assert res["self"].shape[:2] == (2, 4) and res["causal"].shape[:2] == (3, 2)
    assert res["cross"].shape == (3, 2, len(tgt), len(src))
    assert res["cross"].target_tokens == tgt and res["cross"].source_tokens == src
    # teacher forcing: the decoder reads <start> + the target without its last token
    labels = bundled_tokenizer(text_target="die katze")["input_ids"]
    assert tgt == tuple(bundled_tokenizer.convert_ids_to_tokens([bundled_tokenizer.pad_token_id] + labels[:-1]))
    assert len(tgt) != len(src)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_encoder_decoder_without_target_uses_its_own_output(tiny_marian_dir):
    eng = registry.load(str(tiny_marian_dir), "hf", "cpu")
    res = eng.run(eng.encode("the cat sat"))
    tgt = res["cross"].target_tokens
    assert res["causal"].target_tokens == tgt and 1 <= len(tgt) <= 64
    assert tgt[0] == "[PAD]"  # the decoder start token


def test_missing_attention_weights_say_how_to_fix_it():
    with pytest.raises(RuntimeError, match="attn_implementation='eager'"):
        check_layers("m", "self", (), 6)
    with pytest.raises(RuntimeError, match="eager"):
        check_layers("m", "self", (torch.zeros(1),) * 5, 6)
    check_layers("m", "self", (torch.zeros(1),) * 6, 6)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_engine_is_safe_from_many_threads(bundled_hf):
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"sentence number {i} is about {w}" for i, w in enumerate(["cats", "dogs", "rain", "maps"] * 4)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda t: bundled_hf.run(bundled_hf.encode(t))["self"], texts))
    for text, r in zip(texts, results, strict=True):
        alone = bundled_hf.run(bundled_hf.encode(text))["self"]
        assert r.target_tokens == alone.target_tokens
        assert torch.equal(r.weights, alone.weights)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_the_scratch_backend_shares_its_hf_engine_s_tokenizer_safely(bundled_hf):
    from concurrent.futures import ThreadPoolExecutor

    from attnviz.engines.bert import ScratchBertEngine

    scratch = ScratchBertEngine(bundled_hf)
    assert scratch.tokenizer is bundled_hf.tokenizer  # one fast tokenizer, one lock
    texts = [f"shared tokenizer {i} on two engines" for i in range(24)]
    engines = [bundled_hf, scratch] * 12
    with ThreadPoolExecutor(8) as pool:
        got = list(
            pool.map(
                lambda pair: next(iter(pair[0].run(pair[0].encode(pair[1])).values())), zip(engines, texts, strict=True)
            )
        )
    for text, r in zip(texts, got, strict=True):
        assert (r.weights - bundled_hf.run(bundled_hf.encode(text))["self"].weights).abs().max() < 1e-5
