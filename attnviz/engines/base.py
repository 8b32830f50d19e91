"""The engine contract: what every engine offers the rest of attnviz, its optional capabilities, and errors.

Every engine satisfies `Engine`. Some can do more, and say so by satisfying a capability
Protocol, checked with isinstance (never hasattr):
- `SteppingEngine`: shows one layer's attention step by step (the Inside page);
- `WhatIfEngine`: runs its weights in ways the model was never trained (a causal mask on an
  encoder, one sentence's queries on another's keys);
- `GeneratingEngine`: a decoder that writes after a prompt, greedily, and shows where each
  written token looked.

"backend" names how attention is computed: "hf" (Hugging Face, eager) or "scratch" (attnviz's
own engine). "kind" only ever means the kind of attention: self, causal or cross.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar, runtime_checkable

import torch

from attnviz.engines.hooks import Hooks
from attnviz.engines.steps import AttentionSteps
from attnviz.lazy import LazyAttention
from attnviz.result import AttentionKind, AttentionResult, Progress, Results
from attnviz.tokens import Encoded, Tokenizer

if TYPE_CHECKING:
    from torch import nn

Backend = Literal["hf", "scratch"]
BACKENDS: tuple[Backend, ...] = ("hf", "scratch")
Architecture = Literal["encoder", "decoder", "encoder-decoder"]


class ModelLoadError(Exception):
    """A model could not be found or loaded; the message says what to do."""


_PATH = re.compile(r"(?<![\w.:/\\~])(?:~[\w.\-]*|[A-Za-z]:)?(?:[/\\][\w.\-@+]+)+[/\\]?")


def redact(text: str) -> str:
    """A message with every file-system path cut to its last part ('…/model'): no server path is shown."""
    return _PATH.sub(lambda m: "…/" + re.split(r"[/\\]", m.group(0).rstrip("/\\"))[-1], text)


@runtime_checkable
class Engine(Protocol):
    """A loaded model that turns text into attention results. Shared by every session: never mutated."""

    name: str  # the name the user gave ("default", a hub id, a folder)
    backend: Backend
    family: str  # the model's type as Hugging Face names it: "bert", "gpt2", "llama", "marian"; "dates" for ours
    architecture: Architecture
    kinds: tuple[AttentionKind, ...]  # what run() returns
    device: torch.device
    device_name: str  # for people: "cpu", "cuda:0 — NVIDIA H100"
    max_tokens: int  # the longest input, special tokens included

    @property
    def model(self) -> nn.Module:
        """The PyTorch model it runs (Hugging Face's, or ours on the scratch engine)."""
        ...

    n_layers: int  # layers (a decoder's, for an encoder-decoder)
    n_heads: int  # query heads per layer
    lazy: bool  # whether inputs past the eager budget get a LazyAttention (else that budget limits the input)
    sinks: bool  # whether each head has a learned sink logit (gpt-oss): its rows over the tokens sum to less than 1

    def encode(self, text: str) -> Encoded:
        """The text as the model sees it (ids, tokens, words, characters), cut to max_tokens."""
        ...

    def run(self, enc: Encoded, target: str | None = None, progress: Progress | None = None) -> Results:
        """Attention of every kind the model has over a text this engine encoded (`encode`: a request encodes once,
        and the page, the long/eager decision and the engine share it); `target` is an encoder-decoder's decoder text.

        Past the eager budget (eager_tokens) an engine that can returns a LazyAttention, reporting each layer of
        its forward pass to `progress`; the others cut the input to max_tokens.
        """
        ...


@runtime_checkable
class SteppingEngine(Engine, Protocol):
    """An engine that can show one layer's attention step by step, every intermediate read at its hook points."""

    n_kv_heads: int  # key/value heads: fewer than n_heads with grouped-query attention

    def steps(self, text: str, layer: int, *, causal: bool = False) -> tuple[Encoded, AttentionSteps]:
        """The tokens of `text` and every intermediate of layer `layer`'s attention (0-based)."""
        ...


@runtime_checkable
class WhatIfEngine(Protocol):
    """An engine that can run its weights in ways the model was never trained."""

    def run_causal(self, enc: Encoded) -> Results:
        """{"causal": ...}: the same weights with a causal mask in every layer."""
        ...

    def cross_what_if(self, text_a: str, text_b: str) -> AttentionResult:
        """Sentence B's queries on sentence A's keys and values, in every layer."""
        ...


@runtime_checkable
class LazyEngine(Protocol):
    """An engine that can keep queries and keys instead of weights: inputs past the eager budget cost O(N).

    Its `lazy` is False where this model's attention cannot be read exactly: its inputs stop at eager_tokens.
    """

    def lazy_run(self, enc: Encoded, progress: Progress | None = None) -> LazyAttention:
        """One pass with a fused kernel for the output, each layer's queries and keys kept (after positions)."""
        ...


@runtime_checkable
class BatchedEngine(Engine, Protocol):
    """An engine that reads several texts' weights in one padded pass: what a corpus run measures with."""

    tokenizer: Tokenizer

    def batch_weights(self, ids: list[tuple[int, ...]]) -> tuple[torch.Tensor, ...]:
        """Per layer, (B, H, T, T) float32 on the CPU for B texts padded to T tokens (a padded key has weight 0)."""
        ...


@runtime_checkable
class HookedEngine(Protocol):
    """An engine whose attention passes through the hook points (engines.hooks): read or replaced for one call."""

    def forward(self, enc: Encoded, hooks: Hooks):
        """One pass over the encoded text with these hooks; the model's output (its last hidden states or logits)."""
        ...


@runtime_checkable
class TurningEngine(Protocol):
    """An engine that can undo its rotary turn where the hook points cannot read the queries and keys before it (a
    Hugging Face decoder): each layer's (cos, sin) table for n positions, or None for a model with no turn."""

    def turns(self, layer: int, n: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The layer's rotary table for positions 0..n-1, or None."""
        ...


@runtime_checkable
class InterveningEngine(Engine, Protocol):
    """A decoder whose passes take hooks and give next-token logits: what ablation, patching and induction run on.

    Its `hooked` is False where its attention is not attnviz's (a hub decoder outside hf.CAPTURE_FAMILIES).
    """

    hooked: bool
    tokenizer: Tokenizer  # what writes its next tokens as text

    def logits(self, ids: Sequence[int], hooks: Hooks | None = None) -> torch.Tensor:
        """(T, V) float32 on the CPU: next-token logits at every position of one pass over ids."""
        ...

    def residuals(self, ids: Sequence[int]) -> torch.Tensor:
        """(L, T, D): the residual stream entering each layer, one clean pass."""
        ...

    def logits_from(self, layer: int, x: torch.Tensor, hooks: Hooks | None = None, *, last: bool = False):
        """x (B, T, D) entering `layer` -> logits (B, T, V) or (B, V) at the last position."""
        ...


@dataclass(frozen=True)
class Generation:
    """A prompt, what a model wrote after it (greedily), and the attention of every step of the writing."""

    result: AttentionResult  # causal, over the prompt and every written token but the last
    prompt_tokens: int  # P: the prompt's tokens (a chat template's included)
    written: tuple[str, ...]  # the written tokens as text to read, in order (the last may be the end token)
    text: str  # the written text, special tokens left out
    stopped: Literal["end token", "limit"]
    chat: bool = False  # the prompt went in as a user message in the model's chat template

    def __repr__(self) -> str:
        text = self.text if len(self.text) <= 60 else self.text[:57] + "…"
        return (
            f"Generation({self.result.model}: {len(self.written)} tokens written after a {self.prompt_tokens}-token "
            f"prompt, stopped at the {self.stopped}: {text!r})"
        )

    @property
    def steps(self):
        """(L, H, n, Tk): row s is where the query that wrote token s looked (position P - 1 + s)."""
        start = self.prompt_tokens - 1
        return self.result.weights[:, :, start : start + len(self.written)]

    def across_heads(self, step: int):
        """(L * H, P + step): the row of step `step` (0-based) in every head, layer by layer, over the keys it saw."""
        seen = self.prompt_tokens + step
        w = self.steps[:, :, step, :seen]  # (L, H, seen)
        return w.reshape(-1, seen)


@runtime_checkable
class GeneratingEngine(Engine, Protocol):
    """A decoder that can write after a prompt."""

    @property
    def has_chat_template(self) -> bool:
        """Whether the model has a chat template to put a prompt in (a base model has none: its prompt goes as is)."""
        ...

    def generate(
        self, prompt: str, max_new_tokens: int, *, chat: bool = True, progress: Callable[[int, int], None] | None = None
    ) -> Generation:
        """Greedy decoding: up to max_new_tokens after the prompt (in the model's chat template when chat and it has
        one)."""
        ...


def make_generation(
    engine: Engine,
    tokenizer: Tokenizer,
    prompt: Encoded,
    ids: Sequence[int],
    weights_of: Callable[[Sequence[int]], torch.Tensor],
    stop_ids: set[int],
    *,
    sinks: bool = False,
    windows: tuple[int, ...] = (),
    chat: bool = False,
) -> Generation:
    """A Generation from the ids after greedy decoding; `weights_of` runs the model on ids, (L, H, T, T) back (rows
    summing to less than 1 where the model has learned sinks; each layer's sliding window in `windows`)."""
    written = list(ids[len(prompt.ids) :])
    if not written:
        raise ValueError("There is no room to write: the prompt already fills the model's limit.")
    reading = list(ids[:-1])  # the last token written was never read
    axis = tokenizer.extended(prompt.axis, written[:-1])
    name, device = engine.name, engine.device_name
    result = AttentionResult(weights_of(reading), axis, axis, "causal", name, device, sinks=sinks, windows=windows)
    tokens = tokenizer.plain_axis(written).tokens
    stopped: Literal["end token", "limit"] = "end token" if written[-1] in stop_ids else "limit"
    return Generation(result, len(prompt.ids), tokens, tokenizer.decode(written), stopped, chat)


SHARED_PASSES = 2  # passes of one model at once, where a pass changes no state of the model


def passes(shared: bool) -> threading.Semaphore | threading.Lock:
    """What an engine's forward passes hold while they run.

    shared: the pass changes no state of the model (its inputs, hooks and caches are the call's own), so two passes
    run at once: a long text's pass (heavy work, admitted one at a time) and a typed sentence beside it, which then
    never waits for it. No more than two, since each short pass may hold up to ATTNVIZ_EAGER_MB of weights and two
    cores gain nothing from a third. Otherwise one lock: a model attnviz does not know (a dynamic rotary table grows
    in place, `generate` keeps state) runs one pass at a time.
    """
    return threading.BoundedSemaphore(SHARED_PASSES) if shared else threading.Lock()


def rope_parameters(config) -> dict:
    """The rotary table a transformers config describes ({} when it names none)."""
    return getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}


def rope_type(config) -> str:
    """The kind of rotary table a transformers config names: 'default' (fixed), 'dynamic', 'llama3', ..."""
    rope = rope_parameters(config)
    return rope.get("rope_type", rope.get("type", "default"))


EAGER_MB_ENV, EAGER_MB = "ATTNVIZ_EAGER_MB", 512


def eager_tokens(n_layers: int, n_heads: int) -> int:
    """The longest input whose every weight (L x H x N x N float32) fits $ATTNVIZ_EAGER_MB (default 512 MB).

    The one rule that decides eager or lazy: an input up to this length gets every weight (an AttentionResult);
    a longer one gets queries and keys and weights on demand (a LazyAttention), where the model supports it.
    """
    raw = os.environ.get(EAGER_MB_ENV, "").strip()
    if raw and (not raw.isdigit() or int(raw) < 1):
        raise ValueError(f"{EAGER_MB_ENV} must be a whole number of megabytes (got {raw[:20]!r})")
    budget = (int(raw) if raw else EAGER_MB) * 2**20
    return int((budget / (4 * n_layers * n_heads)) ** 0.5)


def is_long(engine: Engine, n_tokens: int) -> bool:
    """Whether `engine` answers an input of n_tokens with a LazyAttention: when it can, past eager_tokens."""
    return isinstance(engine, LazyEngine) and engine.lazy and n_tokens > eager_tokens(engine.n_layers, engine.n_heads)


FF_ROWS = 1024  # positions a long text's feed-forward takes at a time (by_rows)


def by_rows(ff: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, rows: int | None = None) -> torch.Tensor:
    """A position-wise function (a layer's feed-forward) of x (1, T, D), `rows` positions at a time where T is more
    and no gradient is kept: each position's result is its own, and a long text's (T, d_ff) intermediates, three or
    four at once, were the largest transient of its forward pass (about 150 MB for SmolLM2 at 8,192 tokens, beside
    the queries and keys a long text keeps). Anything else, and a result not shaped as x, is ff(x) whole."""
    rows = rows or FF_ROWS
    if torch.is_grad_enabled() or x.dim() != 3 or x.shape[0] != 1 or x.shape[1] <= rows:
        return ff(x)
    first = ff(x[:, :rows])
    if not isinstance(first, torch.Tensor) or first.shape != x[:, :rows].shape:
        return ff(x)
    out = x.new_empty(x.shape, dtype=first.dtype)
    out[:, :rows] = first
    for i in range(rows, x.shape[1], rows):
        out[:, i : i + rows] = ff(x[:, i : i + rows])
    return out


def feed_forward_by_rows(layers: Sequence[nn.Module]) -> None:
    """Each layer's feed-forward (`mlp`) of a loaded model computed by_rows from now on (the module's own forward
    wrapped on it: no new parameters, the same results). A mixture of experts (an `experts` module) is left whole."""

    def rows_of(whole: Callable) -> Callable:
        def forward(x: torch.Tensor, *args, **kwargs):
            return by_rows(whole, x) if not args and not kwargs else whole(x, *args, **kwargs)

        return forward

    for layer in layers:
        mlp = getattr(layer, "mlp", None)
        if isinstance(mlp, torch.nn.Module) and not hasattr(mlp, "experts") and "forward" not in vars(mlp):
            mlp.forward = rows_of(mlp.forward)  # type: ignore[method-assign]


def rename_weights(
    hf_state: dict[str, torch.Tensor],
    table: Sequence[tuple[str, str]],
    ignored: re.Pattern,
    family: str,
    prefix: str,
) -> dict[str, torch.Tensor]:
    """A Hugging Face state dict under a scratch model's names, by a table of (regex, replacement) rules tried in
    order; names `ignored` matches are left out, a name no rule matches is a KeyError (a checkpoint we do not know)."""
    ours: dict[str, torch.Tensor] = {}
    for name, tensor in hf_state.items():
        name = name.removeprefix(prefix)
        if ignored.match(name):
            continue
        for pattern, repl in table:
            new, n = re.subn("^" + pattern, repl, name)
            if n:
                ours[new] = tensor
                break
        else:
            raise KeyError(f"no rule in {family}.NAME_TABLE for the weight {name!r}")
    return ours


def share_weights(model: nn.Module, state: dict[str, torch.Tensor], family: str) -> None:
    """Give a scratch model (built on "meta") the Hugging Face model's own tensors: shared, not copied."""
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    if missing or unexpected:
        raise ModelLoadError(
            f"The {family} weights do not fit the scratch engine: missing {missing}, unexpected {unexpected}. "
            f"Extend {family.lower()}.NAME_TABLE for this checkpoint's names."
        )


def to_weights(per_layer: tuple[torch.Tensor, ...] | list[torch.Tensor]) -> torch.Tensor:
    """One (1, H, Tq, Tk) tensor per layer -> (L, H, Tq, Tk) float32 on the CPU."""
    return torch.stack([w[0] for w in per_layer]).detach().float().cpu()  # (L, H, Tq, Tk)


def shift_right(labels: torch.Tensor, start_id: int) -> torch.Tensor:
    """Teacher forcing: (B, T) labels y1 .. yT -> the decoder's inputs <start> y1 .. y(T-1)."""
    first = torch.full_like(labels[:, :1], start_id)
    return torch.cat([first, labels[:, :-1]], dim=1)  # (B, T)


OOM_NOTICE = "The GPU ran out of memory, so this result was computed on the CPU (slower, same numbers)."
T = TypeVar("T")


def run_with_cpu_fallback(
    engine: Engine, cpu_engine: Callable[[], Engine], call: Callable[[Engine], T]
) -> tuple[T, str | None]:
    """call(engine), or, if the GPU runs out of memory, call(the CPU engine).

    Returns (value, notice): the notice is None unless the fallback was taken. `cpu_engine` is a
    zero-argument callable, so a CPU copy of the model is only loaded when it is needed.
    """
    try:
        return call(engine), None
    except torch.OutOfMemoryError:
        if engine.device.type != "cuda":
            raise
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return call(cpu_engine()), OOM_NOTICE
