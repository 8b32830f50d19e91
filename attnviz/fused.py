"""Every head's statistics of a long text in one fused pass a layer (issue 53), where a fused kernel runs.

`LazyAttention.analyse` streams blocks of rows through `blocks.BlockPass`: each statistic is one or more PyTorch
operations over the block, each another pass over its memory. Where Triton runs (a CUDA device, or CPU tensors
under Triton's interpreter, which the tests use), `layer_stats` does the same work in one kernel a layer
(attnviz/stats_kernel.py): each program reads its queries once and its keys twice (the row normalisers, then
everything else), and writes one number per row and statistic, the column sums and the pooled cells; no weight
reaches memory. The definitions are blocks.py's, and tests/test_fused.py holds the two paths equal within 1e-5.

The previous-, next- and same-position shares are one weight each per row: they are computed here from q_i . k_j
and the row's normaliser (O(N) work), with blocks.py's rule for rows that have no such token (NaN, left out).

Where the forward pass's own fused kernel gave each row's log-sum-exp (torch's SDPA kernels compute it, and
`engines.scratch.causal_attention` keeps it), `layer_stats` takes it and the kernel skips its first pass over the
keys: a trusted number is checked, not assumed: each row's weights from it must sum to 1 within `LSE_TOL`, else
that layer runs both passes and the log says so once.

Precision: "exact" (float32 products, the default and the parity the tests hold), "tf32x3" (each product as three
TF32 products on a GPU's tensor cores: about float32's accuracy), "tf32" or "bf16" (the products' inputs rounded,
float32 sums; the tensor cores): bench/long_inputs.py --precision measures their error.
"""

from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType
from typing import cast

import torch
from torch import Tensor

from attnviz import cpu_kernel
from attnviz.blocks import key_columns
from attnviz.tokens import TokenAxis

PRECISIONS = {"exact": "ieee", "tf32x3": "tf32x3", "tf32": "tf32", "bf16": "bf16"}
LSE_TOL = 1e-5  # a given row normaliser is used where each row's weights from it sum to 1 within this (log of)
_lse_refused = False  # a given normaliser was refused once: said in the log once
_kernel: ModuleType | None = None
_kernel_error: str | None = None
_failed: str | None = None  # a fused kernel raised at run time (`failed`): the plain path from then on


def kernel() -> ModuleType | None:
    """attnviz.stats_kernel, imported once; None where Triton is not installed or does not import."""
    global _kernel, _kernel_error
    if _kernel is None and _kernel_error is None:
        try:
            _kernel = importlib.import_module("attnviz.stats_kernel")
        except Exception as e:  # ImportError, or Triton finding no compiler or driver
            _kernel_error = f"{type(e).__name__}: {e}"
    return _kernel


def failed(error: Exception) -> None:
    """A fused kernel raised where `available` said it runs (Triton's first launch finds no C compiler, a driver too
    old): said in the log once, and the plain path runs from now on in this process (lazy.LazyAttention._analyse
    redoes the layer pass that way)."""
    global _failed
    _failed = f"{type(error).__name__}: {error}"
    logging.getLogger(__name__).warning("the fused statistics pass failed, the plain path runs instead: %s", error)


def _interpreted() -> bool:
    """Triton's kernel on CPU tensors under its interpreter: ATTNVIZ_FUSED=1 with TRITON_INTERPRET=1 (set before
    Triton's first import): the tests' way to check the GPU kernel's arithmetic; far too slow for use."""
    return os.environ.get("ATTNVIZ_FUSED", "") == "1" and os.environ.get("TRITON_INTERPRET") == "1"


def available(device: torch.device) -> bool:
    """Whether the fused pass runs for tensors on `device`: on a CUDA device where Triton imports; on the CPU where
    attnviz/cpu_stats.c compiles (attnviz.cpu_kernel), or Triton's interpreter was chosen (`_interpreted`).
    ATTNVIZ_FUSED=0 turns it off (the plain path, blocks.BlockPass, everywhere)."""
    if os.environ.get("ATTNVIZ_FUSED", "") == "0" or _failed is not None:
        return False
    if device.type == "cuda" or _interpreted():
        return kernel() is not None
    return device.type == "cpu" and cpu_kernel.load() is not None


