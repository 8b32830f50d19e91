"""A corpus run's tables, from its merged partial: per-head statistics and examples, as Parquet (pandas, DuckDB).

- heads.parquet: one row per (statistic, layer, head), 0-based: over the windows, mean, sd, min, quantiles (q05,
  q25, q50, q75, q95: numpy's linear interpolation), max, the count, and a histogram (`hist`: counts in
  `bins` equal bins over the statistic's range, `lo` to `hi`; a value outside is counted in the end bin). A decoder
  adds its induction, prefix-matching and duplicate-token scores (rows with only mean, sd and count: they are
  measured on repeated random sequences, not on the corpus).
- examples.parquet: one row per example: statistic, layer, head, `kind` "top" (rank 0 the highest value of any
  query in the corpus) or "decile" (from the run's sample of queries: `per_decile` queries from the middle of
  each tenth of the sample ranked by that head's value), the value, where it is (doc, window, query) and the
  keys the query looked at most with their weights.
- texts.parquet: one row per window (doc, window, source, text, its tokens and which are special).
- text_stats.parquet: one row per (window, layer, head): every statistic of that window (what the Model overview
  shows for that text).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from attnviz.blocks import STATS
from attnviz.corpus.measure import Partial, Settings

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
PER_DECILE = 2
SHARES = ("cls", "sep", "punct", "prev", "next", "self", "confidence", "first")  # each in [0, 1]


def value_range(stat: str, settings: Settings) -> tuple[float, float]:
    """The histogram's range of a statistic: a share in [0, 1], entropy up to ln(window), distance up to window - 1."""
    if stat == "entropy":
        return 0.0, math.log(settings.window)
    if stat == "distance":
        return 0.0, float(settings.window - 1)
    return 0.0, 1.0


def heads_table(stats: np.ndarray, settings: Settings, extras: dict[str, tuple[np.ndarray, np.ndarray, int]]
                ) -> pa.Table:  # fmt: skip
    """(W, S, L, H) window statistics -> one row per (statistic, layer, head); extras: name -> (mean, sd, count)."""
    w, _, n_l, n_h = stats.shape
    cols: dict[str, list] = {k: [] for k in ("stat", "layer", "head", "mean", "sd", "min", *(f"q{round(q * 100):02d}"
                             for q in QUANTILES), "max", "count", "lo", "hi", "hist")}  # fmt: skip
    for s, name in enumerate(STATS):
        lo, hi = value_range(name, settings)
        values = stats[:, s].astype(np.float64)  # (W, L, H)
        qs = np.quantile(values, QUANTILES, axis=0)  # (5, L, H)
        idx = np.clip(((values - lo) / (hi - lo) * settings.bins).astype(np.int64), 0, settings.bins - 1)
        for layer in range(n_l):
            for head in range(n_h):
                v = values[:, layer, head]
                cols["stat"].append(name)
                cols["layer"].append(layer)
                cols["head"].append(head)
                cols["mean"].append(float(v.mean()))
                cols["sd"].append(float(v.std(ddof=1)) if w > 1 else 0.0)
                cols["min"].append(float(v.min()))
                for q, row in zip(QUANTILES, qs, strict=True):
                    cols[f"q{round(q * 100):02d}"].append(float(row[layer, head]))
                cols["max"].append(float(v.max()))
                cols["count"].append(w)
                cols["lo"].append(lo)
                cols["hi"].append(hi)
                cols["hist"].append(np.bincount(idx[:, layer, head], minlength=settings.bins).tolist())
    for name, (mean, sd, count) in extras.items():
        for layer in range(n_l):
            for head in range(n_h):
                row = {"stat": name, "layer": layer, "head": head, "mean": float(mean[layer, head]),
                       "sd": float(sd[layer, head]), "count": count}  # fmt: skip
                for k in cols:
                    cols[k].append(row.get(k))
    return pa.table(cols)


def examples_table(merged: Partial, settings: Settings) -> pa.Table:
    """The top queries of every head and statistic, and `PER_DECILE` per decile of the sample (see the docstring)."""
    cols: dict[str, list] = {k: [] for k in ("stat", "layer", "head", "kind", "rank", "decile", "value", "doc",
                                             "window", "query", "keys", "weights")}  # fmt: skip

    def add(stat, layer, head, kind, rank, decile, value, ids, keys, weights) -> None:
        for k, v in zip(cols, (stat, layer, head, kind, rank, decile, float(value), int(ids[0]), int(ids[1]),
                               int(ids[2]), keys.tolist(), weights.tolist()), strict=True):  # fmt: skip
            cols[k].append(v)

    n_s, n_l, n_h, _ = merged.top_value.shape
    for s, name in enumerate(STATS):
        for layer in range(n_l):
            for head in range(n_h):
                for r in range(merged.top_value.shape[3]):
                    value = merged.top_value[s, layer, head, r]
                    if np.isfinite(value):
                        add(name, layer, head, "top", r, None, value, merged.top_ids[s, layer, head, r],
                            merged.top_keys[s, layer, head, r], merged.top_weights[s, layer, head, r])  # fmt: skip
                values = merged.sample_value[:, s, layer, head]
                ok = np.flatnonzero(np.isfinite(values))
                ranked = ok[np.argsort(values[ok], kind="stable")]
                m = len(ranked)
                for d in range(10):
                    band = ranked[d * m // 10 : (d + 1) * m // 10]
                    middle = len(band) // 2 - PER_DECILE // 2
                    for rank, q in enumerate(band[max(0, middle) : max(0, middle) + PER_DECILE]):
                        add(name, layer, head, "decile", rank, d, values[q], merged.sample_ids[q],
                            merged.sample_keys[q, layer, head], merged.sample_weights[q, layer, head])  # fmt: skip
    return pa.table(cols)


def texts_table(texts: list[dict]) -> pa.Table:
    """One row per window."""
    cols = {k: [t[k] for t in texts] for k in ("doc", "window", "source", "text", "tokens", "special")}
    cols["n_tokens"] = [len(t["tokens"]) for t in texts]
    return pa.table(cols)


def text_stats_table(texts: list[dict], stats: np.ndarray) -> pa.Table:
    """One row per (window, layer, head) with every statistic (float32)."""
    w, _, n_l, n_h = stats.shape
    doc = np.array([t["doc"] for t in texts], np.int64)
    window = np.array([t["window"] for t in texts], np.int64)
    per = n_l * n_h
    cols = {
        "doc": np.repeat(doc, per), "window": np.repeat(window, per),
        "layer": np.tile(np.repeat(np.arange(n_l), n_h), w), "head": np.tile(np.arange(n_h), w * n_l),
    }  # fmt: skip
    for s, name in enumerate(STATS):
        cols[name] = stats[:, s].reshape(-1)
    return pa.table(cols)


def write(table: pa.Table, path: Path) -> None:
    """A table written whole or not at all (a temporary file renamed)."""
    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)


class Appender:
    """A Parquet file written a table at a time (one schema: the first table's), whole or not at all: the rows go
    to a temporary file renamed on a clean exit; an empty one is written with no rows."""

    def __init__(self, path: Path) -> None:
        self.path, self.tmp, self.writer = path, path.with_suffix(".tmp"), None

    def add(self, table: pa.Table) -> None:
        """Append a table's rows."""
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.tmp, table.schema)
        self.writer.write_table(table.cast(self.writer.schema))

    def __enter__(self) -> Appender:
        return self

    def __exit__(self, kind, *_) -> None:
        if self.writer is not None:
            self.writer.close()
            if kind is None:
                self.tmp.replace(self.path)
            else:
                self.tmp.unlink(missing_ok=True)
