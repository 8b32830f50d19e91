"""The fused statistics pass on the CPU (issue 53): attnviz/cpu_stats.c, compiled on this machine, run block by block.

Each block of query rows (a key head's group of query heads x up to BLOCK_ROWS rows) gets its scores from one matrix
product (PyTorch's BLAS, as the plain path's), and cpu_stats.c's `block_pass` takes them to every row statistic
and the column sums in three sweeps over each row while it sits in the cache, and to the pooled cells once a block,
from the column sums of its rows' segments (cut at the pooled maps' row bins): no weight is written anywhere but
over the block's own scores. attnviz/fused.py calls `layer_pass` with stats_kernel.layer_pass's
arguments and gets the same (8, H, N) rows.

The C file is compiled the first time a process asks (`load`) with the machine's C compiler (`cc`, or $CC) into
$ATTNVIZ_CACHE_DIR/kernels (default ~/.cache/attnviz/kernels), named by the source's and the machine's hash, so a
later process loads it in milliseconds. Where no compiler runs (a slim image without gcc: the Dockerfile installs it),
`load` returns None and the plain path (blocks.BlockPass) runs, as before; `fused.check` (`attnviz doctor`) says so.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import torch
from torch import Tensor

SOURCE = Path(__file__).with_name("cpu_stats.c")
FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared")
BLOCK_ROWS = 128  # rows a block: a key head's group x 128 rows x N keys of scores (12 MB at 8,192 tokens, 3 heads)
ROW_STATS = ("entropy", "distance", "cls", "sep", "punct", "first", "confidence", "lse")
FLAG_BITS = (1, 2, 4, 8)  # cls, sep, punct, first: attnviz/fused.key_codes
EXCLUDED = 16
_lock = threading.Lock()
_library: ctypes.CDLL | None = None
_error: str | None = None
_mkl_local: tuple[Callable[[int], int] | None] | None = None
# each thread its own blocks, MKL on one thread in each (`_in_threads`); ATTNVIZ_CPU_THREADED=0: every block on all
THREADED = os.environ.get("ATTNVIZ_CPU_THREADED", "") != "0"


def _machine() -> str:
    """What the compiled file depends on besides its source: the processor's name and features (-march=native)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
        lines = [x for x in info.splitlines() if x.startswith(("model name", "flags"))][:2]
    except OSError:
        lines = []
    return "|".join([platform.machine(), platform.system(), *lines])


def _target() -> Path:
    digest = hashlib.sha256(SOURCE.read_bytes() + " ".join(FLAGS).encode() + _machine().encode()).hexdigest()[:16]
    root = Path(os.environ.get("ATTNVIZ_CACHE_DIR") or Path.home() / ".cache" / "attnviz").expanduser()
    return root / "kernels" / f"cpu_stats-{digest}.so"


def _compile(target: Path) -> None:
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler (cc) on this machine")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        built = Path(tmp) / target.name
        run = subprocess.run(
            [compiler, *FLAGS, "-o", str(built), str(SOURCE), "-lm"], capture_output=True, text=True, timeout=120
        )
        if run.returncode != 0:
            raise RuntimeError(f"{compiler} failed: {run.stderr.strip()[-500:]}")
        os.replace(built, target)  # whole, or not there: a second process never loads half a file


def load() -> ctypes.CDLL | None:
    """cpu_stats.c compiled for this machine and loaded, once a process; None (and `error()` says why) where it does
    not compile or load. ATTNVIZ_CPU_KERNEL=0 turns it off."""
    global _library, _error
    with _lock:
        if _library is None and _error is None:
            if os.environ.get("ATTNVIZ_CPU_KERNEL", "") == "0":
                _error = "turned off (ATTNVIZ_CPU_KERNEL=0)"
                return None
            try:
                target = _target()
                if not target.exists():
                    _compile(target)
                library = ctypes.CDLL(str(target))
                library.block_pass.restype = None
                _library = library
            except Exception as e:  # no compiler, a compiler error, a file that does not load
                _error = f"{type(e).__name__}: {e}"
    return _library


def error() -> str | None:
    """Why `load` returned None (None while it has not been asked, or where it loaded)."""
    return _error


def _pointer(t: Tensor | None) -> ctypes.c_void_p:
    return ctypes.c_void_p(t.data_ptr() if t is not None else None)


DENSE = 64  # a flag on more keys than this is summed by a product with its mask, not key by key


