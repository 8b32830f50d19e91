"""The per-batch function's parts: windows, sub-batches, the sample's hash, merges and the partial's bytes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz import api
from attnviz.analysis import head_stats
from attnviz.corpus import measure
from attnviz.corpus.measure import Partial, Settings


def test_a_long_text_is_cut_into_windows_at_word_starts_that_cover_it():
    eng = api.engine("default")
    text = " ".join(head_stats.CORPUS) * 2
    windows = measure.windows_of(eng, text, 32)
    assert len(windows) > 4 and all(len(w.ids) <= 32 and w.truncated == 0 for w in windows)
    squeeze = lambda s: "".join(s.split())  # noqa: E731
    assert squeeze("".join(w.axis.text for w in windows)) == squeeze(text)  # nothing lost but spaces at the cuts
    assert all(not w.axis.tokens[1].startswith("##") for w in windows)  # no window starts inside a word
    assert measure.windows_of(eng, "A short text.", 32)[0].axis.text == "A short text."
    assert measure.windows_of(eng, "\u200b\u200b", 32) == []


def test_batches_and_sub_batches_keep_their_bounds():
    docs = [(str(i), "x" * n) for i, n in enumerate([10, 20, 30, 5, 100])]
    bs = measure.batches(docs, 40)
    assert [[d for d, _, _ in b.documents] for b in bs] == [[0, 1], [2, 3], [4]]
    assert [b.index for b in bs] == [0, 1, 2]

    class Enc:
        def __init__(self, n):
            self.ids = [0] * n

    groups = measure.sub_batches([Enc(n) for n in (10, 10, 10, 40, 5)], 2, 2, 1)  # 1 MB: 2*2*n*n*4 bytes a text
    for g in groups:
        n = max((10, 10, 10, 40, 5)[i] for i in g)
        assert len(g) == 1 or len(g) * 2 * 2 * n * n * 4 <= 2**20
    assert sum(groups, []) == [0, 1, 2, 3, 4]


def test_the_sample_priority_is_a_fixed_hash_in_unit_interval():
    doc, win, q = np.arange(1000) // 100, np.arange(1000) % 7, np.arange(1000)
    p = measure.priority(doc, win, q, 0)
    assert ((p >= 0) & (p < 1)).all() and len(np.unique(p)) == 1000
    assert np.array_equal(p, measure.priority(doc, win, q, 0))
    assert not np.array_equal(p, measure.priority(doc, win, q, 1))
    assert abs(p.mean() - 0.5) < 0.05  # roughly uniform


def test_a_partial_travels_as_bytes_and_merges_keep_the_best():
    eng = api.engine("default")
    s = Settings(window=32, sample=20, top=3)
    a = measure.measure(eng, measure.Batch(0, [(0, "a", head_stats.CORPUS[0])]), s)
    b = measure.measure(eng, measure.Batch(1, [(1, "b", head_stats.CORPUS[1])]), s)
    back = Partial.from_bytes(a.to_bytes())
    assert back.texts == a.texts
    for name in Partial.ARRAYS:
        assert np.array_equal(getattr(back, name), getattr(a, name), equal_nan=True), name
    m = measure.merge(a, b, s)
    both = np.concatenate([a.top_value, b.top_value], 3)
    assert np.array_equal(m.top_value, -np.sort(-both, 3)[..., :3])
    assert len(m.sample_priority) == 20 and np.all(np.diff(m.sample_priority) >= 0)
    assert m.stats.shape == (2, len(measure.STATS), 6, 12)


@pytest.mark.parametrize("bad", [{"window": 2}, {"top": 0}, {"sample": 3}, {"confidence_excludes": "all"}])
def test_settings_refuse_what_cannot_run(bad):
    with pytest.raises(ValueError):
        Settings(**bad)


def test_equal_values_are_ranked_by_the_stated_rule_not_by_arrival():
    """measure.TIES: among equal values one query per document in turn (each one's earliest by window and position,
    in document order), exactly, whatever order the candidates arrive in (torch.topk broke ties arbitrarily:
    documents 4, 3, 3, 3 for a statistic 0 everywhere)."""
    ids = np.array([[4, 0, 7], [3, 1, 2], [3, 0, 9], [0, 2, 1], [3, 0, 5], [1, 0, 0]])  # (doc, window, position)
    values = torch.tensor([0.0, 0.0, 0.5, 0.0, 0.0, float("nan")]).reshape(1, 1, 1, 6)
    top = measure._top(values, ids, 4)
    assert top.indices.flatten().tolist() == [2, 3, 4, 0]  # 0.5, then the zeros: (0,2,1), (3,0,5), (4,0,7)
    assert top.values.flatten().tolist() == [0.5, 0.0, 0.0, 0.0]
    for perm in ([5, 4, 3, 2, 1, 0], [1, 3, 5, 0, 2, 4]):  # the same candidates in another order: the same choice
        again = measure._top(values[..., perm], ids[perm], 4)
        assert ids[perm][again.indices.flatten()].tolist() == ids[[2, 3, 4, 0]].tolist()
    # merging partials: the same rule over candidates from two batches
    value = np.array([0.0, 0.0, 0.0, 0.0], np.float32).reshape(1, 1, 1, 4)
    cand = np.array([[5, 0, 1], [2, 0, 8], [2, 0, 3], [9, 9, 9]]).reshape(1, 1, 1, 4, 3)
    keys, weights = np.zeros((1, 1, 1, 4, 2), np.int32), np.zeros((1, 1, 1, 4, 2), np.float32)
    _, kept, _, _ = measure._keep_top(value, cand, keys, weights, 3)
    assert kept[0, 0, 0].tolist() == [[2, 0, 3], [5, 0, 1], [9, 9, 9]]  # document 2's second only after the others


def test_equal_values_come_from_different_documents_first():
    """Three documents of five queries each, every value equal (a head that gives [CLS] everything): the top three
    are one from each document, each its earliest; the next three each one's second (before: document 0's first
    five)."""
    ids = np.array([[d, w, p] for d in (2, 0, 1) for w, p in ((1, 0), (0, 3), (0, 1), (2, 2), (0, 7))])
    values = torch.full((2, 1, 1, 15), 0.25)
    values[1, ..., 4] = 0.5  # another statistic: one higher value first, then the same turns
    top = measure._top(values, ids, 6)
    got = ids[top.indices[0, 0, 0].numpy()].tolist()
    assert got == [[0, 0, 1], [1, 0, 1], [2, 0, 1], [0, 0, 3], [1, 0, 3], [2, 0, 3]]
    assert ids[top.indices[1, 0, 0].numpy()].tolist()[:4] == [[2, 0, 7], [0, 0, 1], [1, 0, 1], [2, 0, 1]]
