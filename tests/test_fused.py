"""The fused statistics pass (attnviz/fused.py) equals the plain one within 1e-5, in both its kernels: Triton's
(attnviz/stats_kernel.py, a GPU's) and the CPU's (attnviz/cpu_stats.c through attnviz/cpu_kernel.py).

On a machine without CUDA the Triton kernel runs on CPU tensors under Triton's interpreter (TRITON_INTERPRET=1, set
by tests/conftest.py before Triton is first imported, with ATTNVIZ_FUSED=1): that checks its arithmetic, masks and
atomics, not its speed. On a CUDA machine (scripts/gpu-check.sh) the same tests run the compiled kernel on the GPU.
The CPU kernel is compiled here by the machine's C compiler and run on CPU tensors everywhere (`ENGINES`: "c").

The reference is the plain path (blocks.BlockPass through LazyAttention with ATTNVIZ_FUSED=0), itself held equal to
every-weight attention by tests/test_lazy.py, and, for what only the kernel has (sliding windows, sinks), weights
computed densely here.
"""

import dataclasses
import importlib.util
import json
import math
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch
from conftest import ROOT

from attnviz import cpu_kernel, fused
from attnviz.blocks import block_sums, key_columns, row_values
from attnviz.lazy import LazyAttention
from attnviz.tokens import NO_SPAN, TokenAxis

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
TOL = 1e-5
needs_triton = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed")
needs_cc = pytest.mark.skipif(cpu_kernel.load() is None, reason=f"the CPU kernel does not build: {cpu_kernel.error()}")
# the fused pass's two kernels: Triton's (compiled on a GPU, interpreted on a CPU) and the CPU's C kernel
ENGINES = [pytest.param("triton", marks=needs_triton), pytest.param("c", marks=needs_cc)]


def _axis(n: int, special_ends: bool = True) -> TokenAxis:
    tokens = [("," if i % 7 == 3 else "." if i % 11 == 5 else f"w{i}") for i in range(n)]
    special = [False] * n
    if special_ends:
        tokens[0], tokens[-1], special[0], special[-1] = "[CLS]", "[SEP]", True, True
    return TokenAxis(tuple(tokens), tuple(special), tuple(range(n)), (NO_SPAN,) * n)


def _qk(n_l: int, n_h: int, n_kv: int, n: int, dh: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_l, n_h, n, dh, generator=g) * 1.5
    k = torch.randn(n_l, n_kv, n, dh, generator=g)
    k[:, :, 0] += 2.0  # a key most rows favour, as a decoder's first token
    return q.to(DEVICE), k.to(DEVICE)


def _analysed(q, k, axis, kind, sides, on, precision: str = "exact", windows=(), **kw) -> LazyAttention:
    """Analysed by the plain path (on=False), Triton's kernel (True or "triton") or the CPU's ("c": CPU tensors)."""
    if on == "c":
        q, k = q.cpu(), k.cpu()
        kw = {key: v.cpu() if isinstance(v, torch.Tensor) else v for key, v in kw.items()}
    lazy = LazyAttention(q, k, axis, axis, kind, "test", precision=precision, windows=windows, **kw)
    old = os.environ.get("ATTNVIZ_FUSED")
    os.environ["ATTNVIZ_FUSED"] = {False: "0", True: "1", "triton": "1", "c": ""}[on]
    try:
        lazy.analyse(sides)
    finally:
        os.environ.pop("ATTNVIZ_FUSED") if old is None else os.environ.__setitem__("ATTNVIZ_FUSED", old)
    return lazy