def check(device: torch.device) -> tuple[bool, str]:
    """(runs, what): whether a long text's statistics on `device` take the fused pass, tried on a small one (Triton
    compiles its launcher with the machine's C compiler at the first launch, after `available` said yes), and which
    kernel runs them or why the plain path does: `attnviz doctor`'s line, and a container's check of its compiler."""
    if os.environ.get("ATTNVIZ_FUSED", "") == "0":
        return False, "turned off (ATTNVIZ_FUSED=0)"
    if not available(device):
        return False, _failed or (cpu_kernel.error() if device.type == "cpu" else _kernel_error) or "not available"
    n, heads = 64, 2
    gen = torch.Generator().manual_seed(0)
    q, k = (torch.randn(heads, n, 16, generator=gen).to(device) for _ in range(2))
    try:
        layer_stats(
            q, k, torch.zeros(n, dtype=torch.int32), scale=0.25, causal=True, pools=(),
            received=torch.zeros(heads, n, device=device),
        )  # fmt: skip
    except Exception as e:  # no C compiler for Triton's launcher, a driver too old: what failed() would log
        return False, f"the fused pass failed: {type(e).__name__}: {str(e)[:200]}"
    if device.type == "cuda":
        return True, f"Triton's fused statistics kernel on {torch.cuda.get_device_name(device)}"
    return True, "attnviz's CPU kernel (attnviz/cpu_stats.c, compiled for this machine)"


def key_codes(axis: TokenAxis, excluded: Tensor, kind: str) -> Tensor:
    """(N,) int32: each key's flags for the kernel: [CLS], another special token, punctuation, the first token (as
    blocks.key_columns marks them for this kind of attention), and left out of a row's maximum (`excluded`, as
    BlockPass holds it)."""
    flags = key_columns(axis, kind)[:, :4].bool()  # cls, sep, punct, first
    bits = torch.tensor([1, 2, 4, 8], dtype=torch.int32)
    codes = (flags.int() * bits).sum(1, dtype=torch.int32)
    return (codes | excluded.cpu().int() * 16).to(torch.int32)


def neighbours(
    q: Tensor, k: Tensor, lse: Tensor, scale: float, n: int, causal: bool, window: int = 0, precision: str = "exact"
) -> Tensor:
    """(3, H, N): each row's weight on the previous, next and same position (NaN where the text has no such token,
    0 where the mask hides it), from q (H, N, Dh), k (H_kv, N, Dh) and the rows' normalisers lse (H, N). With bf16
    products the inputs are rounded as the kernel rounds them (tf32's rounding is the GPU's own: not repeated)."""
    n_kv, dh = k.shape[0], k.shape[-1]
    group = q.shape[0] // n_kv
    if precision == "bf16":
        q, k, scale = (q * scale).bfloat16().float(), k.bfloat16().float(), 1.0
    qs = (q if scale == 1.0 else q * scale).view(n_kv, group, n, dh)  # a key head's query heads side by side
    out = torch.full((3, n_kv, group, n), float("nan"), dtype=torch.float32, device=q.device)
    for row, offset in enumerate((-1, 1, 0)):
        lo, hi = max(0, -offset), min(n, n - offset)  # the rows i that have a token at i + offset
        hidden = (causal and offset > 0) or (window > 0 and -offset >= window)
        if hidden:
            out[row, ..., lo:hi] = 0.0
            continue
        s = torch.einsum("hgnd,hnd->hgn", qs[:, :, lo:hi], k[:, lo + offset : hi + offset])  # q_i . k_{i + offset}
        out[row, ..., lo:hi] = torch.exp(s - lse.reshape(n_kv, group, n)[..., lo:hi])
    return out.view(3, n_kv * group, n)


