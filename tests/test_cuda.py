"""GPU checks: skipped cleanly where torch.cuda.is_available() is false."""

import pytest
import torch
from torch import nn

from attnviz.engines import registry
from attnviz.engines.scratch import MultiHeadAttention, causal_mask

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")


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
    r_gpu, r_cpu = gpu.run(text)["self"], bundled_scratch.run(text)["self"]
    assert r_gpu.device.startswith("cuda")
    assert (r_gpu.weights - r_cpu.weights).abs().max() < 1e-4
