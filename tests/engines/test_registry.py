"""Bad input: a clear message or a correct result, never a crash."""

import pytest
import torch

from attnviz.engines import registry
from attnviz.engines.base import ModelLoadError
from attnviz.tokens import check_text, display_labels


@pytest.mark.parametrize("text", ["", "   ", "\n\t  ", None])
def test_empty_text_is_a_clear_error(bundled_hf, text):
    with pytest.raises(ValueError, match="empty|string"):
        bundled_hf.run(bundled_hf.encode(text))


def test_text_with_no_readable_characters_is_a_clear_error(bundled_hf):
    with pytest.raises(ValueError, match="no characters"):
        bundled_hf.run(bundled_hf.encode("\u200b\u200b\x00"))


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_long_text_is_truncated_and_reported(bundled_hf, bundled_scratch):
    text = " ".join(["word"] * 5000)
    for engine in (bundled_hf, bundled_scratch):
        r = next(iter(engine.run(engine.encode(text)).values()))
        assert len(r.target_tokens) == 512
        assert r.truncated == 5002 - 512  # 5,000 words + [CLS] + [SEP]


def test_far_too_long_text_is_refused_before_tokenizing():
    with pytest.raises(ValueError, match="characters long"):
        check_text("a" * 300_000)


@pytest.mark.parametrize(
    "text",
    [
        "I love 🤖 and 🐈‍⬛!",
        "café naïve façade",
        "שלום עולם",
        "مرحبا بالعالم",
        "a\u200db\u200cc",
        "<script>alert(1)</script>",
    ],
)
def test_any_unicode_gives_a_valid_result(bundled_hf, text):
    r = bundled_hf.run(bundled_hf.encode(text))["self"]
    assert torch.allclose(r.weights.sum(-1), torch.ones(r.weights.shape[:3]), atol=1e-5)
    assert r.truncated == 0


def test_markup_tokens_are_escaped_for_display_and_duplicates_stay_apart(bundled_hf):
    r = bundled_hf.run(bundled_hf.encode("<script>alert(1)</script> the the"))["self"]
    labels = display_labels(r.target_tokens)
    assert len(set(labels)) == len(labels)
    assert not any("<" in lab for lab in labels) and any("&lt;" in lab for lab in labels)


@pytest.mark.parametrize("name", ["no-such-owner/no-such-model-xyz", "../../etc/passwd", "a b c", "http://x/y"])
def test_unknown_or_malformed_model_names_say_default_works(name):
    with pytest.raises(ModelLoadError, match='"default"') as info:
        registry.load(name, allow_paths=False)
    assert name[:20] in str(info.value) or "not a model name" in str(info.value)


def test_scratch_engine_refuses_a_model_that_is_not_bert(tiny_gpt2_dir):
    with pytest.raises(ValueError, match="rebuilds BERT encoders and Llama decoders"):
        registry.load(str(tiny_gpt2_dir), "scratch", "cpu")


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(ValueError, match="Unknown backend"):
        registry.load("default", "magic")


@pytest.mark.parametrize(
    "env",
    [{"HF_HUB_OFFLINE": "1"}, {"HF_HUB_OFFLINE": "", "HF_ENDPOINT": "http://127.0.0.1:1"}],
    ids=["off", "refused"],
)
def test_a_hub_id_neither_cached_nor_reachable_fails_at_once_naming_the_bundled_models(env, monkeypatch):
    """A mistyped name offline retried the hub for 47-83 s; now it fails before transformers is asked."""
    import time

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    started = time.perf_counter()
    with pytest.raises(ModelLoadError, match="bundled models work offline") as info:
        registry.load("attnviz-test/no-such-model-8c1f")
    assert time.perf_counter() - started < 2
    assert all(f'"{name}"' in str(info.value) for name in registry.BUNDLED)


def test_bundled_names_match_without_regard_to_case():
    assert registry.resolve("SmolLM2").name == "smollm2" and registry.resolve("Default").name == "default"
    assert registry.resolve(" DATES ").origin == "bundled"
