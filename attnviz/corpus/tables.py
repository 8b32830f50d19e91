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
from collections.abc import Sequence
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


def heads_table(
    stats: np.ndarray, settings: Settings, extras: dict[str, tuple[np.ndarray, np.ndarray, int]]
) -> pa.Table:
    """(W, S, L, H) window statistics -> one row per (statistic, layer, head); extras: name -> (mean, sd, count)."""
    w, _, n_l, n_h = stats.shape
    cols: dict[str, list] = {
        k: []
        for k in (
            "stat",
            "layer",
            "head",
            "mean",
            "sd",
            "min",
            *(f"q{round(q * 100):02d}" for q in QUANTILES),
            "max",
            "count",
            "lo",
            "hi",
            "hist",
        )
    }
    for s, name in enumerate(settings.statistics):
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
                row = {
                    "stat": name,
                    "layer": layer,
                    "head": head,
                    "mean": float(mean[layer, head]),
                    "sd": float(sd[layer, head]),
                    "count": count,
                }
                for k in cols:
                    cols[k].append(row.get(k))
    return pa.table(cols)


def _top_parts(merged: Partial, grid: Sequence[np.ndarray]) -> list[dict]:
    """The top candidates of every statistic and head, every finite one, ranked: one part per rank."""
    parts = []
    for r in range(merged.top_value.shape[-1]):
        value = merged.top_value[..., r]
        ok = np.isfinite(value)
        parts.append(
            {
                "s": grid[0][ok],
                "layer": grid[1][ok],
                "head": grid[2][ok],
                "kind": "top",
                "rank": r,
                "decile": None,
                "value": value[ok],
                "ids": merged.top_ids[..., r, :][ok],
                "keys": merged.top_keys[..., r, :][ok],
                "weights": merged.top_weights[..., r, :][ok],
            }
        )
    return parts


def _decile_parts(merged: Partial, grid: Sequence[np.ndarray]) -> list[dict]:
    """The sample ranked per head and statistic (NaN last), PER_DECILE queries from the middle of each tenth."""
    values = merged.sample_value  # (Q, S, L, H)
    if not len(values):
        return []
    parts = []
    order = np.argsort(np.where(np.isfinite(values), values, np.inf), axis=0, kind="stable")
    m = np.isfinite(values).sum(0)  # (S, L, H)
    keys = merged.sample_keys.transpose(1, 2, 0, 3)  # (L, H, Q, K)
    weights = merged.sample_weights.transpose(1, 2, 0, 3)
    for d in range(10):
        lo, hi = d * m // 10, (d + 1) * m // 10
        start = lo + np.maximum(0, (hi - lo) // 2 - PER_DECILE // 2)
        for r in range(PER_DECILE):
            pos = start + r
            ok = pos < hi
            q = np.take_along_axis(order, np.minimum(pos, len(values) - 1)[None], 0)[0]  # (S, L, H)
            s_, l_, h_, q_ = grid[0][ok], grid[1][ok], grid[2][ok], q[ok]
            parts.append(
                {
                    "s": s_,
                    "layer": l_,
                    "head": h_,
                    "kind": "decile",
                    "rank": r,
                    "decile": d,
                    "value": values[q_, s_, l_, h_],
                    "ids": merged.sample_ids[q_],
                    "keys": keys[l_, h_, q_],
                    "weights": weights[l_, h_, q_],
                }
            )
    return parts


def examples_table(merged: Partial, settings: Settings) -> pa.Table:
    """The top queries of every head and statistic, and `PER_DECILE` per decile of the sample (see the docstring)."""
    n_s, n_l, n_h, _ = merged.top_value.shape
    grid = np.meshgrid(np.arange(n_s), np.arange(n_l), np.arange(n_h), indexing="ij")  # (S, L, H) each
    parts = _top_parts(merged, grid) + _decile_parts(merged, grid)
    n_keys = settings.keys
    cols = {
        "stat": np.concatenate([np.asarray(settings.statistics)[p["s"]] for p in parts]),
        "layer": np.concatenate([p["layer"] for p in parts]),
        "head": np.concatenate([p["head"] for p in parts]),
        "kind": np.concatenate([np.full(len(p["s"]), p["kind"]) for p in parts]),
        "rank": np.concatenate([np.full(len(p["s"]), p["rank"]) for p in parts]),
        "decile": pa.array(
            np.concatenate([np.full(len(p["s"]), -1 if p["decile"] is None else p["decile"]) for p in parts]),
            mask=np.concatenate([np.full(len(p["s"]), p["decile"] is None) for p in parts]),
        ),
        "value": np.concatenate([p["value"] for p in parts]).astype(np.float64),
    }
    ids = np.concatenate([p["ids"] for p in parts]).reshape(-1, 3)
    cols.update({"doc": ids[:, 0], "window": ids[:, 1], "query": ids[:, 2]})
    keys = np.concatenate([p["keys"] for p in parts]).reshape(-1, n_keys)
    weights = np.concatenate([p["weights"] for p in parts]).reshape(-1, n_keys)
    cols["keys"] = pa.ListArray.from_arrays(np.arange(0, keys.size + 1, n_keys, dtype=np.int32), keys.reshape(-1))
    cols["weights"] = pa.ListArray.from_arrays(
        np.arange(0, keys.size + 1, n_keys, dtype=np.int32), weights.reshape(-1).astype(np.float64)
    )
    table = pa.table(cols)
    # rows: statistic in STATS order (Settings.statistics), layer, head, the top before the deciles, decile, rank
    order = np.lexsort(
        (
            cols["rank"],
            table["decile"].fill_null(-1).to_numpy(),
            cols["kind"] == "decile",
            cols["head"],
            cols["layer"],
            np.concatenate([p["s"] for p in parts]),
        )
    )
    return table.take(order)


def texts_table(texts: list[dict]) -> pa.Table:
    """One row per window."""
    cols = {k: [t[k] for t in texts] for k in ("doc", "window", "source", "text", "tokens", "special")}
    cols["n_tokens"] = [len(t["tokens"]) for t in texts]
    return pa.table(cols)


def text_stats_table(texts: list[dict], stats: np.ndarray, names: tuple[str, ...] = STATS) -> pa.Table:
    """One row per (window, layer, head) with every statistic of the run (`names`, float32)."""
    w, _, n_l, n_h = stats.shape
    doc = np.array([t["doc"] for t in texts], np.int64)
    window = np.array([t["window"] for t in texts], np.int64)
    per = n_l * n_h
    cols = {
        "doc": np.repeat(doc, per),
        "window": np.repeat(window, per),
        "layer": np.tile(np.repeat(np.arange(n_l), n_h), w),
        "head": np.tile(np.arange(n_h), w * n_l),
    }
    for s, name in enumerate(names):
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
        self.path, self.tmp = path, path.with_suffix(".tmp")
        self.writer: pq.ParquetWriter | None = None

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