def _assert_equal(a: LazyAttention, b: LazyAttention, sides) -> None:
    for side in sides:
        pa, fa, _ = a.pooled(side)
        pb, fb, _ = b.pooled(side)
        assert fa == fb
        assert abs(pa - pb).max() < TOL, side
    assert (a.received().cpu() - b.received().cpu()).abs().max() < TOL
    assert (a.lse().cpu() - b.lse().cpu()).abs().max() < TOL
    sa, sb = a.stats(), b.stats()
    assert set(sa) == set(sb)
    for key in sb:
        scale = sb[key].abs().clamp_min(1) if key in ("distance", "entropy") else 1
        assert ((sa[key].cpu() - sb[key].cpu()).abs() / scale).max() < TOL, key
        assert torch.equal(sa[key].cpu().isnan(), sb[key].cpu().isnan()), key


@pytest.mark.parametrize(
    ("kind", "n", "layers", "heads", "dh", "sides", "windows"),
    [
        ("causal", 150, 2, (4, 2), 32, (96, 32), ()),  # short: every pooled tile by products (2 and 5 tokens a cell)
        ("self", 130, 1, (3, 3), 24, (96, 32), ()),  # BERT-like: every key, no grouping, a head size to pad
        ("causal", 300, 1, (2, 1), 16, (4, 3), ()),  # long-text pooling: 75- and 100-token cells, by masked sums
        ("self", 256, 1, (2, 1), 16, (4, 2), ()),  # 64- and 128-token cells: every bin ends where a tile does
        ("causal", 200, 2, (4, 1), 16, (96,), (70, 0)),  # Gemma 3's way: a window, then a full layer; one key head
    ],
)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_the_fused_pass_equals_the_plain_one(engine, kind, n, layers, heads, dh, sides, windows):
    q, k = _qk(layers, heads[0], heads[1], n, dh)
    axis = _axis(n)
    plain = _analysed(q, k, axis, kind, sides, on=False, windows=windows)
    fast = _analysed(q, k, axis, kind, sides, on=engine, windows=windows)
    _assert_equal(fast, plain, sides)
    st = fast.stats()
    if kind == "causal":  # a decoder has no [CLS]: its special first token is the sink, in the first token's share
        assert st["cls"].abs().max() == 0 and st["first"].min() > 0
    else:
        assert (st["cls"] - st["first"]).abs().max() < TOL  # the first token is [CLS] here
    assert st["sep"].max() > 0 and st["punct"].max() > 0 and st["confidence"].min() > 0


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.slow  # about 2 s under the interpreter
def test_sinks_and_a_scale_per_layer_give_the_plain_pass_s_sums(engine):
    """gpt-oss's learned sinks (each row's weights over the tokens sum to less than 1; entropy over the tokens) and
    GPT-2's scale per layer, through the kernel and through the plain blocks: the same statistics, maps and sums."""
    q, k = _qk(2, 4, 2, 160, 16)
    axis = _axis(160, special_ends=False)
    extra = {"sink_logits": torch.tensor([[0.5, 3.0, -1.0, 6.0], [2.0, 0.0, 4.0, 1.0]], device=DEVICE),
             "scales": (0.25, 0.125)}  # fmt: skip
    plain = _analysed(q, k, axis, "causal", (96,), on=False, windows=(40, 0), **extra)
    fast = _analysed(q, k, axis, "causal", (96,), on=engine, windows=(40, 0), **extra)
    _assert_equal(fast, plain, (96,))
    mass = plain.received().sum(-1)  # (L, H): the mean row's weight over the tokens, the sink taking the rest
    assert mass.max() < 0.999 and mass.min() < 0.5


@pytest.mark.parametrize("tile", ["128,64,8,2", "64,128,4,3", "32,32,4,2"])
@needs_triton
@pytest.mark.slow  # about 5 s each under the interpreter
def test_every_tile_shape_gives_the_same_sums(tile, monkeypatch):
    """The tiles a row block sees unmasked (inside the diagonal and the window), the pooling by rows' sums when a cell
    is a tile wide or more, and the skipped shares hold for any shape the sweep of bench/fused_parts.py may pick."""
    monkeypatch.setenv("ATTNVIZ_FUSED_TILES", tile)
    n = 333
    q, k = _qk(1, 2, 1, n, 16, seed=7)
    axis = _axis(n)
    for kind, sides, windows in (("causal", (3, 2), (150,)), ("self", (96, 4), ())):
        plain = _analysed(q, k, axis, kind, sides, on=False, windows=windows)
        fast = _analysed(q, k, axis, kind, sides, on=True, windows=windows)
        _assert_equal(fast, plain, sides)


