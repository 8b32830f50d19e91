"""GPU checks: skipped cleanly where torch.cuda.is_available() is false."""

import pytest
import torch
from torch import nn

from attnviz.engines import registry
from attnviz.engines.scratch import MultiHeadAttention, causal_mask, scaled_dot_product_attention

pytestmark = [  # slow: a GPU (skipped without one)
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here"),
]


def test_scratch_mha_on_gpu_equals_cpu():
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(768, 12, batch_first=True).eval()
    cpu = MultiHeadAttention.from_torch(ref).eval()
    gpu = MultiHeadAttention.from_torch(ref.cuda()).eval()
    x = torch.randn(2, 64, 768)
    with torch.no_grad():
        _, w_cpu = cpu(x, x, x, causal_mask(64))
        _, w_gpu = gpu(x.cuda(), x.cuda(), x.cuda(), causal_mask(64, device="cuda"))
    assert next(gpu.parameters()).is_cuda
    assert (w_gpu.cpu() - w_cpu).abs().max() < 1e-4


def test_scratch_bert_on_gpu_equals_cpu(bundled_scratch):
    gpu = registry.load("default", "scratch", "cuda")
    text = "The animal didn't cross the street because it was too tired."
    r_gpu, r_cpu = gpu.run(gpu.encode(text))["self"], bundled_scratch.run(bundled_scratch.encode(text))["self"]
    assert r_gpu.device.startswith("cuda")
    assert (r_gpu.weights - r_cpu.weights).abs().max() < 1e-4


def test_scratch_bert_equals_hugging_face_on_gpu():
    hf, ours = registry.load("default", "hf", "cuda"), registry.load("default", "scratch", "cuda")
    text = "The animal didn't cross the street because it was too tired."
    a, b = hf.run(hf.encode(text))["self"], ours.run(ours.encode(text))["self"]
    assert a.device.startswith("cuda") and b.device.startswith("cuda")
    assert (a.weights - b.weights).abs().max() < 1e-5