def layer_stats(
    q: Tensor,
    k: Tensor,
    codes: Tensor,
    *,
    scale: float,
    causal: bool,
    pools: tuple[tuple[Tensor, int], ...],
    received: Tensor,
    precision: str = "exact",
    window: int = 0,
    sinks: Tensor | None = None,
    lse: Tensor | None = None,
) -> dict[str, Tensor]:
    """One layer's rows through the fused kernel: {statistic: (H, N)} for every blocks.STATS name and "lse" (each
    row's normaliser). Adds the column sums to `received` (H, N) and the pooled cells to each (sums (H, P, P), f)
    of `pools` (float32, on q's device). `lse` (H, N): the rows' normalisers from the forward pass, used by Triton's
    kernel where there is no sink (`given_normalisers`)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision is one of {', '.join(PRECISIONS)}, not {precision!r}")
    q, k = q.contiguous(), k.contiguous()
    n = q.shape[1]
    if q.device.type == "cpu" and not _interpreted():  # products in float32 on the CPU, whatever `precision` asks
        found = cpu_kernel.layer_pass(
            q, k, codes, scale=scale, causal=causal, window=window, sinks=sinks, pools=pools, received=received
        )
        return _with_neighbours(dict(zip(cpu_kernel.ROW_STATS, found, strict=True)), q, k, scale, n, causal, window)
    run = kernel()
    if run is None:
        raise RuntimeError(f"the fused statistics kernel is not available here ({_kernel_error})")
    settings = {"scale": scale, "causal": causal, "window": window, "sinks": sinks, "precision": PRECISIONS[precision]}
    codes = codes.to(q.device)
    rows = None
    if lse is not None and sinks is None:
        rows = given_normalisers(run, q, k, codes, lse, pools, received, settings)
    if rows is None:
        rows = run.layer_pass(q, k, codes, pools=pools, received=received, **settings)
    out = dict(zip(run.ROW_STATS, cast(Tensor, rows), strict=True))
    return _with_neighbours(out, q, k, scale, n, causal, window, precision)


def given_normalisers(
    run: ModuleType,
    q: Tensor,
    k: Tensor,
    codes: Tensor,
    lse: Tensor,
    pools: tuple[tuple[Tensor, int], ...],
    received: Tensor,
    settings: dict,
) -> Tensor | None:
    """One layer through Triton's kernel's second pass alone, from the forward pass's row normalisers `lse` (H, N):
    its rows (as `layer_pass` returns them) with the column and pooled sums added to `received` and `pools`; or None,
    nothing added, where a row's weights from `lse` do not sum to 1 within LSE_TOL (the kernel returns lse + log of
    that sum): the caller then runs both passes."""
    global _lse_refused
    fresh_received = torch.zeros_like(received)
    fresh_pools = tuple((torch.zeros_like(sums), f) for sums, f in pools)
    lse = lse.to(device=q.device, dtype=torch.float32)
    rows = run.layer_pass(q, k, codes, pools=fresh_pools, received=fresh_received, lse=lse, **settings)
    off = float((rows[-1] - lse).abs().max())  # the largest |log of a row's mass|
    if not off <= LSE_TOL:  # NaN too
        if not _lse_refused:
            _lse_refused = True
            logging.getLogger(__name__).warning(
                "the forward pass's row normalisers are off by up to %.2g (a row's weights sum to exp of that): "
                "the fused pass computes its own",
                off,
            )
        return None
    received += fresh_received
    for (sums, _), (fresh, _) in zip(pools, fresh_pools, strict=True):
        sums += fresh
    return rows


def takes_normalisers(device: torch.device) -> bool:
    """Whether a long text's analysis on `device` runs Triton's kernel after the forward pass, which can take the
    rows' normalisers that pass computed (a CUDA device; on the CPU, Triton's interpreter chosen)."""
    return available(device) and not in_forward(device) and (device.type == "cuda" or _interpreted())


def in_forward(device: torch.device) -> bool:
    """Whether a long text's forward pass can compute its statistics too (`attend_stats`): on the CPU, where the C
    kernel runs and Triton's interpreter was not chosen (the tests' way to hold Triton's kernel to the plain path)."""
    return device.type == "cpu" and not _interpreted() and available(device)


def attend_stats(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    codes: Tensor,
    *,
    scale: float,
    causal: bool,
    pools: tuple[tuple[Tensor, int], ...],
    received: Tensor,
    window: int = 0,
    sinks: Tensor | None = None,
) -> tuple[dict[str, Tensor], Tensor]:
    """A layer's attention output and its statistics together, on the CPU (cpu_kernel.attend_pass): `layer_stats`'
    {statistic: (H, N)} and z (H, N, Dv), from one product of the scores; q (H, N, Dh), k and v (H_kv, N, D)."""
    qs, k = q.float() * scale, k.float().contiguous()  # scaled once, contiguous: the kernel's and the neighbours'
    rows, z = cpu_kernel.attend_pass(
        qs, k, v, codes, scale=1.0, causal=causal, window=window, sinks=sinks, pools=pools, received=received
    )
    out = dict(zip(cpu_kernel.ROW_STATS, rows, strict=True))
    return _with_neighbours(out, qs, k, 1.0, q.shape[1], causal, window), z


def _with_neighbours(out: dict[str, Tensor], q, k, scale, n, causal, window, precision="exact") -> dict[str, Tensor]:
    """The rows' statistics with the previous-, next- and same-position shares added (`neighbours`)."""
    prev, nxt, same = neighbours(q, k, out["lse"], scale, n, causal, window, precision)
    out.update(prev=prev, next=nxt, self=same)
    return out
