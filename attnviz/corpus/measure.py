"""The per-batch function of a corpus run: a batch of documents in, its partial results out.

Every engine (the embedded loop, Ray Data's actors) calls `measure` and nothing else, so both compute the same
numbers. A document is cut into windows of at most `Settings.window` tokens (tokens.Tokenizer.cut: at a word's
start); each window is one text, measured exactly as the Model overview measures a text (attnviz.blocks: the same
row values, averaged the same way). Windows go through the model in sub-batches whose weights stay under
`Settings.batch_mb` (every layer's weights of one sub-batch: the run's memory beyond the model), and what is kept is:
- each window's statistics, (L, H) per statistic: a corpus statistic's distribution is over windows;
- the top `top` queries of every head and statistic (a query's value is its row's: the values a window averages),
  with the `keys` keys each looked at most (a decoder's forced first two queries, blocks.FORCED, are never one);
- a sample of `sample` queries, the same for every head: those whose hash of (document, window, query, seed) is
  lowest, so that a merge of samples is a sample (the decile examples are drawn from it).
No (texts x layers x heads x N x N) array is held: a sub-batch's weights are read and dropped.
"""

from __future__ import annotations

import io
import json
from dataclasses import asdict, dataclass
from types import SimpleNamespace

import numpy as np
import torch

from attnviz.blocks import STATS, confidence_keys, counted, forced_of, key_columns, row_values
from attnviz.engines.base import BatchedEngine

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
    batch_mb: int = 128  # every layer's weights of one sub-batch stay under this
    seed: int = 0
    statistics: tuple[str, ...] = STATS  # the statistics computed (in STATS order whatever order they are asked in)

    def __post_init__(self) -> None:
        least = {"window": 4, "top": 1, "sample": 10, "keys": 1, "bins": 2, "batch_chars": 1, "batch_mb": 1}
        for name, low in least.items():
            if not isinstance(getattr(self, name), int) or getattr(self, name) < low:
                raise ValueError(f"{name} must be a whole number of at least {low}, not {getattr(self, name)!r}")
        confidence_keys_ok = ("end", "specials", "none")
        if self.confidence_excludes not in confidence_keys_ok:
            raise ValueError(
                f"confidence can leave out {', '.join(confidence_keys_ok)}, not {self.confidence_excludes!r}"
            )
        asked = [self.statistics] if isinstance(self.statistics, str) else list(self.statistics)
        unknown = [s for s in asked if s not in STATS]
        if unknown or not asked:
            raise ValueError(
                f"the statistics are {', '.join(STATS)}; not {', '.join(map(repr, unknown)) or 'none of them'}"
            )
        object.__setattr__(self, "statistics", tuple(s for s in STATS if s in asked))

    def as_dict(self) -> dict:
        """The settings as the manifest writes them (every statistic, the default, is not written: a run's folder
        and manifest are those of a run made before statistics could be chosen)."""
        out = asdict(self)
        if self.statistics == STATS:
            del out["statistics"]
        else:
            out["statistics"] = list(self.statistics)
        return out


@dataclass
class Batch:
    """One unit of work: its index in the run and its documents (document id, source, text)."""

    index: int
    documents: list[tuple[int, str, str]]


def batches(documents: list[tuple[str, str]], batch_chars: int) -> list[Batch]:
    """The run's batches, in order: documents in turn until a batch holds `batch_chars` characters."""
    out: list[Batch] = []
    current: list[tuple[int, str, str]] = []
    size = 0
    for doc, (source, text) in enumerate(documents):
        if current and size + len(text) > batch_chars:
            out.append(Batch(len(out), current))
            current, size = [], 0
        current.append((doc, source, text))
        size += len(text)
    if current:
        out.append(Batch(len(out), current))
    return out


