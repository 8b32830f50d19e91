"""A corpus run: documents in, Parquet tables and a manifest out, resumable; its executor measures in this process
("embedded") or on Ray ("ray").

The folder a run writes:
    manifest.json      model, revision, corpus, settings, counts, attnviz's version, status ("running", "finished")
    parts/NNNNN.npz    one batch's partial results (measure.Partial), written whole or not at all
    heads.parquet, examples.parquet, texts.parquet, text_stats.parquet   (corpus.tables), once every batch is done
A run started again on the same folder, corpus, model and settings skips the batches whose parts are written
(resumed), or, finished, is read back as it is; a folder holding another run is refused. One process at a time runs
in a folder (a lock file, .lock, in it): another that starts the same run (a second server on the same runs, a
second test worker) waits, then reads the finished run back. Both executors run measure.measure on the same batches,
and the tables are made from the parts in batch order, so an embedded run and a Ray run write the same rows.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnviz.blocks import STATS
from attnviz.corpus import measure, readers, tables
from attnviz.corpus.measure import Partial, Settings
from attnviz.corpus.models import batched, info_of, load
from attnviz.corpus.readers import Corpus, CorpusError
from attnviz.engines.base import BatchedEngine
from attnviz.locks import one_at_a_time
from attnviz.result import counted
from attnviz.version import __version__

EXECUTORS = ("embedded", "ray")  # what runs the measuring (the manifest's "engine", the CLI's --engine)
RUNS_ENV = "ATTNVIZ_CORPUS_DIR"  # where runs go when no folder is named (and where the Corpus page looks)
MANIFEST = "manifest.json"
LOCK = ".lock"  # in a run's folder: held by the one process running in it (run's _locked)
TABLES = ("heads", "examples", "texts", "text_stats")
Progress = Callable[[float, str], None]  # (fraction done, what) for a bar


def _count(n, noun: str) -> str:
    """A manifest's count with its noun ("1 text", "6 layers"), or "? texts" where the manifest lacks it."""
    return counted(n, noun) if isinstance(n, int) else f"? {noun}s"


@dataclass
class CorpusRun:
    """A finished run's folder: its manifest, and its tables read when asked (pandas DataFrames)."""

    folder: Path
    manifest: dict

    @classmethod
    def open(cls, folder: str | Path) -> CorpusRun:
        """A run folder; CorpusError when it holds no finished run."""
        folder = Path(folder).expanduser()
        try:
            manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise CorpusError(f"{folder.name[:100]!r} holds no corpus run (no readable {MANIFEST})") from err
        if manifest.get("status") != "finished":
            raise CorpusError(f"the run in {folder.name[:100]!r} is not finished: start it again to resume it")
        return cls(folder, manifest)

    def __repr__(self) -> str:
        m, corpus = self.manifest, self.manifest.get("corpus", {})
        skipped = corpus.get("skipped") or {}  # said where a notebook shows the run: lines dropped are not silent
        left = f" ({sum(skipped.values()):,} skipped: {', '.join(f'{k} {v:,}' for k, v in skipped.items())})"
        return (
            f"CorpusRun({m.get('model')} over {_count(corpus.get('documents'), 'text')} of {corpus.get('name', '?')}"
            f"{left if skipped else ''}: "
            f"{_count(m.get('layers'), 'layer')} × {_count(m.get('heads'), 'head')}; tables {', '.join(TABLES)}; "
            f"in {self.folder})"
        )

    def table(self, name: str):
        """One of TABLES as a pandas DataFrame."""
        import pandas as pd

        if name not in TABLES:
            raise ValueError(f"a run's tables are {', '.join(TABLES)}, not {name!r}")
        return pd.read_parquet(self.folder / f"{name}.parquet")

    @property
    def heads(self):
        """The per-head statistics table (pandas)."""
        return self.table("heads")

    @property
    def examples(self):
        """The examples table (pandas)."""
        return self.table("examples")

    @property
    def texts(self):
        """The windows table (pandas)."""
        return self.table("texts")

    def grid(self, stat: str, value: str = "mean") -> np.ndarray:
        """(L, H): a statistic's `value` (mean, sd, q50, ...) per head."""
        df = self.heads
        df = df[df["stat"] == stat]
        if df.empty:
            raise ValueError(f"this run has no statistic {stat!r}")
        out = np.full((self.manifest["layers"], self.manifest["heads"]), np.nan)
        out[df["layer"].to_numpy(), df["head"].to_numpy()] = df[value].to_numpy(dtype=float)
        return out


