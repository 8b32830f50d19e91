"""The fused statistics pass in Triton: one program per block of query rows of one head, in one launch per layer.

Imported only where it runs: on a CUDA device (Triton compiles it), or on CPU tensors under Triton's interpreter
(TRITON_INTERPRET=1 set before this module is imported: the tests check the arithmetic that way, not the speed).
attnviz/fused.py decides and calls `layer_pass`; this module is the kernel and its launch, nothing else.

Each program loads its queries once and reads the keys its rows may see twice, tile by tile:
1. the row normalisers: the running maximum m and sum l of exp(s - m) (with a learned sink logit when the model
   has one), and the largest score among the keys "confidence" may take;
2. from lse = m + log l, each weight p = exp(s - lse) again, and in the same tile: sum p (s - m) (entropy), sum
   p |i - j| (distance), the shares on the flagged keys (cls, other special, punctuation, first), the column sums
   (attention received, added atomically) and the pooled maps' cells.
No weight is written to memory: what leaves a program is one number per row and statistic, the column sums and the
pooled cells. With bf16 products the keys arrive in bfloat16 (`layer_pass` rounds them once a layer): each program reads
the keys its rows see, so that halves what every program reads. What runs once a tile is kept small: where a pooled cell
is a tile wide or more (a long text), each row's sum over the current column bin is carried from tile to tile and summed
across the rows only when the bin ends (`_pool_wide`); the flags a tile's keys carry are one OR across it; in a causal
tile every row sees whole, the distance is (i - start) x the row's mass - sum p (j - start). A sliding window (keys
within `window` positions) skips the tiles outside it.
Query heads sharing a key/value head: a program holds one query head's rows, so a K tile is read once a query head,
not once a group. Stacking a group's heads in one program's rows would not read less per row: a program reads each
tile of keys once for the rows it holds, whichever heads they belong to, so the bytes a row costs fall with more rows a
program (the sweep's 128-row tiles, bench/fused_parts.py) and fewer bytes a key (bf16's keys), not with the rows'
heads; and a group of 3 (SmolLM2's) leaves lanes idle in a power-of-two tile.
Where the forward pass's own fused kernel gave each row's log-sum-exp (`lse`: torch's SDPA kernels compute it), the
first pass is skipped: the second takes that lse, finds "confidence"'s largest score as it goes, and divides each
row's sums by its mass (its weights' sum, 1 within rounding), so that the row statistics are those of the
normaliser lse + log(mass), which it returns; fused.layer_stats checks that mass (a disagreeing lse runs both passes).
"""

from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl

# key flags, one int32 per key (attnviz/fused.key_codes)
CLS, SEP, PUNCT, FIRST, EXCLUDED = 1, 2, 4, 8, 16
ROW_STATS = ("entropy", "distance", "cls", "sep", "punct", "first", "confidence", "lse")


@triton.jit
def _pool_add(pool, p, rows, cols, row0, col0, f, side, NB: tl.constexpr, PB: tl.constexpr, BY_DOT: tl.constexpr):
    """Add a tile of weights p (BM, BN) to the pooled sums `pool` (side x side cells of f x f tokens)."""
    rbin = rows // f
    cbin = cols // f
    rlo = row0 // f
    clo = col0 // f
    if BY_DOT:  # many bins in a tile (a short text): two products with one-hot matrices
        b = tl.arange(0, PB)
        onehot_c = (cbin[:, None] == (clo + b)[None, :]).to(tl.float32)  # (BN, PB)
        onehot_r = ((rlo + b)[:, None] == rbin[None, :]).to(tl.float32)  # (PB, BM)
        t = tl.dot(p, onehot_c, input_precision="ieee")  # (BM, PB)
        u = tl.dot(onehot_r, t, input_precision="ieee")  # (PB, PB)
        ra = rlo + b
        cb = clo + b
        ok = (ra[:, None] < side) & (cb[None, :] < side)
        tl.atomic_add(pool + ra[:, None] * side + cb[None, :], u, mask=ok, sem="relaxed")
    else:  # a few bins (a long text): masked sums, NB x NB cells
        for bj in tl.static_range(NB):
            sb = tl.sum(tl.where((cbin == clo + bj)[None, :], p, 0.0), 1)  # (BM,)
            for ai in tl.static_range(NB):
                v = tl.sum(tl.where(rbin == rlo + ai, sb, 0.0), 0)
                ok = (rlo + ai < side) & (clo + bj < side)
                tl.atomic_add(pool + (rlo + ai) * side + (clo + bj), v, mask=ok, sem="relaxed")