def test_the_fused_pass_runs_where_it_should(monkeypatch):
    """On a GPU where Triton imports; on a CPU where the C kernel builds (this machine has a C compiler; the
    Dockerfile's python:3.11-slim image has none, and there the plain path runs); nowhere with ATTNVIZ_FUSED=0."""
    monkeypatch.delenv("ATTNVIZ_FUSED", raising=False)
    if DEVICE == "cuda":
        assert fused.available(torch.device("cuda"))  # the default on a GPU
    assert fused.available(torch.device("cpu")) == (cpu_kernel.load() is not None)
    monkeypatch.setenv("ATTNVIZ_FUSED", "0")
    assert not fused.available(torch.device("cpu")) and not fused.available(torch.device(DEVICE))
    with pytest.raises(ValueError, match="precision is one of"):
        q, k = _qk(1, 1, 1, 20, 16)
        fused.layer_stats(
            q[0], k[0], torch.zeros(20, dtype=torch.int32), scale=0.25, causal=True, pools=(),
            received=torch.zeros(1, 20, device=DEVICE), precision="fp8",
        )  # fmt: skip


@pytest.mark.slow  # a fresh Python importing torch
def test_without_a_compiler_the_cpu_takes_the_plain_path_and_says_why(tmp_path):
    """Where no C compiler runs (a slim container), the kernel does not build, `error` says why, and a long text's
    statistics come from the plain path, the same values."""
    code = (
        "import torch; from attnviz import cpu_kernel, fused; "
        "print(cpu_kernel.load() is None, fused.available(torch.device('cpu')), cpu_kernel.error()); "
        "print(fused.check(torch.device('cpu')))"
    )
    env = {**os.environ, "CC": str(tmp_path / "no-such-cc"), "ATTNVIZ_CACHE_DIR": str(tmp_path), "ATTNVIZ_FUSED": ""}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    first, checked = out.stdout.strip().splitlines()
    missing, available, why = first.split(" ", 2)
    assert (missing, available) == ("True", "False") and "no-such-cc" in why
    assert checked.startswith("(False, ") and "no-such-cc" in checked  # what `attnviz doctor` says


@pytest.mark.skipif(DEVICE != "cuda", reason="Triton's launcher is compiled at a GPU's first launch")
def test_a_gpu_s_check_launches_triton_s_kernel():
    """`attnviz doctor`'s line on a GPU: the check launches the kernel (Triton compiles its launcher then, with the
    machine's C compiler: a slim container without one fails here, not at `available`)."""
    runs, what = fused.check(torch.device("cuda"))
    assert runs and what.startswith("Triton's fused statistics kernel on "), what