def runs_dir() -> Path:
    """The folder of corpus runs: ATTNVIZ_CORPUS_DIR, else ~/.cache/attnviz/corpus."""
    return Path(os.environ.get(RUNS_ENV) or Path.home() / ".cache" / "attnviz" / "corpus").expanduser()


def default_folder(model: str, corpus: Corpus, settings: Settings) -> Path:
    """A run's folder under runs_dir(): the model's and the corpus's names and a hash of corpus and settings."""
    h = hashlib.sha256((fingerprint(corpus) + json.dumps(settings.as_dict(), sort_keys=True)).encode()).hexdigest()
    safe = lambda s: "".join(c if c.isalnum() or c in "-_." else "-" for c in s)[:40]  # noqa: E731
    return runs_dir() / f"{safe(Path(model).name or model)}-{safe(corpus.name)}-{h[:10]}"


def finished_runs(folder=None) -> list[CorpusRun]:
    """The finished runs in the folders under `folder` (default runs_dir()), newest first."""
    root = Path(folder).expanduser() if folder else runs_dir()
    out = []
    for sub in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            out.append(CorpusRun.open(sub))
        except CorpusError:
            continue
    return sorted(out, key=lambda r: r.manifest.get("finished", ""), reverse=True)


def fingerprint(corpus: Corpus) -> str:
    """A hash of the documents in order (sources and texts): a resumed run must read the same corpus."""
    h = hashlib.sha256()
    for source, text in corpus.documents:
        h.update(source.encode("utf-8", "replace") + b"\x00" + text.encode("utf-8", "replace") + b"\x01")
    return h.hexdigest()


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)


def _part(folder: Path, index: int) -> Path:
    return folder / "parts" / f"{index:05d}.npz"


def write_part(folder: Path, index: int, data: bytes) -> None:
    """One batch's partial, written whole or not at all."""
    path = _part(folder, index)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """This process alone runs in `folder` until the block ends; another waits here (locks.one_at_a_time on its LOCK
    file). A folder this process cannot write in (a read-only mount) is not locked: a finished run is read back as it
    is. Where there is no fcntl (Windows), runs are not locked."""
    if folder.exists() and not folder.is_dir():
        raise CorpusError(f"{folder.name[:100]!r} is a file: name a folder for the run's tables")
    if folder.is_dir() and not (folder / MANIFEST).exists() and any(p.name != LOCK for p in folder.iterdir()):
        _prepare(folder, {})  # a folder of other files: refused before a lock file is left in it
    folder.mkdir(parents=True, exist_ok=True)
    with one_at_a_time(folder / LOCK):
        yield


def _finished_same(folder: Path, manifest: dict) -> CorpusRun | None:
    """The run in `folder` if it is finished and the same run (model, settings, corpus) as `manifest`'s."""
    try:
        done = CorpusRun.open(folder)
    except CorpusError:
        return None
    return done if all(done.manifest.get(k) == manifest[k] for k in ("model", "settings", "fingerprint")) else None


def _prepare(folder: Path, manifest: dict) -> None:
    """A new run's folder, or the same run's (resumed); another run's is refused."""
    old_path = folder / MANIFEST
    if folder.exists() and not folder.is_dir():
        raise CorpusError(f"{folder.name[:100]!r} is a file: name a folder for the run's tables")
    if old_path.exists():
        try:
            old = json.loads(old_path.read_text(encoding="utf-8"))
        except ValueError:
            old = {}
        same = all(old.get(k) == manifest[k] for k in ("model", "settings", "fingerprint"))
        if not same:
            raise CorpusError(
                f"{folder.name[:100]!r} holds another run (another model, corpus or settings): name a "
                "new folder (out= in Python, --out on the command line), or delete that one"
            )
    elif folder.exists() and any(p.name != LOCK for p in folder.iterdir()):
        raise CorpusError(
            f"{folder.name[:100]!r} is not empty and holds no run: name a new folder (out= in Python, --out on "
            "the command line)"
        )
    (folder / "parts").mkdir(parents=True, exist_ok=True)


