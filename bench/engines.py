"""Benchmark: the scratch engine against its references, in one run.

1. scratch MultiHeadAttention vs torch.nn.MultiheadAttention(need_weights=True,
   average_attn_weights=False) with the same weights: d_model 768, 12 heads, batch 1 and 16,
   N = 32, 128, 512.
2. scratch BERT vs Hugging Face eager on the bundled all-MiniLM-L6-v2: N = 16, 128, 512.
3. scratch Llama vs Hugging Face eager on the bundled SmolLM2-135M (grouped-query, rotary): N = 16, 128, 512.

The two sides are timed alternately (A B A B ...) so that the machine's noise falls on both;
the table gives medians and the ratio scratch / reference (target: <= 1.2). On CUDA as well
when a GPU is present. Usage: python bench/engines.py [--repeats N] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from torch import nn  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from attnviz.engines import bert, llama, registry  # noqa: E402
from attnviz.engines.scratch import MultiHeadAttention  # noqa: E402


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_pair(ours, ref, device: torch.device, repeats: int) -> tuple[float, float]:
    """Median seconds of ours() and ref(), measured alternately after a warm-up."""
    for _ in range(3):
        ours(), ref()
    t_ours, t_ref = [], []
    for _ in range(repeats):
        for fn, acc in ((ours, t_ours), (ref, t_ref)):
            _sync(device)
            start = time.perf_counter()
            fn()
            _sync(device)
            acc.append(time.perf_counter() - start)
    return statistics.median(t_ours), statistics.median(t_ref)


def bench_mha(device: torch.device, repeats: int) -> list[tuple]:
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(768, 12, batch_first=True).to(device).eval()
    ours = MultiHeadAttention.from_torch(ref).eval()
    rows = []
    for batch in (1, 16):
        for n in (32, 128, 512):
            x = torch.randn(batch, n, 768, device=device)
            with torch.inference_mode():
                a, b = time_pair(
                    lambda x=x: ours(x, x, x),
                    lambda x=x: ref(x, x, x, need_weights=True, average_attn_weights=False),
                    device,
                    repeats if batch * n <= 2048 else max(5, repeats // 4),
                )
                diff = (ours(x, x, x)[1] - ref(x, x, x, need_weights=True, average_attn_weights=False)[1]).abs().max()
            rows.append(("MHA", f"B={batch} N={n}", a, b, diff.item()))
    return rows


def bench_bert(device: torch.device, repeats: int) -> list[tuple]:
    hf = registry.load("default", "hf", device).model
    ours = bert.from_hf(hf)
    rows = []
    for n in (16, 128, 512):
        ids = torch.randint(1000, 20000, (1, n), device=device)
        with torch.inference_mode():
            a, b = time_pair(
                lambda ids=ids: ours(ids), lambda ids=ids: hf(input_ids=ids, output_attentions=True), device, repeats
            )
            w_ours = ours(ids)[1]
            w_ref = hf(input_ids=ids, output_attentions=True).attentions
            diff = max((p - q).abs().max().item() for p, q in zip(w_ours, w_ref, strict=True))
        rows.append(("BERT (MiniLM-L6)", f"N={n}", a, b, diff))
    return rows


def bench_llama(device: torch.device, repeats: int) -> list[tuple]:
    from transformers import AutoModelForCausalLM

    from attnviz.engines import smollm2

    # the reference is transformers' own eager attention: the hf backend now runs attnviz's attention function
    hf = AutoModelForCausalLM.from_pretrained(smollm2.converted(), attn_implementation="eager", dtype=torch.float32)
    hf = hf.to(device).eval()
    ours = llama.from_hf(hf)
    rows = []
    for n in (16, 128, 512):
        ids = torch.randint(1000, 20000, (1, n), device=device)
        with torch.inference_mode():
            a, b = time_pair(
                lambda ids=ids: ours(ids),
                lambda ids=ids: hf(input_ids=ids, output_attentions=True),
                device,
                repeats if n <= 128 else max(5, repeats // 3),
            )
            w_ours = ours(ids)[1]
            w_ref = hf(input_ids=ids, output_attentions=True).attentions
            diff = max((p - q).abs().max().item() for p, q in zip(w_ours, w_ref, strict=True))
        rows.append(("Llama (SmolLM2-135M)", f"N={n}", a, b, diff))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--markdown", action="store_true", help="print a table for bench/RESULTS.md")
    args = parser.parse_args()
    hf_logging.disable_progress_bar()
    torch.set_grad_enabled(False)
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    print(f"# torch {torch.__version__}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    if torch.cuda.is_available():
        print(f"# GPU: {torch.cuda.get_device_name(0)}")
    print("| device | model | shape | scratch ms | reference ms | ratio | max abs diff of weights |")
    print("|---|---|---|---:|---:|---:|---:|")
    worst = 0.0
    for device in devices:
        rows = bench_mha(device, args.repeats) + bench_bert(device, args.repeats) + bench_llama(device, args.repeats)
        for name, shape, a, b, diff in rows:
            worst = max(worst, a / b)
            print(f"| {device.type} | {name} | {shape} | {a * 1e3:.3f} | {b * 1e3:.3f} | {a / b:.2f} | {diff:.1e} |")
    print(f"\nworst ratio scratch/reference: {worst:.2f} (target <= 1.2)")


if __name__ == "__main__":
    main()
