"""Work: the door's computations kept for every session (service.kept), each with its one memo key.

A page, the class poll and a notebook asking for the same work share one memo entry, because its key is built here
and nowhere else. Heavy work (a grid, a benchmark, a generation, a live measurement) carries what it does in words and
its estimated memory, for the server's one admission budget (a page passes `admit`). attnviz.api re-exports it all:
a front end imports the door, never this module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar, cast

from attnviz import service
from attnviz.engines import registry
from attnviz.engines.base import Engine, GeneratingEngine, HookedEngine, SteppingEngine, WhatIfEngine
from attnviz.engines.steps import AttentionSteps
from attnviz.interventions import ablation, induction_scores, patching
from attnviz.interventions.ablation import Mode
from attnviz.result import AttentionResult
from attnviz.tokens import Encoded

T = TypeVar("T")


@dataclass(frozen=True)
class Work(Generic[T]):
    """A computation the door keeps for every session: its memo key (built here and nowhere else), what it does in
    words and its estimated memory (heavy work is admitted by the server's one budget where a page passes `admit`).
    Its value's type is the computation's (`Work[Induction]`): the memo holds what `compute` returned under `key`."""

    key: tuple
    compute: Callable[[], T] = field(compare=False)
    what: str = ""
    estimate: int = 0
    heavy: bool = False

    def held(self) -> T | None:
        """The kept value, if some session computed it; nothing is computed."""
        return cast("T | None", service.cached_value(self.key))

    def get(self, admit: Callable | None = None) -> T:
        """The kept value, or computed once and kept; `admit(what, estimate, compute)` gates heavy work (a page's)."""
        held = self.held()
        if held is not None:
            return held
        keep = lambda: service.kept(self.key, self.compute, heavy=self.heavy)  # noqa: E731
        return cast(T, admit(self.what, self.estimate, keep) if self.heavy and admit is not None else keep())


def attention_key(req: service.Request, source: registry.Source) -> tuple:
    """A request's results' key (api.Prepared, service.held and service.attention): the resolved model, so that
    every spelling of one model shares its entries."""
    return ("attention", source.name, req.backend, req.text, req.target, req.what_if)


def steps_work(eng: Engine, text: str, layer: int, causal: bool) -> Work[tuple[Encoded, AttentionSteps]]:
    """One layer's attention step by step (the Inside page)."""
    if not isinstance(eng, SteppingEngine):
        raise ValueError(f"The model '{eng.name}' cannot show its attention step by step.")
    stepping = eng
    return Work(
        ("steps", eng.name, eng.backend, text, layer, causal), lambda: stepping.steps(text, layer, causal=causal)
    )


def shapes_work(eng: Engine, text: str) -> Work[list]:
    """The engine's forward pass on the text, module by module (engines.shapes)."""
    from attnviz.engines import shapes

    return Work(("shapes", eng.name, eng.backend, text), lambda: shapes.engine_trace(eng, text))


def cross_work(eng: Engine, text_a: str, text_b: str) -> Work[AttentionResult]:
    """Sentence B's queries on sentence A's keys and values, through an engine that can run the what-if (the scratch
    backend's BERT)."""
    if not isinstance(eng, WhatIfEngine):
        raise ValueError(f"The model '{eng.name}' cannot run a cross-attention what-if.")
    what_if = eng
    return Work(("cross", eng.name, text_a, text_b), lambda: what_if.cross_what_if(text_a, text_b))


def flow_work(key: tuple, result: AttentionResult, upto: int) -> Work:
    """Attention flow (analysis.rollout.flow) up to layer `upto` of a request's result (`key`: its attention_key):
    max-flow solves, seconds of CPU per text, so admitted."""
    from attnviz.analysis import rollout

    return Work(
        ("flow", key, result.kind, upto),
        lambda: rollout.flow(result, upto),
        "solving the attention flow",
        GRID_BYTES,
        heavy=True,
    )


GRID_BYTES = service.FLAT_MB * 2**20  # what a grid, a benchmark or a measurement is counted as


def induction_work(eng: Engine, length: int = 50, seed: int = 0, batch: int = induction_scores.BATCH) -> Work:
    """Induction heads on `batch` repeated random sequences (the Induction page, the Model overview, notebooks)."""
    return Work(
        ("induction", eng.name, eng.backend, length, seed, batch),
        lambda: induction_scores.run(eng, length, seed, batch),
    )


def mean_reference_work(eng: Engine, text: str) -> Work:
    """Mean ablation's reference for `text`: every layer's head means over the reference corpus, `text` left out."""
    return Work(
        ("mean-reference", eng.name, eng.backend, ablation.reference_texts(text)),
        lambda: ablation.reference_means(eng, range(eng.n_layers), text),
    )


def ablation_work(eng: Engine, text: str, heads: dict[int, list[int]], mode: Mode = "zero", position: int = -1) -> Work:
    """Heads knocked out on a text: loss per token and next tokens before and after."""
    means = (lambda: mean_reference_work(eng, text).get()) if mode == "mean" else (lambda: None)
    return Work(
        ("ablate", eng.name, eng.backend, text, repr(sorted(heads.items())), mode, position),
        lambda: ablation.ablate(eng, text, heads, mode, position, means=means()),
    )


def importance_work(eng: Engine, text: str, mode: Mode = "zero", progress=None) -> Work:
    """Each head knocked out alone: the loss increase grid (the Knock out page's and the class poll's, one key)."""
    means = (lambda: mean_reference_work(eng, text).get()) if mode == "mean" else (lambda: None)
    return Work(
        ("importance", eng.name, eng.backend, text, mode),
        lambda: ablation.importance(eng, text, mode, progress, means=means()),
        f"knocking out each of {eng.n_layers * eng.n_heads} heads",
        GRID_BYTES,
        heavy=True,
    )


def patch_work(eng: Engine, clean: str, corrupt: str, answer: str, wrong: str, progress=None) -> Work:
    """Every head's clean output patched into the corrupted run."""
    return Work(
        ("patch", eng.name, eng.backend, clean, corrupt, answer, wrong),
        lambda: patching.patch(eng, clean, corrupt, answer, wrong, progress),
        "patching every head",
        GRID_BYTES,
        heavy=True,
    )


def patch_position_work(eng: Engine, clean: str, corrupt: str, answer: str, wrong: str, layer: int, head: int) -> Work:
    """One head's clean output patched at one position at a time."""
    return Work(
        ("patch-pos", eng.name, eng.backend, clean, corrupt, answer, wrong, layer, head),
        lambda: patching.by_position(eng, clean, corrupt, answer, wrong, layer, head),
    )


def generation_work(eng: Engine, prompt: str, max_new_tokens: int, chat: bool = True, progress=None) -> Work:
    """A decoder writing after a prompt (admitted: it holds every step's weights)."""
    if not isinstance(eng, GeneratingEngine):
        raise ValueError(f"'{eng.name}' does not write text: generate needs a decoder such as smollm2")
    if max_new_tokens < 1:  # else the engine wrote nothing and said the prompt filled the model's limit
        raise ValueError(f"max_new_tokens is how many tokens to write: 1 or more (got {max_new_tokens})")
    writer = eng
    tokens = len(eng.encode(prompt).ids) + max_new_tokens + 32  # the prompt, what is written, a template's markers
    return Work(
        ("generate", eng.name, eng.backend, prompt, max_new_tokens, chat),
        lambda: writer.generate(prompt, max_new_tokens, chat=chat, progress=progress),
        f"writing {max_new_tokens} tokens",
        service.eager_estimate(eng, tokens),
        heavy=True,
    )


def benchmark_work(eng: Engine, cases: tuple, method, progress=None) -> Work:
    """The pronoun benchmark on a set of cases: (benchmark, held-out best head, permutation test of the best)."""

    def run() -> tuple:
        bench = service.pronoun_benchmark(eng, cases, method, progress)
        return bench, bench.held_out_best_head(), bench.permutation_best_head()

    return Work(
        ("pronoun-benchmark", eng.name, eng.backend, cases, method),
        run,
        f"a benchmark of {len(cases):,} cases",
        GRID_BYTES,
        heavy=True,
    )


def cost_work(d_model: int, heads: int) -> Work:
    """The scratch engine's measured cost at N = 16 … 512 (a live measurement: admitted)."""
    from attnviz.lessons import cost

    return Work(
        ("inside-cost", d_model, heads),
        lambda: cost.measure(d_model, heads),
        "timing the engine",
        GRID_BYTES,
        heavy=True,
    )


def demo_attention_work(d_model: int, heads: int) -> Work:
    """The Inside page's seeded random attention of these sizes (lessons.cost.demo_attention), built once."""
    from attnviz.lessons import cost

    return Work(("demo-attention", d_model, heads), lambda: cost.demo_attention(d_model, heads, device="cpu"))


def head_model_work(task: str, count: int) -> Work:
    """One of the How many heads page's shipped tiny encoders (lessons.head_models), loaded once on the CPU."""
    from attnviz.lessons import head_models

    folder = head_models.folder_of(task)
    return Work(
        ("head-model", task, count),
        lambda: head_models.TinyEncoder.load(folder, head_models.name(count), device="cpu"),
    )


def held_out_work(task: str) -> Work:
    """The shipped tiny encoders of a task scored on its held-out sequences now (lessons.head_models)."""
    from attnviz.lessons import head_models

    return Work(("held-out", task), lambda: head_models.held_out_accuracy(task, device="cpu"))


def local_source(model: str) -> registry.Source:
    """The model as the person at this machine names it: any folder, a bundled name or a hub id."""
    return dataclasses.replace(registry.resolve(model, allow_paths=True), local_user=True)


def _hooked(source: registry.Source) -> Engine:
    """The model where its queries and keys can be read (the hook points): an encoder rebuilt on attnviz's
    attention, a decoder of hf.CAPTURE_FAMILIES as Hugging Face loads it."""
    eng = service.engine(source, "hf")
    if not isinstance(eng, HookedEngine) and registry.can_rebuild(eng):
        eng = service.engine(source, "scratch")
    return eng


def qk_work(source: registry.Source, texts: list[str], layer: int, head: int, method: str = "pca") -> Work:
    """A head's query/key space over some texts (see qk_space) on a resolved model (a page's request's, or
    local_source's), kept for every session; admitted on a page."""
    from attnviz.corpus import qk

    return Work(
        ("qk", source, tuple(texts), layer, head, method),
        lambda: qk.of_texts(_hooked(source), texts, layer, head, method=method),
        "placing a head's queries and keys",
        GRID_BYTES,
        heavy=True,
    )
