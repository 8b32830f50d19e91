"""A bundled model's conversion (engines/bundles.py): one process converts while another waits, then reads it;
converted once, then read from its folder, is engines/test_gemma3.py's and engines/test_llama.py's (the real models)."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from attnviz.engines import bundles

FAKE = bundles.Bundle(
    name="fake",
    label="Fake",
    folder="fake-model",
    install="(nothing to install)",
    takes="a second",
    fingerprint=lambda: {"fake": 1},
    gguf=lambda scratch: scratch / "fake.gguf",
)


def _slow_convert(bundle: bundles.Bundle, fingerprint: dict) -> None:
    """The conversion's shape without transformers: note who converted, take a while, then write the finished folder
    (its marker last) as _convert does."""
    with open(bundle.path.parent / "conversions.log", "a") as log:
        log.write(f"{os.getpid()}\n")
    time.sleep(0.5)
    bundle.path.mkdir(parents=True, exist_ok=True)
    (bundle.path / bundles.MARKER).write_text(json.dumps(fingerprint))


def _converts(out) -> None:
    out.put(str(FAKE.converted()))


def test_three_processes_asking_for_one_model_at_once_convert_it_once(tmp_path, monkeypatch):
    """Without the lock beside the folder each process converted (a server and two test workers each made Gemma 3's
    folder at once on a fresh machine); now one converts and the others wait, then return the folder it made."""
    monkeypatch.setenv(bundles.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(bundles, "_convert", _slow_convert)
    forked = multiprocessing.get_context("fork")  # the children see the patched _convert
    out = forked.Queue()
    procs = [forked.Process(target=_converts, args=(out,)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=30)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert sorted(out.get(timeout=5) for _ in procs) == [str(tmp_path / FAKE.folder)] * 3
    assert len((tmp_path / "conversions.log").read_text().split()) == 1
    assert FAKE.ready() and Path(tmp_path / f".{FAKE.folder}.lock").exists()


def test_a_conversion_killed_halfway_leaves_nothing_once_the_next_one_runs(tmp_path, monkeypatch):
    """A server stopped while it converted Gemma 3 left its temporary folders (the joined 253 MB file among them);
    the next conversion of that model removes them, and another model's, which may be converting, stays."""
    monkeypatch.setenv(bundles.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(bundles, "_convert", _slow_convert)
    left = [tmp_path / f"{prefix}abc123" for prefix in FAKE.scratch_prefixes]
    other = tmp_path / ".gguf-another-model-xyz"
    for folder in (*left, other):
        folder.mkdir()
        (folder / "part.gguf").write_bytes(b"half")
    assert FAKE.converted() == tmp_path / FAKE.folder
    assert [f.exists() for f in left] == [False, False] and other.exists()


@pytest.mark.slow  # reads SmolLM2's GGUF file twice (about 3 s)
def test_the_shared_reader_reads_every_field_and_tensor_as_gguf_s_own_reader_does():
    """_one_reading's reader slices the file's map as a plain array, not a numpy memmap (Gemma 3's header: 3.0 s
    against 10.0): the same fields, each part equal, and the same tensors, byte for byte."""
    import gguf
    import numpy as np

    path = bundles.smollm2_gguf()
    theirs = gguf.GGUFReader(path)
    with bundles._one_reading():
        ours = gguf.GGUFReader(path)
    assert type(ours) is not gguf.GGUFReader and isinstance(ours, gguf.GGUFReader)
    assert type(ours.data) is np.ndarray and type(theirs.data) is np.memmap
    assert list(ours.fields) == list(theirs.fields)
    for name, field in theirs.fields.items():
        mine = ours.fields[name]
        assert mine.types == field.types and mine.data == field.data, name
        assert len(mine.parts) == len(field.parts) and all(map(np.array_equal, mine.parts, field.parts)), name
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    pairs = zip(ours.tensors, theirs.tensors, strict=True)
    assert all(np.array_equal(a.data, b.data) and a.tensor_type == b.tensor_type for a, b in pairs)
