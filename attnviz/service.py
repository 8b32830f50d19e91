"""What a server shares, without Streamlit: the memos, the loaded engines, heavy work's admission, and a request's
computation (its engine run on its one encoding, eager or lazy, the fallback from a GPU out of memory, the analysis),
kept under the key the door wrote. The door (attnviz.api's Prepared, attnviz.work's Work) is its only caller in
the package.

Settings (environment): ATTNVIZ_CACHE_MB, the memory budget of short texts' results (default 512 MB);
ATTNVIZ_LONG_MB, that of long texts' queries and keys (default 1024 MB: two 4,096-token texts of SmolLM2);
ATTNVIZ_HEAVY_CACHE_MB, that of heavy work's results (generations, benchmarks, grids; default 256 MB);
ATTNVIZ_CACHE_MINUTES, how long a result is kept (default 30). Heavy work in flight is admitted by one
server-wide budget (attnviz.admission): ATTNVIZ_HEAVY_SLOTS at once (default 1: this 2-core machine keeps a core
for typed sentences), ATTNVIZ_HEAVY_MB of estimated memory among them (default 1536), ATTNVIZ_HEAVY_QUEUE waiting
(default 8).

A long text (past engines.base.eager_tokens) has its own memo, so that one pasted chapter never pushes a
classroom's sentences out. `held` looks in both before anything is encoded (a page's rerun costs no tokenization);
on a miss the door encodes once, decides with engines.base.is_long (the one rule) which memo keeps the results, and
calls `attention`.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from attnviz.admission import Admission
from attnviz.analysis.pronoun_cases import PronounCase
from attnviz.analysis.pronoun_scores import Benchmark, CaseResult, Method, evaluate_with, score_result
from attnviz.engines import registry
from attnviz.engines.base import (
    Backend,
    Engine,
    Progress,
    WhatIfEngine,
    run_with_cpu_fallback,
)
from attnviz.memo import Memo
from attnviz.result import Results
from attnviz.tokens import Encoded

WhatIf = Literal["causal"]
CACHE_MB_ENV, CACHE_MB = "ATTNVIZ_CACHE_MB", 512
CACHE_MINUTES_ENV, CACHE_MINUTES = "ATTNVIZ_CACHE_MINUTES", 30
LONG_MB_ENV, LONG_MB = "ATTNVIZ_LONG_MB", 1024
HEAVY_CACHE_MB_ENV, HEAVY_CACHE_MB = "ATTNVIZ_HEAVY_CACHE_MB", 256
HEAVY_SLOTS_ENV, HEAVY_SLOTS = "ATTNVIZ_HEAVY_SLOTS", 1
HEAVY_MB_ENV, HEAVY_MB = "ATTNVIZ_HEAVY_MB", 1536
HEAVY_QUEUE_ENV, HEAVY_QUEUE = "ATTNVIZ_HEAVY_QUEUE", 8
LONG_PEAK = 2.75  # a long text's first pass peaks at about this many times its kept Q and K (bench/long_inputs.py)
FLAT_MB = 128  # what a measurement, a benchmark or a grid is counted as (their tensors are a typed text's)
READING, ANALYSING = "Reading the text through the model", "Computing every head's map and statistics"


class Phases(Protocol):
    """Where a request reports its progress: a (done, total) callback per phase (READING, then ANALYSING)."""

    def phase(self, name: str) -> Progress:
        """The callback for one phase."""
        ...


@dataclass(frozen=True)
class Request:
    """What one view asks for: a text through a model; `target` is an encoder-decoder's decoder text."""

    model: str
    backend: Backend
    text: str
    target: str | None = None
    what_if: WhatIf | None = None  # "causal": an encoder's weights run with a causal mask


