"""The forward pass's tensor shapes, module by module, for any engine: the course's "add print(shape) in
forward()", done with forward hooks instead of edits, so it works on a Hugging Face model as on ours.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnviz.engines.base import Engine


@dataclass(frozen=True)
class ShapeStep:
    """One module's call during a forward pass."""

    name: str  # its dotted name in the model ("" for the model itself)
    kind: str  # its class name
    inputs: tuple[tuple[int, ...], ...]  # the shapes of the tensors it was given
    outputs: tuple[tuple[int, ...], ...]  # the shapes of the tensors it returned

    @property
    def depth(self) -> int:
        """How deep the module sits in the model: 0 for the model itself, 1 for its children, ..."""
        return 0 if not self.name else self.name.count(".") + 1


def _shapes(value) -> tuple[tuple[int, ...], ...]:
    """Every tensor's shape in a value (tensor, tuple, list, dict, a transformers ModelOutput), in order."""
    if isinstance(value, Tensor):
        return (tuple(value.shape),)
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return tuple(s for v in value for s in _shapes(v))
    return ()


def trace(model: nn.Module, call, *, first_of_each_list: bool = True) -> list[ShapeStep]:
    """Run call() (which runs `model` forward) with a hook on every module; the calls in order.

    first_of_each_list: keep only the first of each list of repeated modules (layer 1 of 12): the others repeat
    its shapes. The hooks are removed afterwards, also when call() fails. The model is shared by every browser
    session: while the hooks are on, only this thread's calls are recorded, and other sessions' passes run as before.
    """
    steps: list[ShapeStep] = []
    handles = []
    me = threading.get_ident()

    def hook(name: str):
        def record(module, args, kwargs, output):
            if threading.get_ident() == me:
                steps.append(ShapeStep(name, type(module).__name__, _shapes((args, kwargs)), _shapes(output)))

        return record

    folded = tuple(f"{lst}.{i}" for lst, n in repeated_lists(model).items() for i in range(1, n))
    for name, module in model.named_modules():
        if first_of_each_list and any(name == f or name.startswith(f + ".") for f in folded):
            continue
        handles.append(module.register_forward_hook(hook(name), with_kwargs=True))
    try:
        with torch.inference_mode():
            call()
    finally:
        for h in handles:
            h.remove()
    return steps


def repeated_lists(model: nn.Module) -> dict[str, int]:
    """{name of each nn.ModuleList: its length}: what `first_of_each_list` folded away."""
    return {name: len(m) for name, m in model.named_modules() if isinstance(m, nn.ModuleList) and len(m) > 1}


def engine_trace(engine: Engine, text: str, max_depth: int | None = None) -> list[ShapeStep]:
    """The shapes of one engine.run(text), module by module."""
    steps = trace(engine.model, lambda: engine.run(engine.encode(text)))
    return [s for s in steps if max_depth is None or s.depth <= max_depth]


def format_trace(steps: list[ShapeStep]) -> str:
    """One line per call, indented by depth, as print(x.shape) at the end of each forward() would print them
    (a module's line comes after its children's: it returns last)."""
    lines = []
    for s in steps:
        shown = ", ".join(str(o) for o in s.outputs[:3]) + (" …" if len(s.outputs) > 3 else "")
        label = f"{'  ' * s.depth}{s.name or '(model)'} [{s.kind}]"
        lines.append(f"{label:<56} -> {shown or '(no tensor)'}")
    return "\n".join(lines)