@triton.jit
def _bit_or(a, b):
    return a | b


@triton.jit
def _wide_flush(pool, acc, rows, row0, cb, f, side):
    """Add the rows' sums `acc` (BM,) over column bin `cb` to its cells: the block's rows lie in at most two row bins
    (a cell at least a tile wide)."""
    rb = row0 // f
    top = rows < (rb + 1) * f
    ok = cb < side
    tl.atomic_add(pool + rb * side + cb, tl.sum(tl.where(top, acc, 0.0), 0), mask=ok, sem="relaxed")
    below = tl.sum(tl.where(top, 0.0, acc), 0)
    tl.atomic_add(pool + (rb + 1) * side + cb, below, mask=ok & (rb + 1 < side), sem="relaxed")


@triton.jit
def _pool_wide(pool, p, a, acc, acc_cb, cols, rows, row0, col0, f, side, SPLIT: tl.constexpr):
    """Add a tile of weights p (BM, BN) to the pooled sums where a cell is at least a tile wide (f >= BM, BN): the
    tile touches at most two column bins. `a` is the rows' sums of p (already needed for their mass); `acc` holds
    the rows' sums over column bin `acc_cb` not yet added, and goes to its cells (`_wide_flush`: two sums across
    the rows and two atomics) only when the bin ends: once every f / BN tiles, not once a tile. The weights left of
    a bin boundary are summed only in the tile that has one. Returns (acc, acc_cb)."""
    cb = col0 // f
    if cb != acc_cb:  # the previous tile ended its bin
        _wide_flush(pool, acc, rows, row0, acc_cb, f, side)
        acc = a * 0.0
        acc_cb = cb
    cstar = (cb + 1) * f  # the next column bin's first key
    if cstar < col0 + SPLIT:  # SPLIT is the tile's width: a column-bin boundary inside this tile
        left = tl.sum(tl.where((cols < cstar)[None, :], p, 0.0), 1)
        _wide_flush(pool, acc + left, rows, row0, cb, f, side)
        acc = a - left
        acc_cb = cb + 1
    else:
        acc = acc + a
    return acc, acc_cb


@triton.jit
def _scores(q, k_base, cols, dims, n, dh, PRECISION: tl.constexpr):
    """A tile of scores q . k_j (BM, BN) for the keys `cols` (q already scaled, and rounded for bf16)."""
    kt = tl.load(
        k_base + cols[None, :] * dh + dims[:, None], mask=(cols[None, :] < n) & (dims[:, None] < dh), other=0.0
    )
    if PRECISION == "bf16":
        kt = kt.to(tl.bfloat16)
    if PRECISION == "ieee":
        s = tl.dot(q, kt, input_precision="ieee")
    elif PRECISION == "tf32x3":
        s = tl.dot(q, kt, input_precision="tf32x3")
    else:
        s = tl.dot(q, kt)
    return s


@triton.jit
def _visible(rows, cols, live, n, window, CAUSAL: tl.constexpr):
    """Which (row, key) pairs of a tile the mask lets through."""
    vis = live[:, None] & (cols[None, :] < n)
    if CAUSAL:
        vis = vis & (cols[None, :] <= rows[:, None])
    if window > 0:
        vis = vis & (rows[:, None] - cols[None, :] < window)
    return vis