def _dense(q, k, scale, window, sinks):
    """(H, N, N) weights over the tokens with a causal mask, a sliding window and per-head sink logits, densely."""
    n_h, n, _ = q.shape
    kk = k.repeat_interleave(n_h // k.shape[0], 0)
    s = (q * scale) @ kk.transpose(-1, -2)
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    hidden = (j > i) | ((i - j >= window) if window else torch.zeros(n, n, dtype=torch.bool))
    s = s.masked_fill(hidden.to(s.device), float("-inf"))
    every = torch.cat([s, sinks[:, None, None].expand(n_h, n, 1)], -1) if sinks is not None else s
    lse = torch.logsumexp(every, -1)
    return torch.exp(s - lse[..., None]), lse


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("window", "sink"), [(9, False), (0, True), (70, True)])
def test_windows_and_sinks_equal_dense_weights(engine, window, sink, monkeypatch):
    n, dh = 140, 16
    q, k = _qk(1, 4, 2, n, dh, seed=3)
    q, k = q[0], k[0]
    if engine == "c":
        q, k = q.cpu(), k.cpu()
        monkeypatch.delenv("ATTNVIZ_FUSED", raising=False)
    else:
        monkeypatch.setenv("ATTNVIZ_FUSED", "1")  # Triton's interpreter on a CPU
    device = q.device
    scale = dh**-0.5
    sinks = torch.tensor([0.5, 3.0, -1.0, 6.0], device=device) if sink else None
    w, lse = _dense(q, k, scale, window, sinks)
    axis = _axis(n)
    keys_excluded = torch.zeros(n, dtype=torch.bool)
    keys_excluded[-1] = True
    f = 5
    side = math.ceil(n / f)
    pool = torch.zeros(4, side, side, device=device)
    received = torch.zeros(4, n, device=device)
    rows = fused.layer_stats(
        q, k, fused.key_codes(axis, keys_excluded, "causal"), scale=scale, causal=True, pools=((pool, f),),
        received=received, window=window, sinks=sinks,
    )  # fmt: skip
    assert (rows["lse"] - lse).abs().max() < TOL
    keys = key_columns(axis, "causal").to(device)
    ref = row_values(w, None, 0.0, keys, keys_excluded.to(device), n, 0, "self")
    for name, value in ref.items():
        scale_of = value.abs().clamp_min(1) if name in ("distance", "entropy") else 1
        diff = ((rows[name] - value).abs() / scale_of).nan_to_num(0.0)
        assert diff.max() < TOL, name
        assert torch.equal(rows[name].isnan(), value.isnan()), name
    assert (received - w.sum(1)).abs().max() < TOL
    assert (pool - block_sums(block_sums(w, f, -1), f, -2)).abs().max() < TOL
    if window:  # nothing lands outside the window
        assert w[:, 100, : 100 - window + 1].abs().max() == 0
    if sink:  # the sink takes its share: rows sum to less than 1, the more the larger the logit
        mass = w.sum(-1).mean(-1)
        assert mass[3] < mass[2] and (mass < 1).all()


@needs_triton
@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_fast_precision_rounds_only_the_products_inputs(monkeypatch, caplog):
    """tf32 and bf16 round the products' inputs; sums stay float32. bf16 equals the plain pass on inputs rounded the
    same way, with its own first pass and (the fast mode's long text) with the second pass alone from normalisers a
    forward pass gave; tf32 is close to exact; tf32x3 (three TF32 products) equals exact within 1e-5 (Triton's
    interpreter rounds none of them: there the tf32 cases are exact and the bf16 ones are not run)."""
    n, dh = 200, 64
    q, k = _qk(1, 2, 1, n, dh, seed=5)
    axis = _axis(n)
    exact = _analysed(q, k, axis, "causal", (96,), on=True)
    _assert_equal(_analysed(q, k, axis, "causal", (96,), on=True, precision="tf32x3"), exact, (96,))
    tf32 = _analysed(q, k, axis, "causal", (96,), on=True, precision="tf32")
    for key, value in exact.stats().items():
        scale = value.abs().clamp_min(1) if key in ("distance", "entropy") else 1
        assert ((tf32.stats()[key] - value).abs() / scale).max() < 0.01, key
    if DEVICE == "cpu":
        pytest.skip("bf16 products: Triton's interpreter does not round to bfloat16 as a GPU does (run on CUDA)")
    bf16 = _analysed(q, k, axis, "causal", (96,), on=True, precision="bf16")
    rounded = LazyAttention(
        (q * dh**-0.5).bfloat16().float(), k.bfloat16().float(), axis, axis, "causal", "test", scale=1.0
    )
    os.environ["ATTNVIZ_FUSED"] = "0"
    try:
        rounded.analyse((96,))
    finally:
        del os.environ["ATTNVIZ_FUSED"]
    _assert_equal(bf16, rounded, (96,))
    # the rounded inputs' normalisers, as a bf16 forward pass gives them: taken (each row's weights sum to 1 within
    # fused.LSE_TOL), not refused for a first pass of its own, and the same sums
    monkeypatch.setattr(fused, "_lse_refused", False)
    given = _analysed(q, k, axis, "causal", (96,), on=True, precision="bf16", normalisers=tuple(rounded.lse()))
    _assert_equal(given, rounded, (96,))
    assert "row normalisers are off" not in caplog.text


