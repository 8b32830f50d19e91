"""The per-batch function of a corpus run: a batch of documents in, its partial results out.

Every engine (the embedded loop, Ray Data's actors) calls `measure` and nothing else, so both compute the same
numbers. A document is cut into windows of at most `Settings.window` tokens (tokens.Tokenizer.cut: at a word's
start); each window is one text, measured exactly as the Model overview measures a text (attnviz.blocks: the same
row values, averaged the same way). Windows go through the model in sub-batches whose weights stay under
`Settings.batch_mb` (every layer's weights of one sub-batch: the run's memory beyond the model), and what is kept is:
- each window's statistics, (L, H) per statistic: a corpus statistic's distribution is over windows;
- the top `top` queries of every head and statistic (a query's value is its row's: the values a window averages),
  with the `keys` keys each looked at most;
- a sample of `sample` queries, the same for every head: those whose hash of (document, window, query, seed) is
  lowest, so that a merge of samples is a sample (the decile examples are drawn from it).
No (texts x layers x heads x N x N) array is held: a sub-batch's weights are read and dropped.
"""

from __future__ import annotations

import io
import json
from dataclasses import asdict, dataclass

import numpy as np
import torch

from attnviz.blocks import STATS, BlockPass, log_weights

ID_COLUMNS = ("doc", "window", "query")


@dataclass(frozen=True)
class Settings:
    """What a corpus run measures and how (written in its manifest; a resumed run must have the same)."""

    window: int = 256  # tokens per window, special tokens included
    top: int = 8  # top queries kept per head and statistic
    sample: int = 256  # queries sampled for the decile examples (the same queries for every head)
    keys: int = 8  # keys kept per example query: those it looked at most
    bins: int = 40  # histogram bins per statistic
    confidence_excludes: str = "end"
    batch_chars: int = 50_000  # characters of documents per batch (a batch: one unit of work, one part on disk)
    batch_mb: int = 256  # every layer's weights of one sub-batch stay under this
    seed: int = 0

    def __post_init__(self) -> None:
        least = {"window": 4, "top": 1, "sample": 10, "keys": 1, "bins": 2, "batch_chars": 1, "batch_mb": 1}
        for name, low in least.items():
            if not isinstance(getattr(self, name), int) or getattr(self, name) < low:
                raise ValueError(f"{name} must be a whole number of at least {low}, not {getattr(self, name)!r}")
        confidence_keys_ok = ("end", "specials", "none")
        if self.confidence_excludes not in confidence_keys_ok:
            raise ValueError(f"confidence can leave out {', '.join(confidence_keys_ok)}, not "
                             f"{self.confidence_excludes!r}")  # fmt: skip

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Batch:
    """One unit of work: its index in the run and its documents (document id, source, text)."""

    index: int
    documents: list[tuple[int, str, str]]


def batches(documents: list[tuple[str, str]], batch_chars: int) -> list[Batch]:
    """The run's batches, in order: documents in turn until a batch holds `batch_chars` characters."""
    out, current, size = [], [], 0
    for doc, (source, text) in enumerate(documents):
        if current and size + len(text) > batch_chars:
            out.append(Batch(len(out), current))
            current, size = [], 0
        current.append((doc, source, text))
        size += len(text)
    if current:
        out.append(Batch(len(out), current))
    return out


def windows_of(engine, text: str, window: int) -> list:
    """The text as the model encodes it, in windows of at most `window` tokens (one when it fits)."""
    window = min(window, engine.max_tokens)
    try:
        enc = engine.tokenizer.encode(text, window)
    except ValueError:  # nothing the model can read in this text
        return []
    if not enc.truncated:
        return [enc]
    out = []
    for piece in engine.tokenizer.cut(text, window):
        try:
            out.append(engine.tokenizer.encode(piece, window))  # a piece is re-tokenized alone: at most `window` tokens
        except ValueError:  # nothing the model can read in this piece
            continue
    return out


def priority(doc: np.ndarray, window: np.ndarray, query: np.ndarray, seed: int) -> np.ndarray:
    """A query's sampling priority in [0, 1): a hash (splitmix64) of its ids and the seed, the same on every
    machine; a run's sample is the queries of lowest priority."""
    with np.errstate(over="ignore"):
        x = (doc.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ (window.astype(np.uint64) << np.uint64(20))
        x = x ^ query.astype(np.uint64) ^ (np.uint64(seed) * np.uint64(0xD1B54A32D1B54A33))
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)