def windows_of(engine: BatchedEngine, text: str, window: int) -> list:
    """The text as the model encodes it, in windows of at most `window` tokens (one when it fits)."""
    window = min(window, engine.max_tokens)
    try:
        enc = engine.tokenizer.encode_whole(text)
    except ValueError:  # nothing the model can read in this text
        return []
    if len(enc.ids) <= window:
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
    statistics in the settings' order (Settings.statistics); top_*: (S, L, H, k) values and ids (doc, window,
    query) with (S, L, H, k, K) keys and weights; sample_*: (Q,) priorities and ids, (Q, S, L, H) values,
    (Q, L, H, K) keys and weights."""

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

    ARRAYS = (
        "stats",
        "top_value",
        "top_ids",
        "top_keys",
        "top_weights",
        "sample_priority",
        "sample_ids",
        "sample_value",
        "sample_keys",
        "sample_weights",
    )

    def to_bytes(self) -> bytes:
        """The partial as one .npz (numbers only: read back with allow_pickle=False) holding the texts as JSON."""
        buf = io.BytesIO()
        texts = np.frombuffer(json.dumps(self.texts, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)
        np.savez(buf, texts=texts, **{name: getattr(self, name) for name in self.ARRAYS})
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> Partial:
        """A partial from `to_bytes`'s bytes."""
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            return cls(json.loads(z["texts"].tobytes().decode("utf-8")), *(z[name] for name in cls.ARRAYS))


def _empty(n_s: int, n_l: int, n_h: int, settings: Settings) -> Partial:
    kk = settings.keys
    return Partial(
        [],
        np.zeros((0, n_s, n_l, n_h), np.float32),
        np.full((n_s, n_l, n_h, 0), -np.inf, np.float32),
        np.zeros((n_s, n_l, n_h, 0, 3), np.int64),
        np.zeros((n_s, n_l, n_h, 0, kk), np.int32),
        np.zeros((n_s, n_l, n_h, 0, kk), np.float32),
        np.zeros(0, np.float64),
        np.zeros((0, 3), np.int64),
        np.zeros((0, n_s, n_l, n_h), np.float32),
        np.zeros((0, n_l, n_h, kk), np.int32),
        np.zeros((0, n_l, n_h, kk), np.float32),
    )