def run(
    corpus: Corpus,
    model: str,
    out: str | Path,
    *,
    executor: str = "embedded",
    settings: Settings | None = None,
    device: str | None = None,
    actors: int = 2,
    threads: int = 1,
    progress: Progress | None = None,
    extras: bool = True,
    engine_of: Callable | None = None,
) -> CorpusRun:
    """Measure every head of `model` over the corpus into the folder `out` (see the module's docstring).

    executor "ray": Ray Data's map_batches with `actors` model-holding actors (a GPU each where there is one, else
    `threads` CPU threads each), on a local Ray started for the run or the cluster RAY_ADDRESS names.
    extras: a decoder's induction, prefix-matching and duplicate-token scores (repeated random sequences), in a run
    of every statistic only (Settings.statistics: a run of some computes those and nothing else).
    engine_of: how this process gets the model (default: `load`; the door passes its kept engine)."""
    if executor not in EXECUTORS:
        raise ValueError(
            f"a corpus run's executor (the command line's --engine) is {' or '.join(EXECUTORS)}, not {executor!r}"
        )
    if actors < 1 or threads < 1:
        raise ValueError("a Ray run needs at least one actor and one thread per actor")
    settings = settings or Settings()
    folder, started = Path(out).expanduser(), time.time()
    engine_of = engine_of or (lambda: load(model, device))
    eng = batched(engine_of(), model) if executor == "embedded" else None  # a model it cannot run: before any folder
    with _locked(folder):
        batches = measure.batches(corpus.documents, settings.batch_chars)
        manifest = _started_manifest(corpus, model, executor, settings, len(batches))
        done = _finished_same(folder, manifest)
        if done is not None:  # finished before (by this process or another): read back, nothing measured again
            if progress:
                progress(1.0, "read back: this run had finished before")
            return done
        return _run(
            eng,
            model,
            folder,
            batches,
            manifest,
            settings,
            (device, actors, threads),
            progress,
            extras,
            engine_of,
            started,
        )


def _run(
    eng: BatchedEngine | None,
    model: str,
    folder: Path,
    batches: list,
    manifest: dict,
    settings: Settings,
    where: tuple[str | None, int, int],
    progress: Progress | None,
    extras: bool,
    engine_of: Callable,
    started: float,
) -> CorpusRun:
    """run's measuring, in its locked folder, on `eng` (embedded) or on Ray (None)."""
    device, actors, threads = where
    _prepare(folder, manifest)
    _write_json(folder / MANIFEST, manifest)
    todo = [b for b in batches if not _part(folder, b.index).exists()]
    total = sum(len(t) for b in batches for _, _, t in b.documents) or 1
    done = total - sum(len(t) for b in todo for _, _, t in b.documents)
    if progress:
        progress(done / total, f"{len(batches) - len(todo)} of {len(batches)} batches already done")
    if eng is not None:
        info = info_of(eng)
        for batch in todo:
            size = sum(len(t) for _, _, t in batch.documents)
            what = f"batch {batch.index + 1} of {len(batches)}"
            part_progress = (
                (lambda d, n, base=done, size=size, what=what: progress((base + size * d / max(n, 1)) / total, what))
                if progress
                else None
            )
            write_part(folder, batch.index, measure.measure(eng, batch, settings, part_progress).to_bytes())
            done += size
    else:
        info = _measure_on_ray(
            folder, model, todo, settings, (device, actors, threads), (done, total, len(batches)), progress
        )
    if not info:  # a resumed Ray run with nothing left to do
        eng = engine_of()
        info = info_of(eng)
    manifest.update(info)
    _write_json(folder / MANIFEST, manifest)
    return finish(
        folder,
        manifest,
        settings,
        (lambda: eng) if eng is not None else engine_of,
        extras and settings.statistics == STATS,
        started,
        progress,
    )


def _started_manifest(corpus: Corpus, model: str, executor: str, settings: Settings, batches: int) -> dict:
    """The manifest a run starts with (status "running"): what it measures, on what, how."""
    return {
        "attnviz": __version__,
        "model": model,
        "status": "running",
        "engine": executor,  # the manifest's name for it, unchanged
        "corpus": {
            "name": corpus.name,
            "described": corpus.described,
            "documents": len(corpus.documents),
            "characters": corpus.characters,
            "skipped": corpus.skipped,
            "skipped_examples": corpus.skipped_examples,
        },
        "fingerprint": fingerprint(corpus),
        "settings": settings.as_dict(),
        "batches": batches,
        "stats": list(settings.statistics),
    }


