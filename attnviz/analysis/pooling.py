"""Pooling a map to a screen's size: fixed blocks of f x f tokens, each cell the mean of the weights it covers.

Eager and lazy maps pool the same way, so their pictures agree and a cell's label ("tokens 7–12")
says exactly which tokens it averages (the last block may be smaller: it averages what it has).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def pool_factor(n: int, max_side: int) -> int:
    """The block size f that brings n tokens to at most max_side cells."""
    return max(1, math.ceil(n / max_side))


def block_sums(x: Tensor, f: int, dim: int) -> Tensor:
    """Sums over consecutive blocks of f along dim (-1 or -2), the last block shorter, without padding copies."""
    if f == 1:
        return x
    n = x.shape[dim]
    whole = n // f * f
    dim = dim % x.dim() - x.dim()  # counted from the end, so that the unflattened block dimension is `dim`
    main = x.narrow(dim, 0, whole).unflatten(dim, (-1, f)).sum(dim)
    if whole == n:
        return main
    rest = x.narrow(dim, whole, n - whole).sum(dim, keepdim=True)
    return torch.cat([main, rest], dim)


def block_counts(n: int, f: int) -> Tensor:
    """How many tokens each block of f covers: f, f, ..., and the rest."""
    counts = torch.full((math.ceil(n / f),), float(f), dtype=torch.float32)
    counts[-1] = n - f * (len(counts) - 1)
    return counts


def block_mean(x: Tensor, fq: int, fk: int) -> Tensor:
    """(..., Tq, Tk) -> (..., ceil(Tq/fq), ceil(Tk/fk)): the mean of each fq x fk block."""
    sums = block_sums(block_sums(x, fk, -1), fq, -2)
    return sums / (block_counts(x.shape[-2], fq)[:, None] * block_counts(x.shape[-1], fk)[None, :])