def setting(env: str, default: int, minimum: int = 1) -> int:
    """A whole-number setting from the environment, at least `minimum`; a ValueError that names it otherwise."""
    raw = os.environ.get(env, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < minimum:
        raise ValueError(
            f"{env} must be a whole number, at least {minimum} (got {raw[:20]!r}); ask the person running this server."
        )
    return int(raw)


# Plain module-level objects: `python -m attnviz serve` fills them before the server opens (the default model
# loaded, the default text computed), and every session of the server then shares them.
_SHARED_LOCK = threading.Lock()
_MEMOS: dict[str, Memo] = {}


def _memo(name: str, env: str, default_mb: int) -> Memo:
    with _SHARED_LOCK:
        if name not in _MEMOS:
            minutes = setting(CACHE_MINUTES_ENV, CACHE_MINUTES)
            _MEMOS[name] = Memo(setting(env, default_mb) * 2**20, minutes * 60.0)
        return _MEMOS[name]


def memo() -> Memo:
    """The memo of short texts' results (and of other views' values), bounded in bytes and in age."""
    return _memo("short", CACHE_MB_ENV, CACHE_MB)


def long_memo() -> Memo:
    """The memo of long texts' LazyAttention (queries, keys and what was computed from them), bounded apart."""
    return _memo("long", LONG_MB_ENV, LONG_MB)


def heavy_memo() -> Memo:
    """The memo of heavy work's results (generations, benchmarks, grids), bounded apart: they never push a
    class's typed sentences out of the short memo."""
    return _memo("heavy", HEAVY_CACHE_MB_ENV, HEAVY_CACHE_MB)


_ADMISSION: list[Admission] = []


def admission() -> Admission:
    """The server's one budget for heavy work (settings in this module's docstring)."""
    with _SHARED_LOCK:
        if not _ADMISSION:
            slots, bound = setting(HEAVY_SLOTS_ENV, HEAVY_SLOTS), setting(HEAVY_MB_ENV, HEAVY_MB) * 2**20
            _ADMISSION.append(Admission(slots, bound, setting(HEAVY_QUEUE_ENV, HEAVY_QUEUE, minimum=0)))
        return _ADMISSION[0]


def long_estimate(eng: Engine, n_tokens: int) -> int:
    """The memory a long text's first pass adds, estimated: its kept queries and keys (L x (H + H_kv) x N x d_head
    float32) times LONG_PEAK, measured on SmolLM2 at 4,096 and 8,192 tokens."""
    config = getattr(getattr(eng, "model", None), "config", None)
    heads = eng.n_heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    d_head = getattr(config, "head_dim", None) or (getattr(config, "hidden_size", 64 * heads) // heads)
    return int(LONG_PEAK * eng.n_layers * (heads + kv) * n_tokens * d_head * 4)


def eager_estimate(eng: Engine, n_tokens: int) -> int:
    """What every weight of a text takes (L x H x N x N float32), twice: the weights and the pass that made them."""
    return 2 * eng.n_layers * eng.n_heads * n_tokens * n_tokens * 4


MAX_MODELS = 4  # engines kept loaded at once (least recently used go first); one CPU copy for GPU fallback
# Engines: no byte budget (a model's memory is the operator's choice of models), no age, at most MAX_MODELS.
ENGINES = Memo(2**62, math.inf, max_entries=MAX_MODELS)
CPU_ENGINES = Memo(2**62, math.inf, max_entries=1)


def policy() -> registry.Policy:
    """What this server offers (the operator's environment)."""
    return registry.Policy.from_env()


def engine(source: registry.Source, backend: Backend, device: str | None = None) -> Engine:
    """The engine for a resolved model (the door resolves: as a server's policy allows, or as a local user names
    it), shared by all sessions; never mutated.

    Keyed by the resolved model, so every spelling of one model loads it once.
    """
    offline = not (policy().downloads or source.local_user)
    return ENGINES.get(
        (source, backend, offline, device), lambda: registry.load_source(source, backend, device, offline=offline)
    )


def cpu_engine(backend: Backend, source: registry.Source) -> Engine:
    """A CPU copy of a resolved model, loaded only when the GPU runs out of memory."""
    return CPU_ENGINES.get((source, backend), lambda: registry.load_source(source, backend, "cpu"))


def compute(
    eng: Engine, enc: Encoded, target: str | None = None, what_if: WhatIf | None = None, phases: Phases | None = None
) -> Results:
    """engine.run on a text it encoded, or the engine's causal what-if; a long text's statistics and pooled maps
    computed too."""
    if what_if is not None:
        if not isinstance(eng, WhatIfEngine):
            raise ValueError(f"The model '{eng.name}' cannot run a causal what-if.")
        return eng.run_causal(enc)
    results = eng.run(enc, target, progress=phases.phase(READING) if phases else None)
    if results.lazy:  # the first pass, now: the memo then counts what it made
        for value in results.values():
            value.analyse(progress=phases.phase(ANALYSING) if phases else None)
    return results


def held(key: tuple) -> Results | None:
    """The results kept under a request's key (work.attention_key) in either memo, else None: nothing is loaded,
    encoded or computed."""
    for store in (memo(), long_memo()):
        found, value = store.peek(key)
        if found:
            return value
    return None


def attention(
    key: tuple, job: Callable[[Engine], Results], eng: Engine, cpu: Callable[[], Engine], long: bool
) -> Results:
    """A request's results computed once by `job` on `eng` (on `cpu` when the GPU runs out of memory:
    Results.notice says so) and kept under `key` for every session, in the long memo when the text is long."""

    def run() -> Results:
        results, notice = run_with_cpu_fallback(eng, cpu, job)
        return results.with_notice(notice)

    return (long_memo() if long else memo()).get(key, run)


def pronoun_case(eng: Engine, case: PronounCase, method: Method = "mas") -> CaseResult:
    """Run the engine on a pronoun case's text (once) and score it (analysis.pronoun_scores)."""
    return score_result(compute(eng, eng.encode(case.text)).main, case, method)


def pronoun_benchmark(eng: Engine, cases: Iterable[PronounCase], method: Method = "mas", progress=None) -> Benchmark:
    """Score every case on the engine; a case whose words cannot be found is skipped with the reason."""
    return evaluate_with(lambda case: pronoun_case(eng, case, method), cases, method, progress)


def cached_value(key: tuple) -> object | None:
    """A value kept() already holds, or None: nothing is computed (a page shows a button instead)."""
    for store in (memo(), heavy_memo()):
        found, value = store.peek(key)
        if found:
            return value
    return None


def kept(key: tuple, compute_value: Callable[[], object], *, heavy: bool = False) -> object:
    """Any other value a view computes, kept for every session: in the short memo, or, for heavy work (a
    generation, a benchmark, a grid), in the heavy memo, which never pushes typed sentences out."""
    return (heavy_memo() if heavy else memo()).get(key, compute_value)