@triton.jit
def _normalisers(
    q, k_base, CODES, rows, dims, live, start, n, dh, window, m, z, top,
    CAUSAL: tl.constexpr, PRECISION: tl.constexpr, BN: tl.constexpr, MASKED: tl.constexpr,
):  # fmt: skip
    """Pass 1 over one tile: the running maximum m, sum z of exp(s - m) and largest allowed score `top`."""
    cols = start + tl.arange(0, BN)
    s = _scores(q, k_base, cols, dims, n, dh, PRECISION)
    codes = tl.load(CODES + cols, mask=cols < n, other=0)
    allowed = ((codes & 16) == 0)[None, :]
    if MASKED:
        vis = _visible(rows, cols, live, n, window, CAUSAL)
        s = tl.where(vis, s, float("-inf"))
        allowed = allowed & vis
    m_new = tl.maximum(m, tl.max(s, 1))
    if MASKED:  # a row may have seen no key yet
        m_new_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_new_safe = m_new
    z = z * tl.exp(m - m_new_safe) + tl.sum(tl.exp(s - m_new_safe[:, None]), 1)
    top = tl.maximum(top, tl.max(tl.where(allowed, s, float("-inf")), 1))
    return m_new, z, top


@triton.jit
def _sums(
    q, k_base, CODES, RECEIVED, POOL1, POOL2, h, rows, dims, live, start, row0, n, dh, window, m, lse,
    ps, mass, dist, on_cls, on_sep, on_punct, on_first, top, acc1, cb1, acc2, cb2, f1, side1, f2, side2,
    CAUSAL: tl.constexpr, PRECISION: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, MASKED: tl.constexpr,
    NB1: tl.constexpr, PB1: tl.constexpr, DOT1: tl.constexpr, NB2: tl.constexpr, PB2: tl.constexpr,
    DOT2: tl.constexpr, POOLS: tl.constexpr, SKIP: tl.constexpr, LSE_GIVEN: tl.constexpr,
):  # fmt: skip
    """Pass 2 over one tile: the weights p = exp(s - lse) and every sum of them (and, where pass 1 was skipped
    for a given lse, the largest score "confidence" may take, `top`). acc1, cb1, acc2, cb2: each wide pooled map's
    rows' sums not yet added (`_pool_wide`)."""
    cols = start + tl.arange(0, BN)
    s = _scores(q, k_base, cols, dims, n, dh, PRECISION)
    if MASKED:
        vis = _visible(rows, cols, live, n, window, CAUSAL)
        shifted = tl.where(vis, s - m[:, None], 0.0)
        p = tl.where(vis, tl.exp(s - lse[:, None]), 0.0)
    else:
        shifted = s - m[:, None]
        p = tl.exp(s - lse[:, None])
    a = tl.sum(p, 1)
    ps += tl.sum(p * shifted, 1)
    mass += a
    if LSE_GIVEN or (SKIP & 1) == 0:
        codes = tl.load(CODES + cols, mask=cols < n, other=0)
        flags = tl.reduce(codes, 0, _bit_or)  # which flags this tile's keys have: one sum across it, not one a flag
    if LSE_GIVEN:  # pass 1 was skipped: the largest score among the keys "confidence" may take, here
        if MASKED:
            top = tl.maximum(top, tl.max(tl.where(vis & ((codes & 16) == 0)[None, :], s, float("-inf")), 1))
        elif (flags & 16) != 0:  # a key left out of the maximum (the end token, as a rule) in this tile
            top = tl.maximum(top, tl.max(tl.where(((codes & 16) == 0)[None, :], s, float("-inf")), 1))
        else:
            top = tl.maximum(top, tl.max(s, 1))
    if (SKIP & 1) == 0:
        if CAUSAL and not MASKED:  # every key at or before its row: |i - j| = (i - start) - (j - start)
            offsets = tl.arange(0, BN).to(tl.float32)
            dist += (rows - start).to(tl.float32) * a - tl.sum(p * offsets[None, :], 1)
        else:
            dist += tl.sum(p * tl.abs(cols[None, :] - rows[:, None]).to(tl.float32), 1)
        # a tile with no key of a flag (most tiles, for most flags) adds nothing to that share: skipped
        if (flags & 1) != 0:
            on_cls += tl.sum(tl.where(((codes & 1) != 0)[None, :], p, 0.0), 1)
        if (flags & 2) != 0:
            on_sep += tl.sum(tl.where(((codes & 2) != 0)[None, :], p, 0.0), 1)
        if (flags & 4) != 0:
            on_punct += tl.sum(tl.where(((codes & 4) != 0)[None, :], p, 0.0), 1)
        if (flags & 8) != 0:
            on_first += tl.sum(tl.where(((codes & 8) != 0)[None, :], p, 0.0), 1)
    if (SKIP & 2) == 0:
        tl.atomic_add(RECEIVED + h * n + cols, tl.sum(p, 0), mask=cols < n, sem="relaxed")
    if (SKIP & 4) == 0:
        if POOLS >= 1:
            if NB1 == 2:
                acc1, cb1 = _pool_wide(POOL1 + h * side1 * side1, p, a, acc1, cb1, cols, rows, row0, start, f1, side1,
                                       BN)  # fmt: skip
            else:
                _pool_add(POOL1 + h * side1 * side1, p, rows, cols, row0, start, f1, side1, NB1, PB1, DOT1)
        if POOLS >= 2:
            if NB2 == 2:
                acc2, cb2 = _pool_wide(POOL2 + h * side2 * side2, p, a, acc2, cb2, cols, rows, row0, start, f2, side2,
                                       BN)  # fmt: skip
            else:
                _pool_add(POOL2 + h * side2 * side2, p, rows, cols, row0, start, f2, side2, NB2, PB2, DOT2)
    return ps, mass, dist, on_cls, on_sep, on_punct, on_first, top, acc1, cb1, acc2, cb2