@pytest.mark.parametrize("n", [1024, 4096])
@pytest.mark.parametrize("backend", ["hf", "scratch"])
def test_lazy_on_gpu_equals_eager_on_cpu(tiny_long_llama_dir, backend, n):
    """The long-input path on CUDA (Q and K from the GPU pass) against every weight computed eagerly on the CPU."""
    from attnviz.blocks import block_mean

    cpu = registry.load(str(tiny_long_llama_dir), "hf", "cpu")
    gpu = registry.load(str(tiny_long_llama_dir), "hf", "cuda")
    if backend == "scratch":
        cpu, gpu = registry.scratch_engine(cpu), registry.scratch_engine(gpu)
    text = "The animal didn't cross the street because it was too tired. In 1969, two walked. " * (n // 15 + 1)
    enc = cpu.tokenizer.encode(text, n)
    assert len(enc.ids) == n
    with torch.inference_mode():
        w = cpu.weights_of(enc.ids)  # (L, H, N, N) on the CPU: the reference
    lazy = gpu.lazy_run(enc)
    assert lazy.device.startswith("cuda")
    picked = [0, 1, n // 2, n - 1]
    assert (lazy.rows(picked) - w[:, :, picked]).abs().max() < 1e-4
    pooled, f, _ = lazy.pooled(64)
    assert (torch.from_numpy(pooled) - block_mean(w, f, f)).abs().max() < 1e-5
    assert (lazy.received() - w.mean(-2)).abs().max() < 1e-5


def test_head_count_models_and_mask_kernels_on_gpu():
    from attnviz.lessons import head_models, kernels

    for task in head_models.TASKS:
        stated = {m["heads"]: m["accuracy"] for m in head_models.shipped(task)["models"]}
        for m in head_models.held_out_accuracy(task, device="cuda")["models"]:
            assert abs(m["accuracy"] - stated[m["heads"]]) < 1e-3
    q, k, v = (torch.randn(1, 8, 2048, 64, device="cuda") for _ in range(3))
    out, band = kernels.sliding_window_attention(q, k, v, 64, block=128)
    ref_out, ref_w = scaled_dot_product_attention(q, k, v, kernels.sliding_window(2048, 64).cuda())
    assert (out - ref_out).abs().max() < 1e-5 and (kernels.band_to_dense(band, 64) - ref_w).abs().max() < 1e-5


# -- SmolLM2's exact shape with seeded random weights (what travels to a GPU machine; the parity is about our code) --


@pytest.fixture(scope="module")
def shaped_dir(tmp_path_factory):
    from attnviz.engines import smollm2

    return smollm2.shaped(tmp_path_factory.mktemp("smollm2-shaped"), registry.default_model_dir(), seed=0)


def _shaped_text(engine, n: int):
    from test_lazy import PARAGRAPH

    enc = engine.tokenizer.encode(PARAGRAPH * (n // 30 + 1), n)
    assert len(enc.ids) == n
    return enc


def test_smollm2_shaped_scratch_equals_hugging_face_eager_on_cuda(shaped_dir):
    from conftest import eager_reference

    ours = registry.scratch_engine(registry.load(str(shaped_dir), "hf", "cuda"))
    reference = eager_reference(shaped_dir).cuda()  # transformers' own eager attention, on the GPU
    enc = _shaped_text(ours, 1024)
    with torch.inference_mode():
        w = ours.weights_of(enc.ids)  # (L, H, N, N): computed on the GPU, handed back on the CPU
        out = reference(input_ids=torch.tensor([list(enc.ids)], device="cuda"), output_attentions=True)
        ref = torch.stack([a[0] for a in out.attentions])
    assert ours.device.type == "cuda" and ref.is_cuda and w.shape == ref.shape == (30, 9, 1024, 1024)
    assert (w - ref.cpu()).abs().max().item() < 1e-4


@pytest.mark.parametrize("n", [1024, 4096])
@pytest.mark.parametrize("backend", ["hf", "scratch"])
def test_smollm2_shaped_lazy_on_cuda_equals_eager_on_cuda(shaped_dir, backend, n, caplog):
    """Q and K stay on the GPU; every tile, row, pooled map and statistic computed there equals eager's. The forward
    pass kept every layer's row normalisers from torch's kernel, and the analysis took them (none refused)."""
    from test_lazy import _assert_matches

    from attnviz.result import AttentionResult

    engine = registry.load(str(shaped_dir), "hf", "cuda")
    engine = registry.scratch_engine(engine) if backend == "scratch" else engine
    enc = _shaped_text(engine, n)
    with torch.inference_mode():
        w = engine.weights_of(enc.ids).cpu()  # computed on the GPU; 18 GB at 4,096, held on the CPU for the check
    lazy = engine.lazy_run(enc)
    assert lazy.q.is_cuda and lazy.k.is_cuda and lazy.device.startswith("cuda")
    assert len(lazy.normalisers) == 30 and all(t is not None and t.is_cuda for t in lazy.normalisers)
    _assert_matches(lazy, AttentionResult(w, enc.axis, enc.axis, "causal", engine.name))
    assert lazy.notice is None and lazy.normalisers == () and "row normalisers are off" not in caplog.text


def test_the_first_pass_on_cuda_builds_no_layer_s_scores(shaped_dir):
    """The fused pass keeps Q and K, O(N): on 2026-11-26 (an H200) SDPA's float32 grouped-query call fell back to its
    math kernel and built every head's N x N scores (88 GiB peak at 32,768 tokens). Its peak here is held under one
    layer's scores (9 x 8,192^2 float32, 2.4 GB); the Q and K it keeps are 1.5 GB of that."""
    engine = registry.load(str(shaped_dir), "hf", "cuda")
    enc = _shaped_text(engine, 8192)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    lazy = engine.lazy_run(enc)
    torch.cuda.synchronize()
    added = torch.cuda.max_memory_allocated() - before
    assert lazy.q.is_cuda and added < 9 * 8192**2 * 4, f"{added / 2**30:.2f} GiB"


def test_a_gpu_out_of_memory_in_the_first_pass_moves_it_to_the_cpu_with_a_notice(tiny_long_llama_dir, monkeypatch):
    """The plain pass's blocks (the fused kernel holds no block of weights; it is turned off here)."""
    from attnviz.lazy import OOM_NOTICE

    monkeypatch.setenv("ATTNVIZ_FUSED", "0")

    engine = registry.load(str(tiny_long_llama_dir), "hf", "cuda")
    enc = engine.tokenizer.encode("The animal didn't cross the street because it was too tired. " * 250, 2048)
    assert len(enc.ids) == 2048  # a block of a layer: 6 x 2,048 x 2,048 floats (100 MB), scores and weights
    reference = engine.lazy_run(enc)
    reference.analyse()
    lazy = engine.lazy_run(enc)
    lazy.block_bytes, lazy.max_rows = 2**40, 2**20  # one block of every head and row: more than the GPU allows
    total = torch.cuda.get_device_properties(0).total_memory  # 80 MB of any card (0.001 was 143 MB of an H200)
    torch.cuda.empty_cache()  # else the blocks the reference run left cached serve the analysis under any cap
    torch.cuda.set_per_process_memory_fraction(80 * 2**20 / total)
    try:
        lazy.analyse()
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    assert lazy.notice == OOM_NOTICE and not lazy.q.is_cuda
    assert (lazy.received() - reference.received()).abs().max() < 1e-5
