"""Benchmark: long texts on the bundled SmolLM2, lazy attention against eager attention.

What a request for a long text costs, from its token ids to every head's pooled map and statistics:

- eager: the hf backend's every-weight path (`weights_of`, output_attentions: L x H x N x N float32), then
  head_stats() and the pooled maps from those weights (what attnviz did before lazy attention). Since issue 21 a
  Llama-family model's layers there run attnviz's attention function (`scratch.attend`), which equals transformers'
  own eager attention within 1e-5 (tests/engines/test_llama.py); before, it was transformers' eager function;
- lazy: one forward pass with SDPA keeping each layer's queries and keys, then LazyAttention.analyse()
  (row normalisers, pooled maps, statistics, attention received, in row blocks).

Each (mode, N) runs in a fresh process, so that its peak memory is its own: after the model is loaded, the text
encoded and a 32-token warm-up pass run (it reads the memory-mapped weights in), the process's peak resident set
is reset (/proc/self/clear_refs), and "added" is the peak during the request minus the resident set before it.
Exactness (lazy vs eager within 1e-5: every weight, rows, pooled maps, statistics) is checked at N = 256, 512,
1,024 first. Eager stops where its weights alone would pass
--eager-gb (default 8: half this machine's memory): that is reported, not run. The growth rate between two sizes
is log(t2 / t1) / log(N2 / N1): 1 is linear, 2 quadratic.

The FLOP floor: the arithmetic a lazy request cannot avoid (the projections of the forward pass, causal attention's
two products over the pairs a query sees, and the statistics' second QK^T over the same pairs), divided by this
device's measured float32 matrix-product speed (a 2,048-square product on the CPU, 8,192 on a GPU, best of five;
measured before the runs and again after them, the faster of the two: a slow moment does not lower the floor).
That floor's column is our time over it. Where the analysis is computed in the forward pass (attnviz's CPU kernel,
lazy.ForwardStats), no second QK^T is computed: the last two columns are the floor without it and our time over it.

--device cuda runs on the GPU. SmolLM2's weights are not on a GPU machine (they do not travel): --model shaped is
a Llama with SmolLM2's exact configuration and seeded random weights (engines/smollm2.shaped; time does not depend
on the weights); --positions 32768 extends its rotary table to 32,768 positions (a synthetic configuration:
SmolLM2 was trained to 8,192). --profile N prints where a lazy request's time goes at N tokens (torch.profiler).

--precision exact|tf32x3|tf32|bf16 chooses the fused analysis's products (a GPU's); --forward bf16 runs the forward
pass in bf16 too (the fast mode end to end); --errors N measures both against exact; --repeats R runs each lazy size
R times, each in its own process, and reports the slowest.

Usage: python bench/long_inputs.py [--sizes 256,512,...] [--backend hf|scratch] [--device cpu|cuda]
       [--model smollm2|shaped] [--positions N] [--plot PNG] [--profile N] [--precision P] [--forward F]
       [--errors N,...] [--repeats R]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")  # large tensors on huge pages, as the server has them (attnviz/cli)
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SIZES = (256, 512, 1024, 2048, 4096, 8192)
EXACT_SIZES = (256, 512, 1024)
TOL = 1e-5
STAT_NAMES = ("entropy", "distance", "cls", "sep", "punct", "prev", "next", "self", "confidence", "first")


def _status() -> dict[str, int]:
    text = Path("/proc/self/status").read_text()
    return {k: int(re.search(rf"{k}:\s+(\d+)", text).group(1)) * 1024 for k in ("VmRSS", "VmHWM")}


def _engine(backend: str, device: str = "cpu", model: str = "smollm2", forward: str = "float32"):
    """SmolLM2, or the folder of a SmolLM2-shaped Llama (--model shaped), on a backend and a device; with forward
    "bf16" its weights (parameters: the rotary tables stay float32) are rounded to bfloat16, so that the forward
    pass runs in bf16 (the fast mode end to end)."""
    import torch
    from transformers.utils import logging as hf_logging

    from attnviz.engines import registry

    hf_logging.set_verbosity_error()
    torch.set_grad_enabled(False)
    hf = registry.load(model, "hf", device)
    if forward == "bf16":
        for p in hf.model.parameters():
            p.data = p.data.to(torch.bfloat16)
    return hf if backend == "hf" else registry.scratch_engine(hf)


def _layers_heads(model: str) -> int:
    """Layers x heads of a bundled model or a model folder, from its config (what every weight of a text takes)."""
    from transformers import AutoConfig

    from attnviz.engines import bundles

    folder = bundles.BUNDLES[model].converted() if model in bundles.BUNDLES else model
    config = AutoConfig.from_pretrained(folder)
    return config.num_hidden_layers * config.num_attention_heads


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def gflops(device: str) -> float:
    """This device's float32 matrix-product speed, GFLOP/s: the best of five square products."""
    import torch

    n = 8192 if device.startswith("cuda") else 2048
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    a @ b
    best = math.inf
    for _ in range(5):
        _sync(device)
        start = time.perf_counter()
        a @ b
        _sync(device)
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def _windows(config) -> list[int]:
    """Each layer's sliding window (0: every earlier key), as the config states it (Gemma 3's layer_types)."""
    layers, window = config.num_hidden_layers, getattr(config, "sliding_window", None) or 0
    kinds = getattr(config, "layer_types", None)
    if kinds:
        return [window if kind == "sliding_attention" else 0 for kind in kinds]
    return [window] * layers