@needs_cc
def test_a_kernel_that_fails_at_run_time_leaves_the_plain_path_s_values(monkeypatch, caplog):
    """A kernel that imports but raises when it runs (Triton's first launch on a host with no C compiler, as the
    Dockerfile's slim image is): the layer pass is redone by the plain path, the log says why once, and the process
    takes the plain path from then on."""
    monkeypatch.setattr(fused, "_failed", None)
    monkeypatch.delenv("ATTNVIZ_FUSED", raising=False)

    def broken(*args, **kwargs):
        raise RuntimeError("Failed to find C compiler")

    monkeypatch.setattr(cpu_kernel, "layer_pass", broken)
    q, k = _qk(2, 4, 2, 150, 16)
    axis = _axis(150)
    plain = _analysed(q, k, axis, "causal", (96,), on=False)
    fell_back = _analysed(q, k, axis, "causal", (96,), on="c")
    _assert_equal(fell_back, plain, (96,))
    assert not fused.available(torch.device("cpu"))
    assert "Failed to find C compiler" in caplog.text


def _plain_copy(lazy: LazyAttention) -> LazyAttention:
    """The same queries and keys with nothing cached: its own analysis runs when asked."""
    return dataclasses.replace(lazy, _cache={}, _lock=threading.Lock())


@needs_cc
@pytest.mark.parametrize("backend", ["hf", "scratch"])
def test_the_forward_pass_computes_the_analysis_on_the_cpu(tiny_long_llama_dir, backend, monkeypatch):
    """Where the CPU kernel runs, a long text's forward pass computes the layer outputs and the whole analysis from one
    product of each block's scores (lazy.ForwardStats): no SDPA is called, the analysis is there before anyone asks,
    it equals the plain path's within 1e-5, and the model's output equals SDPA's pass."""
    from torch.nn import functional

    from attnviz.engines import registry
    from attnviz.engines.hooks import Hooks
    from attnviz.lazy import ForwardStats

    monkeypatch.delenv("ATTNVIZ_FUSED", raising=False)
    hf = registry.load(str(tiny_long_llama_dir), "hf", "cpu")
    engine = hf if backend == "hf" else registry.scratch_engine(hf)
    enc = engine.tokenizer.encode("The animal didn't cross the street because it was too tired. " * 40, 400)
    assert len(enc.ids) == 400
    real, calls = functional.scaled_dot_product_attention, []
    monkeypatch.setattr(functional, "scaled_dot_product_attention", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    lazy = engine.lazy_run(enc)
    assert not calls and lazy.has_stats() and "lse" in lazy._cache
    monkeypatch.setenv("ATTNVIZ_FUSED", "0")  # the reference: the plain path over the same queries and keys
    _assert_equal(lazy, _plain_copy(lazy), (96, 32))
    monkeypatch.delenv("ATTNVIZ_FUSED")

    def output(stats) -> torch.Tensor:
        hooks = Hooks(fused=True, stats=stats)
        out = engine.forward(enc, hooks)
        return (out.logits if backend == "hf" else out[0]).float()

    with_kernel = output(ForwardStats(enc.axis, "causal", engine.n_layers, engine.n_heads))
    with_sdpa = output(None)
    assert (with_kernel - with_sdpa).abs().max() < 1e-4 * with_sdpa.abs().max().clamp_min(1)


@needs_cc
def test_a_kernel_that_fails_in_the_forward_pass_leaves_sdpa_and_the_plain_path(
    tiny_long_llama_dir, monkeypatch, caplog
):
    """The kernel raising inside the forward pass: that layer and the rest run SDPA, the log says why, and the
    analysis is the plain path's, asked for later as before."""
    from attnviz.engines import registry

    monkeypatch.setattr(fused, "_failed", None)
    monkeypatch.delenv("ATTNVIZ_FUSED", raising=False)

    def broken(*args, **kwargs):
        raise RuntimeError("the kernel broke")

    hf = registry.load(str(tiny_long_llama_dir), "hf", "cpu")
    enc = hf.tokenizer.encode("The animal didn't cross the street because it was too tired. " * 40, 300)
    monkeypatch.setenv("ATTNVIZ_FUSED", "0")
    reference = hf.lazy_run(enc)  # SDPA's forward pass, the plain path's analysis
    reference.analyse()
    monkeypatch.delenv("ATTNVIZ_FUSED")
    monkeypatch.setattr(cpu_kernel, "attend_pass", broken)
    lazy = hf.lazy_run(enc)
    assert not lazy.has_stats() and "the kernel broke" in caplog.text
    assert not fused.available(torch.device("cpu"))  # the plain path from now on, in this process
    assert torch.equal(lazy.q, reference.q) and torch.equal(lazy.k, reference.k)
    _assert_equal(lazy, reference, (96,))


@needs_triton
@pytest.mark.parametrize("causal", [True, False])
def test_the_forward_pass_s_normalisers_take_the_place_of_the_first_pass(causal, monkeypatch, caplog):
    """Triton's kernel given each row's log-sum-exp (as torch's SDPA kernels give it) runs its second pass alone: the
    same rows, column sums and pooled cells as with its own first pass. Its row statistics are those of the
    normaliser it finds (the given one plus the log of each row's mass), so a given lse 0.3 too high leaves them
    unchanged and scales the column sums by exp(-0.3): the pass used what it was given. With the default tolerance
    that lse is refused: both passes run, the log says so once; one so high that every weight underflows is refused
    however lenient the tolerance. Keys left out of "confidence"'s maximum stand in a tile every row of a block sees
    (the tiles that skip the mask)."""
    monkeypatch.setenv("ATTNVIZ_FUSED", "1")
    monkeypatch.setattr(fused, "_lse_refused", False)
    n, dh, f = 128, 16, 5
    q, k = (t[0] for t in _qk(1, 2, 1, n, dh, seed=3))
    left_out = (torch.arange(n) == n - 1) | (torch.arange(n) == 10)
    codes = fused.key_codes(_axis(n), left_out, "causal" if causal else "self")

    def run(given):
        pool = torch.zeros(2, math.ceil(n / f), math.ceil(n / f), device=q.device)
        received = torch.ones(2, n, device=q.device)  # added to, not overwritten
        rows = fused.layer_stats(
            q, k, codes, scale=dh**-0.5, causal=causal, pools=((pool, f),), received=received, lse=given
        )  # fmt: skip
        return rows, received - 1, pool

    own = run(None)
    lse = own[0]["lse"]
    given = run(lse)
    monkeypatch.setattr(fused, "LSE_TOL", 1.0)
    shifted = run(lse + 0.3)
    for other in (given, shifted):
        assert set(other[0]) == set(own[0])
        for name, value in own[0].items():
            scale_of = value.abs().clamp_min(1) if name in ("distance", "entropy") else 1
            assert ((other[0][name] - value).abs() / scale_of).nan_to_num(0.0).max() < TOL, name
            assert torch.equal(other[0][name].isnan(), value.isnan()), name
    assert (given[1] - own[1]).abs().max() < TOL and (given[2] - own[2]).abs().max() < TOL
    assert (shifted[1] - own[1] * math.exp(-0.3)).abs().max() < TOL
    monkeypatch.setattr(fused, "LSE_TOL", 1e-5)
    refused = run(lse + 0.3)
    assert (refused[1] - own[1]).abs().max() < TOL and (refused[2] - own[2]).abs().max() < TOL
    assert (refused[0]["lse"] - lse).abs().max() < TOL
    assert caplog.text.count("row normalisers are off by up to 0.3") == 1
    run(lse + 0.3)
    assert caplog.text.count("row normalisers are off") == 1
    monkeypatch.setattr(fused, "LSE_TOL", 1.0)  # however lenient: an lse so high that every weight underflows to 0
    with np.errstate(divide="ignore", invalid="ignore"):  # the interpreter's numpy meets the log 0 this case is about
        absurd = run(lse + 200.0)  # is refused (its rows' mass is 0, not 1), not taken for a row that looks at nothing
    assert (absurd[1] - own[1]).abs().max() < TOL and (absurd[0]["entropy"] - own[0]["entropy"]).abs().max() < TOL


@needs_triton
@pytest.mark.parametrize("backend", ["hf", "scratch"])
@pytest.mark.slow  # about 10 s under the interpreter
def test_a_gpu_s_forward_pass_keeps_its_normalisers_for_the_analysis(tiny_long_llama_dir, backend, monkeypatch):
    """Where Triton's kernel analyses a long text after its forward pass (a GPU; here Triton's interpreter on the CPU),
    the forward pass keeps each layer's row normalisers from torch's own kernel (scratch.causal_attention), equal to
    the plain path's within 1e-5, and the analysis from them equals the plain path's. The model's output is SDPA's."""
    from attnviz.engines import registry
    from attnviz.engines.hooks import Hooks
    from attnviz.engines.scratch import causal_attention

    monkeypatch.setenv("ATTNVIZ_FUSED", "1")
    hf = registry.load(str(tiny_long_llama_dir), "hf", DEVICE)
    engine = hf if backend == "hf" else registry.scratch_engine(hf)
    enc = engine.tokenizer.encode("The animal didn't cross the street because it was too tired. " * 30, 300)
    lazy = engine.lazy_run(enc)
    assert len(lazy.normalisers) == engine.n_layers and all(t is not None for t in lazy.normalisers)
    kept = torch.stack([t for t in lazy.normalisers if t is not None])
    lazy.analyse()
    assert lazy.normalisers == ()  # used, then let go: the pass's own are cached
    monkeypatch.setenv("ATTNVIZ_FUSED", "0")
    plain = _plain_copy(lazy)
    _assert_equal(lazy, plain, (96, 32))
    assert (kept.cpu() - plain.lse().cpu()).abs().max() < TOL

    q, k, v = (torch.randn(1, 3, 70, 16) for _ in range(3))
    z, lse = causal_attention(q, k, v, 0.25)
    assert lse is not None and tuple(lse.shape) == (1, 3, 70)
    assert (z - functional_sdpa(q, k, v, 0.25)).abs().max() < 1e-6
    logits = engine.forward(enc, Hooks(fused=True, read=("lse",)))
    reference = engine.forward(enc, Hooks(fused=True))
    out, ref = ((x.logits if backend == "hf" else x[0]).float() for x in (logits, reference))
    assert (out - ref).abs().max() < 1e-5 * ref.abs().max().clamp_min(1)


def functional_sdpa(q, k, v, scale):
    from torch.nn import functional

    return functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)