Arrays4 = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _ranked(value: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Indices along the last axis of `value` (..., C), highest first, NaN last; equal values by TIES: one query
    per document in turn (each document's earliest, by window then position, in document order; then each one's
    second, and so on). ids (..., C, 3) or (C, 3): document, window, position."""
    v = np.where(np.isnan(value), -np.inf, value)
    doc, window, pos = (np.broadcast_to(ids[..., i], v.shape) for i in range(3))
    first = np.lexsort((pos, window, doc, -v), axis=-1)  # by value, then document: each run of equal (value, doc)
    vs, ds = np.take_along_axis(v, first, -1), np.take_along_axis(doc, first, -1)
    at = np.arange(v.shape[-1])
    new = np.ones(v.shape, bool)
    new[..., 1:] = (vs[..., 1:] != vs[..., :-1]) | (ds[..., 1:] != ds[..., :-1])
    turn = np.empty(v.shape, np.int64)  # a query's place among its document's queries of the same value
    np.put_along_axis(turn, first, at - np.maximum.accumulate(np.where(new, at, 0), axis=-1), -1)
    return np.lexsort((pos, window, doc, turn, -v), axis=-1)


def _keep_top(value, ids, keys, weights, k: int) -> Arrays4:
    """The k highest values along axis 3; ties by the stated rule (TIES), whatever order the candidates came in."""
    order = _ranked(value, ids)[..., :k]
    take = lambda a: np.take_along_axis(a, order.reshape(order.shape + (1,) * (a.ndim - 4)), axis=3)  # noqa: E731
    return take(value), take(ids), take(keys), take(weights)


def _keep_sample(priority_, ids, value, keys, weights, n: int) -> tuple[np.ndarray, ...]:
    """The n candidates of lowest priority (ties: ids in order)."""
    order = np.lexsort((ids[:, 2], ids[:, 1], ids[:, 0], priority_))[:n]
    return priority_[order], ids[order], value[order], keys[order], weights[order]


def merge(a: Partial, b: Partial, settings: Settings) -> Partial:
    """Two partials as one (a's candidates before b's on ties: merge in batch order)."""
    top = _keep_top(
        np.concatenate([a.top_value, b.top_value], 3),
        np.concatenate([a.top_ids, b.top_ids], 3),
        np.concatenate([a.top_keys, b.top_keys], 3),
        np.concatenate([a.top_weights, b.top_weights], 3),
        settings.top,
    )
    fields = ("sample_priority", "sample_ids", "sample_value", "sample_keys", "sample_weights")
    p, i, v, k, w = (np.concatenate([getattr(a, f), getattr(b, f)]) for f in fields)
    p, i, v, k, w = _keep_sample(p, i, v, k, w, settings.sample)
    return Partial(a.texts + b.texts, np.concatenate([a.stats, b.stats]), *top, p, i, v, k, w)


def sub_batches(encoded: list, n_layers: int, n_heads: int, batch_mb: int) -> list[list[int]]:
    """Indices of windows in turn, as many per sub-batch as keep every layer's padded weights under batch_mb."""
    out: list[list[int]] = []
    current: list[int] = []
    longest = 0
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


def _sub_batch(weights: tuple[torch.Tensor, ...], encs: list, kind: str, settings: Settings, sinks: bool = False):
    """A sub-batch's row values (S, L, H, Q) over its Q real queries (texts in turn), each window's statistics
    (W, S, L, H), and where each real query is: (B, T) -> Q. sinks: the model's rows sum to less than 1."""
    n_l, (b, n_h, t, _) = len(weights), weights[0].shape
    lengths = torch.tensor([len(e.ids) for e in encs])
    real = torch.arange(t)[None, :] < lengths[:, None]  # (B, T): the real queries (rows past a text are padding)
    keys = torch.zeros(b, 1, t, 5)
    excluded = torch.zeros(b, 1, 1, t, dtype=torch.bool)
    for i, enc in enumerate(encs):
        n = len(enc.ids)
        keys[i, 0, :n] = key_columns(enc.axis, kind)
        excluded[i, 0, 0, :n] = ~confidence_keys(enc.axis, settings.confidence_excludes)
    keys[..., 4] = torch.arange(t, dtype=torch.float32)  # positions past a text: their weights are 0
    pairs = tuple(excluded[:, 0, 0].nonzero().T)  # (text, key) pairs a row's maximum leaves out
    names = settings.statistics
    rows = torch.empty(len(names), n_l, b, n_h, t)
    for layer in range(n_l):
        w = weights[layer]  # (B, H, T, T): padded keys have weight 0
        mass = w.sum(-1) if sinks else None  # (B, H, T): a learned sink takes the rest of each row
        by_stat = row_values(w, None, 0.0, keys, pairs, lengths[:, None, None], 0, kind, only=names, mass=mass)
        for i, name in enumerate(names):
            rows[i, layer] = by_stat[name]
    # a window's statistic: its rows averaged as blocks.BlockPass.stats does (over the rows blocks.counted says)
    summed = rows.masked_fill(~real[None, None, :, None, :], float("nan")).nansum(-1).double()  # (S, L, B, H)
    counts = torch.stack([counted(s, lengths, kind) for s in names])  # (S, B): the rows each statistic averages
    stats = (summed / counts[:, None, :, None]).float().permute(2, 0, 1, 3)  # (B, S, L, H)
    flat = real.flatten()
    values = rows.permute(0, 1, 3, 2, 4).flatten(3)[..., flat]  # (S, L, H, Q)
    return values, stats, real.flatten().nonzero().squeeze(1)


TIES = (
    "equal values: one per document in turn (each document's earliest query, by window then position, in document "
    "order; then each one's second, and so on)"
)


def _top(values: torch.Tensor, ids: np.ndarray, k: int):
    """The k highest of values (S, L, H, Q) for each statistic and head, exactly, equal values ordered by TIES (ids
    (Q, 3): document, window, position); NaN (no value) last. (.values, .indices) like torch.topk's."""
    k = min(k, values.shape[-1])
    order = torch.from_numpy(_ranked(values.cpu().numpy(), ids)[..., :k])
    return SimpleNamespace(values=torch.take_along_dim(values.cpu(), order, -1), indices=order)


def _keys_of(
    weights: tuple[torch.Tensor, ...],
    lengths: torch.Tensor,
    b: torch.Tensor,
    h: torch.Tensor,
    q: torch.Tensor,
    k: int,
    *,
    by_layer: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """The k keys each chosen (text b, head h, query q) looked at most, read from the sub-batch's weights for the
    chosen queries only: indices (-1: none) and weights. by_layer: b, h, q are (S, L, ...), the query chosen in each
    layer (out: (S, L, ..., k)); else the same queries in every layer (out: (L, ..., k))."""
    kk = min(k, weights[0].shape[-1])
    both = torch.broadcast_shapes(b.shape, h.shape, q.shape)
    shape = both if by_layer else (len(weights), *both)
    idx, wt = np.full((*shape, k), -1, np.int32), np.zeros((*shape, k), np.float32)
    for layer, w in enumerate(weights):
        at = (slice(None), layer) if by_layer else (layer,)
        sel = (b[:, layer], h[:, layer], q[:, layer]) if by_layer else (b, h, q)
        top = torch.topk(w[sel], kk, dim=-1)  # (..., kk) of the chosen rows only
        seen = top.indices < lengths[sel[0]][..., None]  # a padded key is no key
        idx[(*at, ..., slice(0, kk))] = top.indices.int().masked_fill(~seen, -1).numpy()
        wt[(*at, ..., slice(0, kk))] = top.values.masked_fill(~seen, 0.0).numpy()
    return idx, wt


def measure(engine: BatchedEngine, batch: Batch, settings: Settings, progress=None) -> Partial:
    """The partial results of one batch on one engine (an HFEngine: `batch_weights`); `progress(done, total)` is told
    after each sub-batch (windows)."""
    n_l, n_h, n_s = engine.n_layers, engine.n_heads, len(settings.statistics)
    kind = engine.kinds[0]
    windows = [
        (doc, i, source, enc)
        for doc, source, text in batch.documents
        for i, enc in enumerate(windows_of(engine, text, settings.window))
    ]
    out = _empty(n_s, n_l, n_h, settings)
    done = 0
    for group in sub_batches([w[3] for w in windows], n_l, n_h, settings.batch_mb):
        encs = [windows[i][3] for i in group]
        weights = engine.batch_weights([e.ids for e in encs])
        with torch.inference_mode():  # the weights are inference tensors (a row's maximum zeroes keys in place)
            values, stats, where = _sub_batch(weights, encs, kind, settings, engine.sinks)
        lengths = torch.tensor([len(e.ids) for e in encs])
        t = weights[0].shape[-1]
        qb, qt = where // t, where % t  # (Q,): each real query's text in the sub-batch and position
        ids = np.stack(
            [
                np.array([windows[group[i]][0] for i in qb.tolist()]),
                np.array([windows[group[i]][1] for i in qb.tolist()]),
                qt.numpy(),
            ],
            1,
        )
        # the top queries of each statistic and head, and the sample: only their rows' keys are read
        top = _top(values, ids, settings.top)  # (S, L, H, k)
        heads = torch.arange(n_h)[None, None, :, None].expand_as(top.indices)
        top_keys, top_weights = _keys_of(
            weights, lengths, qb[top.indices], heads, qt[top.indices], settings.keys, by_layer=True
        )  # (S, L, H, k, K)
        chosen = _keep_top(top.values.numpy(), ids[top.indices.numpy()], top_keys, top_weights, settings.top)
        prio = priority(ids[:, 0], ids[:, 1], ids[:, 2], settings.seed)
        gone = (qt < forced_of(kind, lengths[qb])).numpy()  # a decoder's forced rows (NaN values): no example
        prio[gone] = 2.0  # never sampled while another query is left
        pick = np.lexsort((ids[:, 2], ids[:, 1], ids[:, 0], prio))[: settings.sample]
        pq = torch.from_numpy(pick)
        sk, sw = _keys_of(
            weights,
            lengths,
            qb[pq][:, None],
            torch.arange(n_h)[None, :],
            qt[pq][:, None],
            settings.keys,
            by_layer=False,
        )  # (L, P, H, K)
        del weights
        texts = [
            {
                "doc": windows[i][0],
                "window": windows[i][1],
                "source": windows[i][2],
                "text": e.axis.text,
                "tokens": list(e.axis.tokens),
                "special": list(e.axis.special),
            }
            for i, e in zip(group, encs, strict=True)
        ]
        sub = Partial(
            texts,
            stats.numpy(),
            *chosen,
            prio[pick],
            ids[pick],
            values[..., pq].permute(3, 0, 1, 2).numpy(),
            sk.transpose(1, 0, 2, 3),
            sw.transpose(1, 0, 2, 3),
        )
        out = merge(out, sub, settings)
        done += len(group)
        if progress:
            progress(done, len(windows))
    return out