@triton.jit
def _stats_kernel(
    Q,  # (H, N, D) this layer's queries, float32
    K,  # (H_kv, N, D) its keys: float32, or bfloat16 with bf16 products (rounded once a layer by layer_pass)
    CODES,  # (N,) int32 key flags
    SINK,  # (H,) float32 sink logits (read when HAS_SINK)
    LSE,  # (H, N) float32 each row's log-sum-exp from the forward pass (read when LSE_GIVEN)
    OUT,  # (8, H, N) float32: ROW_STATS per row
    RECEIVED,  # (H, N) float32 column sums, added to
    POOL1,  # (H, side1, side1) float32, added to
    POOL2,  # (H, side2, side2)
    n,
    scale,
    window,  # 0: every key the mask allows; else keys j with i - window < j
    group,  # query heads per key head
    f1,
    side1,
    f2,
    side2,
    dh,
    CAUSAL: tl.constexpr,
    HAS_SINK: tl.constexpr,
    LSE_GIVEN: tl.constexpr,  # LSE holds the rows' normalisers (never with a sink): pass 1 is skipped
    PRECISION: tl.constexpr,  # "ieee" (exact float32), "tf32x3", "tf32", or "bf16" (the products' inputs rounded)
    BM: tl.constexpr,
    BN: tl.constexpr,
    D: tl.constexpr,
    NB1: tl.constexpr,
    PB1: tl.constexpr,
    DOT1: tl.constexpr,
    NB2: tl.constexpr,
    PB2: tl.constexpr,
    DOT2: tl.constexpr,
    POOLS: tl.constexpr,  # how many pooled maps: 0, 1 or 2
    SKIP: tl.constexpr,  # 0; bench/fused_parts.py leaves parts out to time them by difference (never in use)
):
    pid = tl.program_id(0)
    h = tl.program_id(1)
    kvh = h // group
    row0 = pid * BM
    rows = row0 + tl.arange(0, BM)
    dims = tl.arange(0, D)
    live = rows < n
    q = tl.load(
        Q + h * n * dh + rows[:, None] * dh + dims[None, :], mask=live[:, None] & (dims[None, :] < dh), other=0.0
    )
    q = q * scale
    if PRECISION == "bf16":
        q = q.to(tl.bfloat16)
    # The tiles a row block may see: [lo, hi). Inside [lo_full, hi_full) every pair is visible (a full block of rows,
    # keys all before the diagonal and within the window): those tiles skip the mask's arithmetic.
    hi = n
    if CAUSAL:
        hi = tl.minimum(n, row0 + BM)
    lo = row0 * 0  # an int32 like the window's start below
    if window > 0:
        lo = tl.maximum(0, row0 - window + 1) // BN * BN
    hi_full = n // BN * BN
    if CAUSAL:
        hi_full = tl.minimum(hi_full, (row0 + 1) // BN * BN)
    lo_full = lo
    if window > 0:
        lo_full = tl.maximum(lo, (row0 + BM - window + BN - 1) // BN * BN)
    lo_full = tl.minimum(lo_full, hi)
    if row0 + BM > n:  # the last, partial block of rows: every tile masked
        hi_full = lo
    hi_full = tl.maximum(hi_full, lo_full)
    k_base = K + kvh * n * dh

    # 1. the row normalisers, unless the forward pass gave them
    m = tl.full((BM,), float("-inf"), tl.float32)
    z = tl.zeros((BM,), tl.float32)
    top = tl.full((BM,), float("-inf"), tl.float32)
    if LSE_GIVEN:
        lse = tl.load(LSE + h * n + rows, mask=live, other=0.0)
        m = lse  # so that sum p (s - m) below is sum p log p
        log_z = tl.zeros((BM,), tl.float32)
    else:
        for start in range(lo, lo_full, BN):
            m, z, top = _normalisers(q, k_base, CODES, rows, dims, live, start, n, dh, window, m, z, top,
                                     CAUSAL, PRECISION, BN, True)  # fmt: skip
        for start in range(lo_full, hi_full, BN):
            m, z, top = _normalisers(q, k_base, CODES, rows, dims, live, start, n, dh, window, m, z, top,
                                     CAUSAL, PRECISION, BN, False)  # fmt: skip
        for start in range(hi_full, hi, BN):
            m, z, top = _normalisers(q, k_base, CODES, rows, dims, live, start, n, dh, window, m, z, top,
                                     CAUSAL, PRECISION, BN, True)  # fmt: skip
        if HAS_SINK:
            sink = tl.load(SINK + h)
            m_new = tl.maximum(m, sink)
            z = z * tl.exp(m - m_new) + tl.exp(sink - m_new)
            m = m_new
        m = tl.where(m == float("-inf"), 0.0, m)
        log_z = tl.log(tl.where(live, z, 1.0))  # rows past the text's end sum nothing: no log 0 in their lanes
        lse = m + log_z

    # 2. the weights again, and everything a row or a column sums of them
    ps = tl.zeros((BM,), tl.float32)  # sum p (s - m)
    mass = tl.zeros((BM,), tl.float32)  # sum p: 1, or less where a sink takes its share
    dist = tl.zeros((BM,), tl.float32)
    on_cls = tl.zeros((BM,), tl.float32)
    on_sep = tl.zeros((BM,), tl.float32)
    on_punct = tl.zeros((BM,), tl.float32)
    on_first = tl.zeros((BM,), tl.float32)
    acc1 = tl.zeros((BM,), tl.float32)  # a wide pooled map's rows' sums over the column bin cb1, not yet added
    acc2 = tl.zeros((BM,), tl.float32)
    cb1 = lo // f1
    cb2 = lo // f2
    if (SKIP & 8) == 0:
        for start in range(lo, lo_full, BN):
            ps, mass, dist, on_cls, on_sep, on_punct, on_first, top, acc1, cb1, acc2, cb2 = _sums(
                q, k_base, CODES, RECEIVED, POOL1, POOL2, h, rows, dims, live, start, row0, n, dh, window, m, lse,
                ps, mass, dist, on_cls, on_sep, on_punct, on_first, top, acc1, cb1, acc2, cb2, f1, side1, f2, side2,
                CAUSAL, PRECISION, BM, BN, True, NB1, PB1, DOT1, NB2, PB2, DOT2, POOLS, SKIP, LSE_GIVEN,
            )  # fmt: skip
        for start in range(lo_full, hi_full, BN):
            ps, mass, dist, on_cls, on_sep, on_punct, on_first, top, acc1, cb1, acc2, cb2 = _sums(
                q, k_base, CODES, RECEIVED, POOL1, POOL2, h, rows, dims, live, start, row0, n, dh, window, m, lse,
                ps, mass, dist, on_cls, on_sep, on_punct, on_first, top, acc1, cb1, acc2, cb2, f1, side1, f2, side2,
                CAUSAL, PRECISION, BM, BN, False, NB1, PB1, DOT1, NB2, PB2, DOT2, POOLS, SKIP, LSE_GIVEN,
            )  # fmt: skip
        for start in range(hi_full, hi, BN):
            ps, mass, dist, on_cls, on_sep, on_punct, on_first, top, acc1, cb1, acc2, cb2 = _sums(
                q, k_base, CODES, RECEIVED, POOL1, POOL2, h, rows, dims, live, start, row0, n, dh, window, m, lse,
                ps, mass, dist, on_cls, on_sep, on_punct, on_first, top, acc1, cb1, acc2, cb2, f1, side1, f2, side2,
                CAUSAL, PRECISION, BM, BN, True, NB1, PB1, DOT1, NB2, PB2, DOT2, POOLS, SKIP, LSE_GIVEN,
            )  # fmt: skip

        if (SKIP & 4) == 0 and POOLS >= 1 and NB1 == 2:  # the wide pooled maps' last column bins
            _wide_flush(POOL1 + h * side1 * side1, acc1, rows, row0, cb1, f1, side1)
        if (SKIP & 4) == 0 and POOLS >= 2 and NB2 == 2:
            _wide_flush(POOL2 + h * side2 * side2, acc2, rows, row0, cb2, f2, side2)

    entropy = log_z * mass - ps  # -sum p log p, p = exp(s - m) / z
    if LSE_GIVEN:  # each row's sums as if of p / mass: the normaliser is lse + log(mass)
        mass = tl.where(live, mass, 1.0)  # rows past the text's end: no 0/0 in their lanes
        log_mass = tl.log(mass)  # -inf where every weight underflowed (a given lse far too high): refused
        entropy = -ps / mass + log_mass
        dist = dist / mass
        on_cls = on_cls / mass
        on_sep = on_sep / mass
        on_punct = on_punct / mass
        on_first = on_first / mass
        lse = lse + log_mass
    out = OUT + h * n + rows
    plane = tl.num_programs(1) * n
    tl.store(out, entropy, mask=live)
    tl.store(out + plane, dist, mask=live)
    tl.store(out + 2 * plane, on_cls, mask=live)
    tl.store(out + 3 * plane, on_sep, mask=live)
    tl.store(out + 4 * plane, on_punct, mask=live)
    tl.store(out + 5 * plane, on_first, mask=live)
    tl.store(out + 6 * plane, tl.exp(top - lse), mask=live)
    tl.store(out + 7 * plane, lse, mask=live)


def _bins(block: int, f: int) -> tuple[int, int, bool]:
    """(NB, PB, by_dot): how many pooled bins a tile of `block` tokens can touch, that rounded up for a product,
    and whether to pool by products (many bins) rather than by masked sums (3 or 4 bins; 2, a cell at least a tile
    wide, by the rows' sums: _pool_wide)."""
    nb = block if f == 1 else min(block, (block - 1) // f + 2)
    return nb, max(16, 1 << (nb - 1).bit_length()), nb > 4


def tiles(dh: int) -> tuple[int, int, int, int]:
    """(rows, keys, warps, stages) of a program for a head size: ATTNVIZ_FUSED_TILES ("64,64,4,2") where set (the
    sweep of bench/fused_parts.py), else by the padded head size."""
    wanted = os.environ.get("ATTNVIZ_FUSED_TILES", "")
    if wanted:
        bm, bn, warps, stages = (int(x) for x in wanted.split(","))
        return bm, bn, warps, stages
    d = max(16, 1 << (dh - 1).bit_length())
    return (64 if d <= 64 else 32 if d <= 128 else 16), (64 if d <= 128 else 32), 4, 2


def layer_pass(
    q: torch.Tensor,
    k: torch.Tensor,
    codes: torch.Tensor,
    *,
    scale: float,
    causal: bool,
    window: int = 0,
    sinks: torch.Tensor | None = None,
    pools: tuple[tuple[torch.Tensor, int], ...] = (),
    received: torch.Tensor,
    precision: str = "ieee",
    lse: torch.Tensor | None = None,
    tile: tuple[int, int, int, int] | None = None,
    skip: int = 0,
    round_keys: bool = True,
) -> torch.Tensor:
    """One layer: q (H, N, Dh), k (H_kv, N, Dh), contiguous float32 on one device; codes (N,) int32. Adds the
    column sums to `received` (H, N) and each pooled map's cells to its (H, P, P) sums (pools: (sums, f) pairs);
    returns (8, H, N): ROW_STATS of each row. `lse` (H, N), where the forward pass gave the rows' normalisers (not
    with `sinks`): the first pass is skipped, and the returned lse is lse + log(each row's mass). `tile` (rows, keys,
    warps, stages) overrides `tiles`; `skip` leaves parts out (1 distance and shares, 2 column sums, 4 pooled maps,
    8 the whole second pass): for timing only. With bf16 products the keys are rounded to bfloat16 here, once a layer,
    as the kernel would round each tile it loads (round to nearest even, both): the same products from half the bytes,
    which each program reads again for its block of rows; `round_keys=False` hands the kernel float32 keys to round
    as it loads them, as before 2026-12-01 (bench/fused_parts.py's comparison)."""
    n_h, n, dh = q.shape
    if precision == "bf16" and round_keys and k.dtype == torch.float32:
        k = k.to(torch.bfloat16)
    group = n_h // k.shape[0]
    d = max(16, 1 << (dh - 1).bit_length())
    bm, bn, warps, stages = tile or tiles(dh)
    out = torch.empty(len(ROW_STATS), n_h, n, dtype=torch.float32, device=q.device)
    if len(pools) > 2:
        raise ValueError("the fused pass pools at most two sizes at once")
    if lse is not None and (sinks is not None or tuple(lse.shape) != (n_h, n)):
        raise ValueError(f"given normalisers {tuple(lse.shape)} for {n_h} heads of {n} rows (and never with sinks)")
    plans = [(sums, f, *_bins(max(bm, bn), f)) for sums, f in pools]
    dummy = received
    p1 = plans[0] if plans else (dummy, 1, 1, 16, False)
    p2 = plans[1] if len(plans) > 1 else (dummy, 1, 1, 16, False)
    grid = (math.ceil(n / bm), n_h)
    _stats_kernel[grid](
        q,
        k,
        codes,
        sinks if sinks is not None else received,
        lse.contiguous() if lse is not None else received,
        out,
        received,
        p1[0],
        p2[0],
        n,
        float(scale),
        int(window),
        group,
        p1[1],
        p1[0].shape[-1] if plans else 1,
        p2[1],
        p2[0].shape[-1] if len(plans) > 1 else 1,
        dh,
        CAUSAL=causal,
        HAS_SINK=sinks is not None,
        LSE_GIVEN=lse is not None,
        PRECISION=precision,
        BM=bm,
        BN=bn,
        D=d,
        NB1=p1[2],
        PB1=p1[3],
        DOT1=p1[4],
        NB2=p2[2],
        PB2=p2[3],
        DOT2=p2[4],
        POOLS=len(plans),
        SKIP=skip,
        num_warps=warps,
        num_stages=stages,
    )
    return out