def flops(config, n: int, second: bool = True) -> float:
    """The arithmetic of a lazy request at n tokens: projections, causal attention (two products) and the
    statistics' second QK^T (`second`; not where the analysis is computed in the forward pass, as attnviz's CPU
    kernel does), each over the pairs a query sees: (n + 1) n / 2 on a full layer, w (w + 1) / 2 + (n - w) w on a
    layer with a window of w < n tokens."""
    d, layers, heads = config.hidden_size, config.num_hidden_layers, config.num_attention_heads
    kv, dh = config.num_key_value_heads, getattr(config, "head_dim", None) or d // heads
    per_token = layers * (2 * d * heads * dh + 2 * d * kv * dh + 3 * d * config.intermediate_size)  # multiply-adds
    pairs = sum(w * (w + 1) / 2 + (n - w) * w if 0 < w < n else n * (n + 1) / 2 for w in _windows(config))
    return 2 * per_token * n + (3 if second else 2) * (2 * dh * pairs * heads)


def _encode(engine, n: int):
    """The first n tokens of this repository's own prose (README and docs, DESIGN, results), repeated if need be.

    The prose is cut to about what n tokens take (5 characters a token to start, more if that falls short): the
    whole of it is past the tokenizer's limit on a text (tokens.MAX_CHARS), which refused it as one text."""
    from attnviz.tokens import MAX_CHARS

    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "DESIGN.md", ROOT / "bench/RESULTS.md"]
    prose = "\n\n".join(f.read_text(encoding="utf-8") for f in files)
    chars = 5 * n + 1000
    while True:
        text = (prose * (chars // len(prose) + 1))[: min(chars, MAX_CHARS)]
        enc = engine.tokenizer.encode(text, n)
        if len(enc.ids) == n:
            return enc
        if chars >= MAX_CHARS:
            raise ValueError(f"{MAX_CHARS:,} characters of prose make {len(enc.ids):,} tokens, fewer than {n:,}")
        chars *= 2


def _kernel_warm(engine, enc, device: str, precision: str) -> float:
    """On a GPU: one layer of zeros through the analysis at this text's length, so that Triton's compile for this
    length's pooling (attnviz/stats_kernel.py) is not timed as the request; its seconds (a fresh process's first
    long text pays them once; Triton keeps compiled kernels on disk)."""
    import torch

    from attnviz.lazy import LazyAttention

    config = engine.model.config
    heads, kv = config.num_attention_heads, config.num_key_value_heads
    dh = getattr(config, "head_dim", None) or config.hidden_size // heads
    n = len(enc.ids)
    start = time.perf_counter()
    zeros = torch.zeros(1, heads, n, dh, device=device), torch.zeros(1, kv, n, dh, device=device)
    LazyAttention(*zeros, enc.axis, enc.axis, "causal", "warm-up", precision=precision).analyse()
    _sync(device)
    return time.perf_counter() - start


def child(
    mode: str,
    n: int,
    backend: str,
    device: str = "cpu",
    model: str = "smollm2",
    precision: str = "exact",
    forward: str = "float32",
) -> dict:
    """One request in this process: its seconds (forward, analysis) and the peak memory it added (the process's
    resident set on the CPU; allocated GPU memory on a GPU)."""
    import torch

    from attnviz.analysis.head_stats import head_stats
    from attnviz.blocks import block_mean, pool_factor
    from attnviz.lazy import GRID_SIDE, THUMB_SIDE
    from attnviz.result import AttentionResult

    engine = _engine(backend, device, model, forward)
    enc = _encode(engine, n)
    warm = _encode(engine, 32)  # the weights are memory-mapped: a first pass reads them all in (~0.5 GB resident)
    with torch.inference_mode():
        engine.weights_of(warm.ids) if mode == "eager" else engine.lazy_run(warm).analyse()
    gpu = device.startswith("cuda")
    compile_s = _kernel_warm(engine, enc, device, precision) if gpu and mode == "lazy" else 0.0
    _sync(device)
    if gpu:
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        Path("/proc/self/clear_refs").write_text("5")  # the peak resident set starts again from here
        before = _status()["VmRSS"]
    start = time.perf_counter()
    if mode == "eager":
        with torch.inference_mode():
            w = engine.weights_of(enc.ids).cpu()  # (L, H, N, N)
        forward = time.perf_counter() - start
        eager = AttentionResult(w, enc.axis, enc.axis, "causal", engine.name)
        head_stats(eager)
        for side in (GRID_SIDE, THUMB_SIDE):
            f = pool_factor(n, side)
            block_mean(w, f, f)
    else:
        lazy = engine.lazy_run(enc)
        lazy.precision = precision
        _sync(device)
        forward = time.perf_counter() - start
        lazy.analyse()
        _sync(device)
    total = time.perf_counter() - start
    added = torch.cuda.max_memory_allocated() - before if gpu else _status()["VmHWM"] - before
    config = engine.model.config
    return {
        "mode": mode,
        "n": n,
        "forward_s": forward,
        "total_s": total,
        "added_bytes": added,
        "flops": flops(config, n),
        "flops_forward": flops(config, n, second=False),
        "compile_s": compile_s,
    }


def _differences(fast, lazy) -> dict:
    """The largest differences of one analysis from another: pooled maps, attention received, row normalisers, each
    statistic (distance and entropy relative to their size where above 1)."""
    import numpy as np

    row = {
        "pooled": float(np.abs(fast.pooled()[0] - lazy.pooled()[0]).max()),
        "received": (fast.received() - lazy.received()).abs().max().item(),
        "lse": (fast.lse() - lazy.lse()).abs().max().item(),
    }
    ref = lazy.stats()
    for key, value in fast.stats().items():
        scale = ref[key].abs().clamp_min(1) if key in ("distance", "entropy") else 1
        row[key] = ((value - ref[key]).nan_to_num(0.0).abs() / scale).max().item()
    return row


def errors(n: int, backend: str, device: str, model: str) -> dict:
    """Largest differences of the fast precisions' analysis from the exact one at n tokens (the same queries and
    keys): pooled maps, attention received, row normalisers, each statistic (distance and entropy relative to their
    size where above 1)."""
    import torch

    from attnviz.lazy import LazyAttention

    engine = _engine(backend, device, model)
    lazy = engine.lazy_run(_encode(engine, n))
    lazy.analyse()
    out: dict = {"n": n}
    gpu = device.startswith("cuda")
    for precision in ("tf32x3", "tf32", "bf16") if gpu else ("bf16",):
        if gpu:
            fast = LazyAttention(lazy.q, lazy.k, lazy.target, lazy.source, lazy.kind, "fast", precision=precision)
        else:  # no fused kernel here: its bf16 mode is the plain pass on inputs rounded as the kernel rounds them
            # (tests/test_fused.py holds the two equal within 1e-5 on CUDA); tf32's rounding is the GPU's own
            q, k = (lazy.q * lazy.scale).bfloat16().float(), lazy.k.bfloat16().float()
            fast = LazyAttention(q, k, lazy.target, lazy.source, lazy.kind, "fast", scale=1.0)
        fast.analyse()
        out[precision] = _differences(fast, lazy)
    if gpu:  # the fast mode end to end: the forward pass in bf16 too (the weights rounded), bf16 products
        for p in engine.model.parameters():
            p.data = p.data.to(torch.bfloat16)
        fast = engine.lazy_run(_encode(engine, n))
        fast.precision = "bf16"
        fast.analyse()
        out["bf16 forward"] = _differences(fast, lazy)
    return out


def per_layer(n: int, backend: str, device: str, model: str) -> dict:
    """Each layer's time at n tokens and its sliding window: a windowed layer's time should grow as N x window, a
    full layer's as N². A layer's time is its part of the forward pass (between the pass's per-layer progress calls:
    its projections, attention and, where the CPU kernel runs, its whole analysis; the MLP before it), plus its part
    of LazyAttention.analyse where the analysis runs after the pass (a GPU, the plain path)."""
    from attnviz import fused

    engine = _engine(backend, device, model)
    kernel: list[float] = []  # each call of the CPU kernel in the forward pass: a layer's attention and analysis
    real = fused.attend_stats

    def timed(*args, **kwargs):
        start = time.perf_counter()
        out = real(*args, **kwargs)
        kernel.append(time.perf_counter() - start)
        return out

    fused.attend_stats = timed
    marks = [time.perf_counter()]
    lazy = engine.lazy_run(_encode(engine, n), progress=lambda done, total: marks.append(time.perf_counter()))
    seconds = [b - a for a, b in zip(marks, marks[1:], strict=False)]
    if not lazy.has_stats():
        marks = [time.perf_counter()]
        lazy.analyse(progress=lambda done, total: marks.append(time.perf_counter()))
        seconds = [f + b - a for f, a, b in zip(seconds, marks, marks[1:], strict=False)]
    windows = [lazy.layer_window(i) for i in range(lazy.n_layers)]
    return {"n": n, "seconds": seconds, "kernel": kernel if len(kernel) == len(windows) else [], "windows": windows}


# The analysis's parts a profile names (module, attribute, label): each call wrapped in a record_function of that label
# while the profile runs, so that its table says what the time outside the statistics kernel is (2026-11-30: about
# 0.2 s of fast mode's 0.61 s analysis at 32,768 tokens on the H200, not broken down)
PARTS = (
    ("attnviz.lazy", "layer_sums", "zeroed sums"),
    ("attnviz.fused", "layer_stats", "a layer's statistics, all of it"),
    ("attnviz.fused", "given_normalisers", "the kernel's pass from given normalisers, its check and sums"),
    ("attnviz.stats_kernel", "layer_pass", "the Triton kernel's launch"),
    ("attnviz.fused", "_with_neighbours", "previous, next and self shares"),
    ("attnviz.blocks", "BlockPass.add_rows", "a layer's sums added up"),
    ("attnviz.lazy", "LazyAttention._keep", "the pass's results kept"),
)


def _labelled():
    """A context in which each of PARTS runs under a torch.profiler.record_function of its label."""
    import contextlib
    import functools
    import importlib

    from torch.profiler import record_function

    @contextlib.contextmanager
    def patched():
        undo = []
        for module_name, attr, label in PARTS:
            try:
                owner = importlib.import_module(module_name)
            except ImportError:  # Triton's kernel where Triton is not installed
                continue
            *outer, name = attr.split(".")
            for part in outer:
                owner = getattr(owner, part)
            original = getattr(owner, name)

            def wrapped(*args, _original=original, _label=label, **kwargs):
                with record_function(f"attnviz: {_label}"):
                    return _original(*args, **kwargs)

            setattr(owner, name, functools.wraps(original)(wrapped))
            undo.append((owner, name, original))
        try:
            yield
        finally:
            for owner, name, original in reversed(undo):
                setattr(owner, name, original)

    return patched()


def _parts_table(prof, took: float) -> str:
    """The PARTS' rows of a profile: calls, wall time on the host (CPU total, waits included) and device time."""
    rows = [e for e in prof.key_averages() if e.key.startswith("attnviz: ")]
    lines = ["| part | calls | host total | device total |", "|---|---:|---:|---:|"]
    for e in sorted(rows, key=lambda e: -e.cpu_time_total):
        device = getattr(e, "device_time_total", 0) or getattr(e, "cuda_time_total", 0)
        lines.append(f"| {e.key[9:]} | {e.count} | {e.cpu_time_total / 1e6:.3f} s | {device / 1e6:.3f} s |")
    return (
        f"The analysis's parts ({took:.2f} s under the profiler; parts nest: a layer's statistics hold the rest "
        "but the sums, the adding up and the keeping):\n\n" + "\n".join(lines)
    )


def profile(n: int, backend: str, device: str, model: str, precision: str = "exact", forward: str = "float32") -> str:
    """Where a lazy request's time goes at n tokens: the forward pass and the analysis, each by operator, and the
    analysis by its parts (PARTS) and by host time."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    engine = _engine(backend, device, model, forward)
    enc = _encode(engine, n)
    engine.lazy_run(_encode(engine, 32)).analyse()
    if device.startswith("cuda"):
        _kernel_warm(engine, enc, device, precision)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    sort = "self_cuda_time_total" if device.startswith("cuda") else "self_cpu_time_total"
    out = []
    for part in ("forward", "analysis"):
        start = time.perf_counter()
        with torch_profile(activities=activities) as prof, _labelled():
            if part == "forward":
                lazy = engine.lazy_run(enc)
            else:
                lazy.precision = precision
                lazy.analyse()
            _sync(device)
        took = time.perf_counter() - start
        table = prof.key_averages().table(sort_by=sort, row_limit=12, max_name_column_width=40)
        out.append(f"## {part} at N = {n:,}: {took:.1f} s (under the profiler)\n\n{table}")
        if part == "analysis":
            out.append(_parts_table(prof, took))
            host = prof.key_averages().table(sort_by="cpu_time_total", row_limit=15, max_name_column_width=60)
            out.append(f"\nThe analysis by host time (waits for the device included):\n\n{host}")
    return "\n".join(out)


def exactness(n: int, backend: str, device: str = "cpu", model: str = "smollm2") -> dict:
    """Largest differences of lazy from eager: weights, picked rows, pooled maps, attention received, statistics."""
    import torch

    from attnviz.analysis.head_stats import head_stats
    from attnviz.blocks import block_mean
    from attnviz.result import AttentionResult

    engine = _engine(backend, device, model)
    enc = _encode(engine, n)
    with torch.inference_mode():
        w = engine.weights_of(enc.ids).cpu()
    lazy = engine.lazy_run(enc)
    n_l, n_h = w.shape[:2]
    out = {"n": n}
    out["weights"] = (lazy.tile(range(n_l), range(n_h), slice(None), slice(None)) - w).abs().max().item()
    picked = [0, n // 3, n // 2, n - 1]
    out["rows"] = (lazy.rows(picked) - w[:, :, picked]).abs().max().item()
    pooled, f, _ = lazy.pooled()
    out["pooled"] = (torch.from_numpy(pooled) - block_mean(w, f, f)).abs().max().item()
    out["received"] = (lazy.received() - w.mean(-2)).abs().max().item()
    ours, ref = lazy.stats(), head_stats(AttentionResult(w, enc.axis, enc.axis, "causal", engine.name))
    out["stats"] = max(  # relative to size for statistics in tokens or nats, as tests/test_lazy.py does
        (((ours[k] - ref[k]).abs() / (ref[k].abs().clamp_min(1) if k in ("distance", "entropy") else 1)).max().item())
        for k in ref
    )
    return out


def _run_child(*args: str, precision: str = "exact", forward: str = "float32") -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", *args, "--precision", precision, "--forward", forward],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _growth(rows: list[dict], key: str) -> list[str]:
    out = ["–"]
    for a, b in zip(rows, rows[1:], strict=False):
        if key in a and key in b and a[key] > 0 and b[key] > 0:
            out.append(f"{math.log(b[key] / a[key]) / math.log(b['n'] / a['n']):.2f}")
        else:
            out.append("–")
    return out


def _plot(table: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode, style in (("eager", "o-"), ("lazy", "s-")):
        rows = [r for r in table[mode] if "total_s" in r]
        if rows:
            a.plot([r["n"] for r in rows], [r["total_s"] for r in rows], style, label=mode)
            b.plot([r["n"] for r in rows], [r["added_bytes"] / 2**30 for r in rows], style, label=mode)
    for ax, title, unit in (
        (a, "time to every head's pooled map and statistics", "seconds"),
        (b, "peak memory added by the request", "GiB"),
    ):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens N")
        ax.set_ylabel(unit)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle("SmolLM2-135M (30 layers x 9 heads) on the CPU: eager vs lazy attention", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--backend", choices=("hf", "scratch"), default="hf")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--model", choices=("smollm2", "gemma3", "shaped"), default="smollm2")
    parser.add_argument("--positions", type=int, default=8192, help="--model shaped: its rotary table's length")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="print where the time goes at N tokens")
    parser.add_argument("--eager-gb", type=float, default=8.0, help="eager is not run where its weights pass this")
    parser.add_argument("--no-exact", action="store_true")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each lazy size, each in its own process")
    parser.add_argument("--plot", type=Path, default=None, help="write the time and memory plot (PNG) here")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument(
        "--precision",
        choices=("exact", "tf32x3", "tf32", "bf16"),
        default="exact",
        help="the fused analysis's products (GPU)",
    )
    parser.add_argument(
        "--forward",
        choices=("float32", "bf16"),
        default="float32",
        help="the forward pass's weights and products (GPU; bf16: the fast mode end to end)",
    )
    parser.add_argument("--errors", default="", metavar="N,...", help="the fast precisions' error at these sizes")
    parser.add_argument(
        "--per-layer", default="", metavar="N,...", help="each kind of layer's time (forward, analysis) at N"
    )
    parser.add_argument("--child", nargs=5, metavar=("MODE", "N", "BACKEND", "DEVICE", "MODEL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, n, backend, device, model = args.child
        run = {"exact": exactness, "errors": errors, "layers": per_layer}.get(mode) or (
            lambda *a: child(mode, *a, args.precision, args.forward)
        )
        print(json.dumps(run(int(n), backend, device, model)))
        return

    import torch

    model, label = "smollm2", "SmolLM2"
    if args.model == "gemma3":
        model, label = "gemma3", "Gemma 3 270M (windows of 512 tokens on 15 of 18 layers)"
    if args.model == "shaped":
        import tempfile

        from attnviz.engines import registry, smollm2

        folder = Path(tempfile.mkdtemp(prefix="smollm2-shaped-"))
        model = str(smollm2.shaped(folder, registry.default_model_dir(), seed=0, max_positions=args.positions))
        label = f"a Llama of SmolLM2's shape, seeded random weights, rotary table to {args.positions:,} positions"
        if args.positions > 8192:
            label += " (synthetic: SmolLM2 was trained to 8,192)"
    if args.profile:
        print(profile(args.profile, args.backend, args.device, model, args.precision, args.forward))
        return
    if args.per_layer:
        print(
            "| N | windowed layers: mean time | their attention and analysis (the CPU kernel) | full layers: mean time "
            "| theirs |\n|---|---|---|---|---|"
        )
        rows = []
        for n in args.per_layer.split(","):
            e = _run_child("layers", n, args.backend, args.device, model)
            if "error" in e:
                print(f"| {n} | error: {e['error']} |")
                continue
            mean = lambda ts: sum(ts) / len(ts) if ts else float("nan")  # noqa: E731
            row: dict = {"n": int(n)}
            for key, times in (("", e["seconds"]), (" kernel", e["kernel"] or [math.nan] * len(e["windows"]))):
                row["windowed" + key] = mean([t for t, w in zip(times, e["windows"], strict=True) if w])
                row["full" + key] = mean([t for t, w in zip(times, e["windows"], strict=True) if not w])
            rows.append(row)
            count = sum(1 for w in e["windows"] if w)
            print(
                f"| {int(n):,} | {row['windowed']:.2f} s ({count}) | {row['windowed kernel']:.3f} s | "
                f"{row['full']:.2f} s ({len(e['windows']) - count}) | {row['full kernel']:.3f} s |"
            )
        for key in ("windowed", "windowed kernel", "full", "full kernel"):
            print(f"\ngrowth rate, {key} layers (1 linear, 2 quadratic): " + ", ".join(_growth(rows, key)[1:]))
        return
    if args.errors:
        print(
            "| N | precision | pooled | received | lse | " + " | ".join(STAT_NAMES) + " |\n"
            + "|---" * (5 + len(STAT_NAMES)) + "|"
        )  # fmt: skip
        for n in args.errors.split(","):
            e = _run_child("errors", n, args.backend, args.device, model)
            if "error" in e:
                print(f"| {n} | error: {e['error']} |")
                continue
            for precision in ("tf32x3", "tf32", "bf16", "bf16 forward"):
                if precision not in e:
                    continue
                row = e[precision]
                cells = " | ".join(f"{row[k]:.1e}" for k in ("pooled", "received", "lse", *STAT_NAMES))
                print(f"| {int(n):,} | {precision} | {cells} |")
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    speed = gflops(args.device)
    device_name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    print(
        f"# long inputs: {label} ({args.backend}), {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, torch {torch.__version__}, {device_name}; float32 matrix products "
        f"{speed:,.0f} GFLOP/s; the analysis's products: {args.precision}; the forward pass: {args.forward}"
    )
    failed = False
    if not args.no_exact:
        print("\n| N | weights | rows | pooled | received | statistics | within 1e-5 |\n|---|---|---|---|---|---|---|")
        for n in EXACT_SIZES:
            e = _run_child("exact", str(n), args.backend, args.device, model)
            if "error" in e:
                print(f"| {n} | error: {e['error']} |")
                failed = True
                continue
            ok = all(e[k] < TOL for k in ("weights", "rows", "pooled", "received", "stats"))
            failed |= not ok
            print(
                f"| {n} | {e['weights']:.1e} | {e['rows']:.1e} | {e['pooled']:.1e} | {e['received']:.1e} | "
                f"{e['stats']:.1e} | {'yes' if ok else 'NO'} |"
            )
    table: dict[str, list[dict]] = {"eager": [], "lazy": []}
    layers_heads = _layers_heads(model)
    for n in sizes:
        for mode in ("eager", "lazy"):
            weights_gb = layers_heads * n * n * 4 / 1e9
            if mode == "eager" and weights_gb > args.eager_gb:
                table[mode].append({"n": n, "skipped": f"not run: its weights alone are {weights_gb:.0f} GB"})
                continue
            runs = []
            for i in range(args.repeats if mode == "lazy" else 1):  # each in a fresh process; the slowest reported
                x = _run_child(
                    mode, str(n), args.backend, args.device, model, precision=args.precision, forward=args.forward
                )
                runs.append(x)
                shown = (
                    f"{x['total_s']:.2f} s (forward {x['forward_s']:.2f} s), +{x['added_bytes'] / 2**30:.2f} GiB "
                    f"(Triton's compile before it: {x['compile_s']:.1f} s)"
                    if "total_s" in x
                    else x["error"]
                )  # each run as it ends: a run cut by a time limit keeps the ones before it
                print(f"  {mode} N={n} run {i + 1}: {shown}", file=sys.stderr, flush=True)
            done = [x for x in runs if "total_s" in x]
            r = max(done, key=lambda x: x["total_s"]) if done else runs[0]
            r["n"] = n
            r["runs"] = [x["total_s"] for x in done]
            table[mode].append(r)
    after = gflops(args.device)  # again after the runs: the floor is what the device can do, its faster measurement
    print(f"\nfloat32 matrix products before and after the runs: {speed:,.0f} and {after:,.0f} GFLOP/s (the floor's)")
    speed = max(speed, after)
    print(
        "\n| N | eager: seconds | eager: peak added | lazy: forward | lazy: total seconds | lazy: peak added | "
        "eager / lazy time | FLOP floor | lazy / floor | floor, no second QK^T | lazy / it |"
        "\n|---|---|---|---|---|---|---|---|---|---|---|"
    )
    for e, z in zip(table["eager"], table["lazy"], strict=True):
        eager_t = f"{e['total_s']:.1f}" if "total_s" in e else e.get("skipped", e.get("error", "–"))
        eager_m = f"{e['added_bytes'] / 2**30:.2f} GiB" if "total_s" in e else "–"
        lazy_t = f"{z['total_s']:.2f}" if "total_s" in z else z.get("error", "–")  # hundredths: a GPU's 1 s target
        if len(z.get("runs", [])) > 1:
            lazy_t += " (worst of " + " / ".join(f"{t:.2f}" for t in z["runs"]) + ")"
        lazy_f = f"{z['forward_s']:.2f}" if "total_s" in z else "–"
        lazy_m = f"{z['added_bytes'] / 2**30:.2f} GiB" if "total_s" in z else "–"
        ratio = f"{e['total_s'] / z['total_s']:.1f}x" if "total_s" in e and "total_s" in z else "–"
        floor = z["flops"] / (speed * 1e9) if "total_s" in z else None
        floor_s, over = (f"{floor:.2f} s", f"{z['total_s'] / floor:.2f}x") if floor else ("–", "–")
        one = z["flops_forward"] / (speed * 1e9) if "total_s" in z else None
        one_s, one_over = (f"{one:.2f} s", f"{z['total_s'] / one:.2f}x") if one else ("–", "–")
        print(
            f"| {e['n']:,} | {eager_t} | {eager_m} | {lazy_f} | {lazy_t} | {lazy_m} | {ratio} | {floor_s} | {over} "
            f"| {one_s} | {one_over} |"
        )
    for mode in ("eager", "lazy"):
        rows = [r for r in table[mode] if "total_s" in r]
        if len(rows) > 1:
            t, m = _growth(rows, "total_s"), _growth(rows, "added_bytes")
            pairs = zip(rows, rows[1:], t[1:], m[1:], strict=False)
            steps = ", ".join(f"{a['n']}→{b['n']}: time {x}, memory {y}" for a, b, x, y in pairs)
            print(f"\ngrowth rate, {mode} (1 linear, 2 quadratic): {steps}")
    if args.plot:
        _plot(table, args.plot)
        print(f"\nplot: {args.plot}")
    if not args.device.startswith("cuda"):
        gpu = "a GPU is here" if torch.cuda.is_available() else "no GPU on this machine"
        print(f"\nRan on the CPU ({gpu}): --device cuda --model shaped measures a GPU.")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
