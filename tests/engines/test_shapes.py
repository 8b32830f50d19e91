"""The shapes trace: module by module, for a Hugging Face model and a scratch one."""

import threading

import pytest
import torch
from torch import nn

from attnviz.engines import registry, shapes

TEXT = "The animal didn't cross the street because it was too tired."


@pytest.mark.parametrize("backend", ["hf", "scratch"])
def test_trace_of_the_bundled_bert(backend, bundled_hf, bundled_scratch):
    eng = bundled_hf if backend == "hf" else bundled_scratch
    eng.run(eng.encode(TEXT))  # transformers adds its own output-capturing hooks on a first pass
    hooks_before = [len(m._forward_hooks) for m in eng.model.modules()]
    n = len(eng.encode(TEXT).ids)
    steps = shapes.engine_trace(eng, TEXT)
    by_kind = {s.kind: s for s in steps}
    attn = by_kind["BertSelfAttention" if backend == "hf" else "MultiHeadAttention"]
    assert (1, n, 384) in attn.outputs and (1, 12, n, n) in attn.outputs
    ffn = [s for s in steps if s.kind == "Linear" and (1, n, 1536) in s.outputs]
    assert ffn  # the feed-forward widens to 4 x 384
    assert not any(".1." in s.name or s.name.endswith(".1") for s in steps)  # layer 1 stands for all six
    assert shapes.repeated_lists(eng.model) == {"encoder.layer" if backend == "hf" else "layers": 6}
    text = shapes.format_trace(steps)
    assert f"(1, 12, {n}, {n})" in text and text.splitlines()[-1].startswith("(model)")
    assert [len(m._forward_hooks) for m in eng.model.modules()] == hooks_before  # ours are gone


def test_trace_of_a_decoder_shows_grouped_keys(tiny_llama_dir):
    eng = registry.load(str(tiny_llama_dir), "scratch", "cpu")
    steps = shapes.engine_trace(eng, "one two three")
    k = next(s for s in steps if s.name.endswith("attention.w_k"))
    q = next(s for s in steps if s.name.endswith("attention.w_q"))
    assert k.outputs[0][-1] < q.outputs[0][-1]  # fewer key/value heads than query heads


def test_trace_ignores_other_threads_and_removes_its_hooks():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    other = threading.Thread(target=lambda: [model(torch.randn(3, 4)) for _ in range(50)])

    def call():
        other.start()
        model(torch.randn(5, 4))
        other.join()

    steps = shapes.trace(model, call)
    assert [(s.name, s.outputs) for s in steps] == [
        ("0", ((5, 8),)),
        ("1", ((5, 8),)),
        ("2", ((5, 2),)),
        ("", ((5, 2),)),
    ]
    assert all(not m._forward_hooks for m in model.modules())


def test_trace_removes_its_hooks_when_the_pass_fails():
    model = nn.Linear(4, 2)
    with pytest.raises(RuntimeError):
        shapes.trace(model, lambda: model(torch.randn(3, 5)))
    assert not model._forward_hooks