@needs_triton
@pytest.mark.skipif(DEVICE == "cuda", reason="on a GPU the tests above compile the kernel for real")
@pytest.mark.slow  # about 18 s (Triton's cache empty): Triton compiles for a GPU this machine does not have
def test_the_triton_kernel_compiles_for_a_hopper_gpu_without_one():
    """Triton's interpreter runs the kernel as Python, so it cannot see what Triton's compiler refuses (a name one
    branch defines and another does not, an operation a constexpr does not have); until now only a lent GPU could.
    scripts/kernel_compile.py compiles it as a GPU machine would, for sm_90, to its binary (a fresh Python: here the
    interpreter is on): both passes, and the second pass alone (the forward pass's normalisers given), with bf16
    products (the quickest to compile; the rest of the code is the same for every precision), causal with pooled cells
    a tile wide or more (a long text's); and that pass from float32 keys, as before layer_pass rounded them once a
    layer: the bf16 keys come in half the asynchronous copies and are not converted in the loop."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts/kernel_compile.py"), "--variants", "both,given,given-k32"],
        capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    found = {row["variant"]: row for row in map(json.loads, out.stdout.splitlines())}
    assert set(found) == {"both", "given", "given-k32"}
    for row in found.values():
        assert row["elf"] and row["name"] == "_stats_kernel" and row["HGMMA"] > 0  # bf16 products: the tensor cores
    given, both, k32 = found["given"], found["both"], found["given-k32"]
    assert given["instructions"] < both["instructions"] and given["MUFU"] < both["MUFU"]  # no first pass in it
    assert 0 < given["LDGSTS"] < k32["LDGSTS"] and given["F2FP"] < k32["F2FP"], (given, k32)


@needs_cc
@pytest.mark.skipif(cpu_kernel._mkl_threads() is None, reason="torch's MKL has no per-thread count here")
@pytest.mark.parametrize("window", [0, 150])
def test_the_cpu_kernel_s_blocks_on_threads_of_their_own_equal_its_one_loop(window, monkeypatch):
    """cpu_kernel._in_threads (each thread its own blocks, MKL on one thread in each, sums of its own) gives what one
    loop over the blocks on every thread gives, and the dense weights' output, column sums and pooled cells; under
    inference mode too (the forward pass's, a thread's own), and a worker's error reaches the caller."""
    n, f1, f2 = 700, 8, 22
    q, k = _qk(1, 4, 2, n, 16, seed=3)
    q, k, v = q[0].cpu(), k[0].cpu(), torch.randn(2, n, 16, generator=torch.Generator().manual_seed(4))
    keys_excluded = torch.zeros(n, dtype=torch.bool)
    keys_excluded[-1] = True
    codes = fused.key_codes(_axis(n), keys_excluded, "causal")
    threaded = []
    real = cpu_kernel._in_threads
    monkeypatch.setattr(cpu_kernel, "_in_threads", lambda *a: threaded.append(a[2]) or real(*a))

    def run(on: bool) -> tuple[torch.Tensor, ...]:
        monkeypatch.setattr(cpu_kernel, "THREADED", on)
        received, pools = torch.zeros(4, n), ((torch.zeros(4, 88, 88), f1), (torch.zeros(4, 32, 32), f2))
        with torch.inference_mode():
            rows, z = cpu_kernel.attend_pass(
                q, k, v, codes, scale=0.25, causal=True, window=window, pools=pools, received=received
            )
        return rows, z, received, pools[0][0], pools[1][0]

    before = torch.get_num_threads()
    torch.set_num_threads(2)  # a test worker's one thread otherwise: the blocks would run in one loop either way
    try:
        one, own = run(False), run(True)
        assert threaded == [2]  # the second run, on two threads of its own
        for a, b in zip(one, own, strict=True):  # the same sums in another order: float32's rounding apart
            assert ((a - b).abs() / b.abs().clamp_min(1)).max() < 1e-6
        w, _ = _dense(q, k, 0.25, window, None)
        own_pools = ((own[3], f1), (own[4], f2))
        assert (own[1] - w @ v.repeat_interleave(2, 0)).abs().max() < TOL
        for got, want in ((own[2], w.sum(1)), *((p, block_sums(block_sums(w, f, -1), f, -2)) for p, f in own_pools)):
            assert ((got - want).abs() / want.abs().clamp_min(1)).max() < TOL  # sums of up to 700 weights

        def broken(self, jobs, lock, sums, threads):
            raise RuntimeError("a worker's block failed")

        monkeypatch.setattr(cpu_kernel._Pass, "run", broken)
        with pytest.raises(RuntimeError, match="a worker's block failed"):
            run(True)
    finally:
        torch.set_num_threads(before)