@dataclass
class Partial:
    """A batch's results (see the module's docstring); `merge` combines several, `to_bytes` / `from_bytes` carry one.

    texts: one dict per window (doc, window, source, text, tokens, special); stats (W, S, L, H): each window's
    statistics in STATS order; top_*: (S, L, H, k) values and ids (doc, window, query) with (S, L, H, k, K) keys and
    weights; sample_*: (Q,) priorities and ids, (Q, S, L, H) values, (Q, L, H, K) keys and weights."""

    texts: list[dict]
    stats: np.ndarray
    top_value: np.ndarray
    top_ids: np.ndarray  # (S, L, H, k, 3)
    top_keys: np.ndarray
    top_weights: np.ndarray
    sample_priority: np.ndarray
    sample_ids: np.ndarray  # (Q, 3)
    sample_value: np.ndarray
    sample_keys: np.ndarray
    sample_weights: np.ndarray

    ARRAYS = ("stats", "top_value", "top_ids", "top_keys", "top_weights", "sample_priority", "sample_ids",
              "sample_value", "sample_keys", "sample_weights")  # fmt: skip

    def to_bytes(self) -> bytes:
        """The partial as one .npz (numbers only: read back with allow_pickle=False) holding the texts as JSON."""
        buf = io.BytesIO()
        texts = np.frombuffer(json.dumps(self.texts, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)
        np.savez(buf, texts=texts, **{name: getattr(self, name) for name in self.ARRAYS})
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> Partial:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            return cls(json.loads(z["texts"].tobytes().decode("utf-8")), *(z[name] for name in cls.ARRAYS))


def _empty(n_s: int, n_l: int, n_h: int, settings: Settings) -> Partial:
    kk = settings.keys
    return Partial(
        [], np.zeros((0, n_s, n_l, n_h), np.float32),
        np.full((n_s, n_l, n_h, 0), -np.inf, np.float32), np.zeros((n_s, n_l, n_h, 0, 3), np.int64),
        np.zeros((n_s, n_l, n_h, 0, kk), np.int32), np.zeros((n_s, n_l, n_h, 0, kk), np.float32),
        np.zeros(0, np.float64), np.zeros((0, 3), np.int64), np.zeros((0, n_s, n_l, n_h), np.float32),
        np.zeros((0, n_l, n_h, kk), np.int32), np.zeros((0, n_l, n_h, kk), np.float32),
    )  # fmt: skip


def _keep_top(value, ids, keys, weights, k: int):
    """The k highest values along axis 3 (ties: the earlier candidate first, so merges are deterministic)."""
    order = np.argsort(-value, axis=3, kind="stable")[..., :k]
    take = lambda a: np.take_along_axis(a, order.reshape(order.shape + (1,) * (a.ndim - 4)), axis=3)  # noqa: E731
    return take(value), take(ids), take(keys), take(weights)


def _keep_sample(priority_, ids, value, keys, weights, n: int):
    """The n candidates of lowest priority (ties: ids in order)."""
    order = np.lexsort((ids[:, 2], ids[:, 1], ids[:, 0], priority_))[:n]
    return priority_[order], ids[order], value[order], keys[order], weights[order]


def merge(a: Partial, b: Partial, settings: Settings) -> Partial:
    """Two partials as one (a's candidates before b's on ties: merge in batch order)."""
    top = _keep_top(np.concatenate([a.top_value, b.top_value], 3), np.concatenate([a.top_ids, b.top_ids], 3),
                    np.concatenate([a.top_keys, b.top_keys], 3), np.concatenate([a.top_weights, b.top_weights], 3),
                    settings.top)  # fmt: skip
    sample = _keep_sample(*(np.concatenate([getattr(a, f), getattr(b, f)]) for f in
                            ("sample_priority", "sample_ids", "sample_value", "sample_keys", "sample_weights")),
                          settings.sample)  # fmt: skip
    return Partial(a.texts + b.texts, np.concatenate([a.stats, b.stats]), *top, *sample)


def sub_batches(encoded: list, n_layers: int, n_heads: int, batch_mb: int) -> list[list[int]]:
    """Indices of windows in turn, as many per sub-batch as keep every layer's padded weights under batch_mb."""
    out, current, longest = [], [], 0
    for i, enc in enumerate(encoded):
        n = max(longest, len(enc.ids))
        if current and (len(current) + 1) * n_layers * n_heads * n * n * 4 > batch_mb * 2**20:
            out.append(current)
            current, n = [], len(enc.ids)
        current.append(i)
        longest = n
    if current:
        out.append(current)
    return out


def _rows(weights: tuple[torch.Tensor, ...], b: int, enc, kind: str, settings: Settings):
    """One window's row values (S, L, H, n) float32 with its statistics (S, L, H), and each row's top keys and
    their weights (L, H, n, K)."""
    n, n_l = len(enc.ids), len(weights)
    n_h = weights[0].shape[1]
    blocks = BlockPass(1, n_h, enc.axis, kind, confidence_excludes=settings.confidence_excludes)
    rows = torch.empty(len(STATS), n_l, n_h, n)
    kk = min(settings.keys, n)
    keys = torch.zeros(n_l, n_h, n, settings.keys, dtype=torch.int32)
    kw = torch.zeros(n_l, n_h, n, settings.keys)
    for layer in range(n_l):
        w = weights[layer][b, :, :n, :n].float()  # (H, n, n): this window's own weights
        values = blocks.row_values(slice(0, n), w, log_weights(w), torch.zeros(n_h, n))
        for i, name in enumerate(STATS):
            rows[i, layer] = values[name]
        top = torch.topk(w, kk, dim=-1)
        keys[layer, :, :, :kk], kw[layer, :, :, :kk] = top.indices.int(), top.values
    # a statistic of the window: its rows averaged as blocks.BlockPass.stats does (prev, next over n - 1 rows)
    counts = torch.tensor([max(1, n - 1 if s in ("prev", "next") else n) for s in STATS], dtype=torch.float64)
    stats = (rows.nansum(-1).double() / counts[:, None, None]).float()
    return rows, stats, keys, kw


def measure(engine, batch: Batch, settings: Settings, progress=None) -> Partial:
    """The partial results of one batch on one engine (an HFEngine: `batch_weights`); `progress(done, total)` is told
    after each sub-batch (windows)."""
    n_l, n_h, n_s = engine.n_layers, engine.n_heads, len(STATS)
    kind = engine.kinds[0]
    windows = [(doc, i, source, enc) for doc, source, text in batch.documents
               for i, enc in enumerate(windows_of(engine, text, settings.window))]  # fmt: skip
    out = _empty(n_s, n_l, n_h, settings)
    done = 0
    for group in sub_batches([w[3] for w in windows], n_l, n_h, settings.batch_mb):
        weights = engine.batch_weights([windows[i][3].ids for i in group])
        stats, values, tids, tkeys, tw = [], [], [], [], []
        texts = []
        for b, i in enumerate(group):
            doc, win, source, enc = windows[i]
            rows, window_stats, keys, kw = _rows(weights, b, enc, kind, settings)
            n = len(enc.ids)
            stats.append(window_stats.numpy())
            values.append(rows.numpy())
            tids.append(np.stack([np.full(n, doc), np.full(n, win), np.arange(n)], 1))
            tkeys.append(keys.numpy())
            tw.append(kw.numpy())
            texts.append({"doc": doc, "window": win, "source": source, "text": enc.axis.text,
                          "tokens": list(enc.axis.tokens), "special": list(enc.axis.special)})  # fmt: skip
        del weights
        value = np.concatenate(values, -1)  # (S, L, H, Q): every query of the sub-batch
        ids = np.concatenate(tids)  # (Q, 3)
        keys = np.concatenate(tkeys, 2)  # (L, H, Q, K)
        kw = np.concatenate(tw, 2)
        q = value.shape[-1]
        ranked = np.where(np.isnan(value), -np.inf, value)
        bshape = (n_s, n_l, n_h, q)
        sub = Partial(
            texts, np.stack(stats),
            *_keep_top(ranked, np.broadcast_to(ids, (*bshape, 3)), np.broadcast_to(keys, (n_s, *keys.shape)),
                       np.broadcast_to(kw, (n_s, *kw.shape)), settings.top),
            *_keep_sample(priority(ids[:, 0], ids[:, 1], ids[:, 2], settings.seed), ids,
                          value.transpose(3, 0, 1, 2), keys.transpose(2, 0, 1, 3), kw.transpose(2, 0, 1, 3),
                          settings.sample),
        )  # fmt: skip
        out = merge(out, sub, settings)
        done += len(group)
        if progress:
            progress(done, len(windows))
    return out