def _measure_on_ray(
    folder: Path,
    model: str,
    todo: list,
    settings: Settings,
    where: tuple[str | None, int, int],
    counts: tuple[int, int, int],
    progress: Progress | None,
) -> dict:
    """The batches left measured by Ray Data's actors (`where`: device, actors, threads per actor), each part written
    as it comes back (`counts`: characters done, characters in all, the run's batches, for the progress); what the
    actors' model is (info_of), or {} when nothing was left."""
    from attnviz.corpus import on_ray

    device, actors, threads = where
    done, total, count = counts
    info: dict = {}
    sizes = {b.index: sum(len(t) for _, _, t in b.documents) for b in todo}
    for index, data, about in on_ray.measure_all(model, todo, settings, device=device, actors=actors, threads=threads):
        write_part(folder, index, data)
        info = about
        done += sizes[index]
        if progress:
            progress(done / total, f"batch {index + 1} of {count} (Ray)")
    return info


def merged_parts(folder: Path, n: int, settings: Settings) -> tuple[Partial, dict]:
    """Every part, merged in batch order; each part's windows are written to texts.parquet and text_stats.parquet
    as it is read, so that what stays in memory is the windows' statistics and the candidates, never their texts.
    Returns the merged partial (without texts) and the counts."""
    merged, counts = None, {"windows": 0, "tokens": 0, "documents_cut": 0}
    with tables.Appender(folder / "texts.parquet") as texts, tables.Appender(folder / "text_stats.parquet") as stats:
        for index in range(n):
            part = Partial.from_bytes(_part(folder, index).read_bytes())
            if part.texts:
                texts.add(tables.texts_table(part.texts))
                stats.add(tables.text_stats_table(part.texts, part.stats, settings.statistics))
            counts["windows"] += len(part.texts)
            counts["tokens"] += sum(len(t["tokens"]) for t in part.texts)
            counts["documents_cut"] += sum(1 for t in part.texts if t["window"] == 1)
            part.texts = []
            merged = part if merged is None else measure.merge(merged, part, settings)
    if merged is None:
        raise CorpusError("the run has no batches")
    return merged, counts


def _extras(engine_of: Callable, kind: str) -> dict:
    """A decoder's induction, prefix-matching and duplicate-token scores: name -> (mean, sd, count)."""
    from attnviz.interventions import induction_scores, runs

    if kind != "causal":
        return {}
    eng = engine_of()
    if not runs.can_intervene(eng):
        return {}
    ind = induction_scores.run(eng)
    return {name: (v.mean(0).numpy(), v.std(0).numpy(), v.shape[0]) for name, v in ind.each.items()}


def finish(
    folder: Path,
    manifest: dict,
    settings: Settings,
    engine_of: Callable,
    extras: bool,
    started: float,
    progress: Progress | None = None,
) -> CorpusRun:
    """The tables from the parts, and the manifest marked finished."""
    if progress:
        progress(0.99, "writing the tables")
    merged, counts = merged_parts(folder, manifest["batches"], settings)
    if not counts["windows"]:
        raise CorpusError("no window of the corpus had tokens this model reads")
    _, _, n_l, n_h = merged.stats.shape
    more = _extras(engine_of, manifest["kind"]) if extras else {}
    tables.write(tables.heads_table(merged.stats, settings, more), folder / "heads.parquet")
    tables.write(tables.examples_table(merged, settings), folder / "examples.parquet")
    manifest.update(
        {
            "status": "finished",
            "layers": n_l,
            "heads": n_h,
            "extras": sorted(more),
            "counts": {**counts, "sampled_queries": int(len(merged.sample_priority))},
            "ranges": {s: tables.value_range(s, settings) for s in settings.statistics},
            "seconds": round(time.time() - started, 2),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "python": sys.version.split()[0],
        }
    )
    _write_json(folder / MANIFEST, manifest)
    if progress:
        progress(1.0, "done")
    return CorpusRun(folder, manifest)


def read(path, text_column: str = "text") -> Corpus:
    """The corpus at `path` (readers.read), or a list of texts (readers.from_texts)."""
    if isinstance(path, list | tuple):
        return readers.from_texts(path)
    return path if isinstance(path, Corpus) else readers.read(path, text_column)