def _flagged(codes: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The keys of each flag (cls, sep, punct, first): one int32 list of the sparse flags' keys with each flag's offset
    and count (-1: a dense flag), and (4, N) float masks, 1.0 on a dense flag's keys."""
    flags = [(codes & bit) != 0 for bit in FLAG_BITS]
    lists = [torch.nonzero(f).flatten().to(torch.int32) for f in flags]
    dense = [len(x) > DENSE for x in lists]
    lists = [x[:0] if d else x for x, d in zip(lists, dense, strict=True)]
    counts = torch.tensor([-1 if d else len(x) for x, d in zip(lists, dense, strict=True)], dtype=torch.int32)
    sizes = torch.tensor([len(x) for x in lists], dtype=torch.int32)
    offsets = torch.cumsum(torch.cat([torch.zeros(1, dtype=torch.int32), sizes[:-1]]), 0).to(torch.int32)
    masks = torch.stack([f.float() if d else torch.zeros(len(codes)) for f, d in zip(flags, dense, strict=True)])
    return torch.cat(lists).contiguous(), offsets, counts, masks.contiguous()


def layer_pass(
    q: Tensor,
    k: Tensor,
    codes: Tensor,
    *,
    scale: float,
    causal: bool,
    window: int = 0,
    sinks: Tensor | None = None,
    pools: tuple[tuple[Tensor, int], ...] = (),
    received: Tensor,
) -> Tensor:
    """One layer: q (H, N, Dh), k (H_kv, N, Dh), contiguous float32 CPU tensors; codes (N,) int32. Adds the column
    sums to `received` (H, N) and each pooled map's cells to its (H, P, P) sums (at most two (sums, f) pairs);
    returns (8, H, N): ROW_STATS of each row, as stats_kernel.layer_pass."""
    rows, _ = _layer(q, k, None, codes, scale, causal, window, sinks, pools, received)
    return rows


def attend_pass(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    codes: Tensor,
    *,
    scale: float,
    causal: bool,
    window: int = 0,
    sinks: Tensor | None = None,
    pools: tuple[tuple[Tensor, int], ...] = (),
    received: Tensor,
) -> tuple[Tensor, Tensor]:
    """`layer_pass` and the layer's attention output together, from one product of each block's scores: the kernel
    writes each row's weights over its scores and one more product, P @ V, gives the block's output. v (H_kv, N, Dv)
    -> (the (8, H, N) rows of `layer_pass`, z (H, N, Dv): each head's output, the weights summing to less than 1
    beside a sink). What a long text's forward pass calls instead of SDPA, so its analysis needs no second QK^T."""
    rows, z = _layer(q, k, v, codes, scale, causal, window, sinks, pools, received)
    return rows, cast(Tensor, z)


def _mkl_threads() -> Callable[[int], int] | None:
    """MKL's thread count for the calling thread alone (its C function MKL_Set_Num_Threads_Local: returns the count
    before, 0 for the process's), where torch's own MKL has one (the x86 Linux wheels); None elsewhere."""
    global _mkl_local
    with _lock:
        if _mkl_local is None:
            found = None
            try:
                if torch.backends.mkl.is_available() and platform.system() == "Linux":
                    library = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"))
                    found = library.MKL_Set_Num_Threads_Local
                    found.argtypes, found.restype = [ctypes.c_int], ctypes.c_int
            except (OSError, AttributeError):
                found = None
            _mkl_local = (found,)
    return _mkl_local[0]


@dataclass(frozen=True)
class _Pass:
    """One layer's blocks: what every block's product and `block_pass` read, and where they write."""

    library: ctypes.CDLL
    qs: Tensor
    k: Tensor
    values: Tensor | None
    z: Tensor | None
    out: Tensor
    codes: tuple[ctypes.c_void_p, ...]  # penalty, flagged, offsets, counts, masks, sinks
    causal: bool
    window: int
    factors: tuple[int, int]
    sides: tuple[int, int]

    def run(self, jobs: Iterator[tuple[int, int]], lock: threading.Lock, sums: tuple, threads: int) -> None:
        """The blocks `jobs` yields, one at a time (under `lock`), their column sums and pooled cells added to
        `sums` (received, pool1, pool2) and block_pass run on `threads` threads."""
        n_h, n, _ = self.qs.shape
        group = n_h // self.k.shape[0]
        buffer = torch.empty(group * min(n, BLOCK_ROWS) * n, dtype=torch.float32)  # one block's scores, reused
        fixed = (  # block_pass's arguments after the block's own
            ctypes.c_int(int(self.causal)),
            ctypes.c_int(int(self.window)),
            *self.codes,
            _pointer(self.out),
            _pointer(sums[0]),
            _pointer(sums[1]),
            ctypes.c_int(self.factors[0]),
            ctypes.c_int(self.sides[0]),
            _pointer(sums[2]),
            ctypes.c_int(self.factors[1]),
            ctypes.c_int(self.sides[1]),
            ctypes.c_int(threads),
            ctypes.c_int(int(self.z is not None)),
        )
        while True:
            with lock:
                job = next(jobs, None)
            if job is None:
                return
            kv, row0 = job
            heads, rows = slice(kv * group, (kv + 1) * group), slice(row0, min(n, row0 + BLOCK_ROWS))
            hi = rows.stop if self.causal else n
            lo = max(0, row0 - self.window + 1) if self.window else 0
            r, c = rows.stop - row0, hi - lo
            scores = buffer[: group * r * c].view(group, r, c)
            # one product for the group's heads, (g r, Dh) @ (Dh, c): a third of the packing of three, 20% faster
            torch.mm(self.qs[heads, rows].reshape(group * r, -1), self.k[kv, lo:hi].T, out=scores.view(group * r, c))
            self.library.block_pass(
                _pointer(scores), *(ctypes.c_int(x) for x in (group, r, c, heads.start, row0, lo, n, n_h)), *fixed
            )
            if self.values is not None and self.z is not None:  # the scores are now the block's weights: P @ V
                self.z[heads, rows] = torch.mm(scores.view(group * r, c), self.values[kv, lo:hi]).view(group, r, -1)


def _in_threads(layer: _Pass, jobs: list[tuple[int, int]], workers: int, sums: tuple) -> None:
    """The blocks on `workers` threads of their own, each running its blocks whole (product, sweeps, product) with MKL
    and block_pass on one thread, into sums of its own, added to `sums` at the end. On a virtual machine whose
    cores are not always running together, one thread's block does not wait at every product's and sweep's join for
    the other core (a layer at 4,096 tokens in a slow hour: 240 ms on two threads at each step, 157 ms this way)."""
    mkl, lock, pending, errors = _mkl_threads(), threading.Lock(), iter(jobs), []
    if mkl is None:
        raise RuntimeError("MKL's per-thread count is not available here")
    own = [tuple(None if x is None else torch.zeros_like(x) for x in sums) for _ in range(workers)]

    inference = torch.is_inference_mode_enabled()  # thread-local, as autograd's mode: the workers take the caller's

    def work(mine: tuple) -> None:
        before = mkl(1)
        try:
            with torch.inference_mode(inference), torch.no_grad():
                layer.run(pending, lock, mine, 1)
        except BaseException as e:  # raised again in the caller's thread
            errors.append(e)
        finally:
            mkl(before)

    threads = [threading.Thread(target=work, args=(mine,), daemon=True) for mine in own]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    for mine in own:
        for total, part in zip(sums, mine, strict=True):
            if total is not None:
                total += part


def _layer(
    q: Tensor,
    k: Tensor,
    v: Tensor | None,
    codes: Tensor,
    scale: float,
    causal: bool,
    window: int,
    sinks: Tensor | None,
    pools: tuple[tuple[Tensor, int], ...],
    received: Tensor,
) -> tuple[Tensor, Tensor | None]:
    library = load()
    if library is None:
        raise RuntimeError(f"the CPU statistics kernel is not available here ({_error})")
    if len(pools) > 2:
        raise ValueError("the fused pass pools at most two sizes at once")
    n_h, n, _ = q.shape
    excluded = (codes & EXCLUDED) != 0
    penalty = torch.where(excluded, float("-inf"), 0.0).float().contiguous() if excluded.any() else None
    flagged, offsets, counts, masks = _flagged(codes)
    sink_logits = None if sinks is None else sinks.float().contiguous()
    p1 = pools[0] if pools else (None, 1)
    p2 = pools[1] if len(pools) > 1 else (None, 1)
    ready = scale == 1.0 and q.dtype == torch.float32 and q.is_contiguous()  # scaled by the caller (fused.py)
    values = None if v is None else v.float().contiguous()
    layer = _Pass(
        library,
        q if ready else q.float() * scale,  # float32 products, whatever the pass kept
        k.float().contiguous(),
        values,
        None if values is None else torch.empty(n_h, n, values.shape[-1], dtype=torch.float32),
        torch.zeros(len(ROW_STATS), n_h, n, dtype=torch.float32),
        tuple(_pointer(x) for x in (penalty, flagged, offsets, counts, masks, sink_logits)),
        causal,
        window,
        (p1[1], p2[1]),
        tuple(0 if p is None else p.shape[-1] for p in (p1[0], p2[0])),  # type: ignore[arg-type]
    )
    jobs = [(kv, row0) for kv in range(k.shape[0]) for row0 in range(0, n, BLOCK_ROWS)]
    threads, sums = torch.get_num_threads(), (received, p1[0], p2[0])
    if threads > 1 and len(jobs) > 1 and THREADED and _mkl_threads() is not None:
        _in_threads(layer, jobs, min(threads, len(jobs)), sums)
    else:
        layer.run(iter(jobs), threading.Lock(), sums, threads)
    return layer.out, layer.z
