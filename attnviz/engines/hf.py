"""Any Hugging Face model as an attention engine, with eager attention forced.

Encoder-only models give {"self"}, decoder-only models {"causal"}, encoder-decoder
models {"self", "causal", "cross"} from a teacher-forced pass over a target text (or over
the model's own output when no target is given).
"""

from __future__ import annotations

import contextlib
import inspect
import os

import torch
from transformers import (
    AttentionInterface,
    AttentionMaskInterface,
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
)
from transformers.masking_utils import sdpa_mask
from transformers.models.auto.modeling_auto import (
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    MODEL_FOR_MASKED_LM_MAPPING_NAMES,
)

from attnviz.engines import decoder_steps
from attnviz.engines.base import (
    Architecture,
    Backend,
    Generation,
    ModelLoadError,
    eager_tokens,
    feed_forward_by_rows,
    is_long,
    make_generation,
    passes,
    redact,
    rope_type,
    shift_right,
    to_weights,
)
from attnviz.engines.hooks import HOOKS_KW, Hooks, point
from attnviz.engines.layers import attention_module, decoder_layers, out_weight, projects
from attnviz.engines.scratch import attend, capped, causal_mask, describe_device, resolve_device, value_norms
from attnviz.engines.steps import AttentionSteps
from attnviz.lazy import LazyAttention, forward_reads, forward_stats, given_normalisers
from attnviz.result import Attention, AttentionKind, AttentionResult, Results
from attnviz.tokens import Encoded, TokenAxis, Tokenizer

EAGER_HINT = (
    "Load it with attn_implementation='eager': transformers' default 'sdpa' and 'flash' "
    "attention never materialise the weights, so output_attentions comes back empty."
)
MAX_GENERATED = 64
FALLBACK_MAX_TOKENS = 512


def architecture_of(config) -> Architecture:
    """'encoder', 'decoder' or 'encoder-decoder'."""
    if getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder"
    mt = config.model_type
    if getattr(config, "is_decoder", False) or (
        mt in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and mt not in MODEL_FOR_MASKED_LM_MAPPING_NAMES
    ):
        return "decoder"
    return "encoder"


def max_tokens_of(config, tokenizer) -> int:
    """The longest input the model takes: the smallest sane limit its config and tokenizer state."""
    names = ("max_position_embeddings", "n_positions", "max_target_positions")
    stated = [getattr(config, n, None) for n in names] + [getattr(tokenizer, "model_max_length", None)]
    limits = [x for x in stated if isinstance(x, int) and 0 < x < 100_000]
    return min(limits) if limits else FALLBACK_MAX_TOKENS


MAX_TOKENS_ENV = "ATTNVIZ_MAX_TOKENS"


def limit_tokens(model_limit: int) -> int:
    """The model's own limit, or a lower one set by $ATTNVIZ_MAX_TOKENS (a server's input limit)."""
    raw = os.environ.get(MAX_TOKENS_ENV, "").strip()
    if not raw:
        return model_limit
    if not raw.isdigit() or int(raw) < 3:
        raise ValueError(f"{MAX_TOKENS_ENV} must be a whole number of tokens, at least 3 (got {raw!r})")
    return min(model_limit, int(raw))


# A decoder of CAPTURE_FAMILIES loads with attention "attnviz": the function below, which transformers calls in
# every layer with the layer's Q and K (after the rotary turn) and V. It is scratch.attend, the from-scratch
# engine's own step 3, so the same hook points (engines.hooks) are read or replaced here as on the scratch
# backend; the hooks of one call come down as the keyword argument `attnviz_hooks` (transformers passes a
# forward's extra keywords to attention), never through the shared model. The mask is SDPA's: none at all for
# plain causal attention (no N x N tensor), a boolean one otherwise (True: may attend).
ATTENTION = "attnviz"


def _attention(module, query, key, value, attention_mask, *, scaling=None, **kwargs):
    """The attention function transformers calls in every layer (see ATTENTION): (output (B, Tq, H, Dh), weights)."""
    hooks: Hooks | None = kwargs.get(HOOKS_KW)
    layer = getattr(module, "layer_idx", 0)
    mask = attention_mask
    window = kwargs.get("sliding_window") or 0  # Gemma 2/3, Mistral: this layer's window (its mask says it too)
    if mask is None and getattr(module, "is_causal", False) and not (hooks is not None and hooks.fused):
        tq, tk = query.shape[-2], key.shape[-2]
        mask = causal_mask(tq, tk, device=query.device)  # (Tq, Tk), aligned at the end
        if window and tk > window:  # no mask given (logits_from): the layer's window is ours to apply
            mask &= causal_mask(tq, tk, device=query.device).triu(diagonal=tk - tq - window + 1)
    elif mask is not None and mask.dtype != torch.bool:
        mask = mask > torch.finfo(mask.dtype).min / 2  # an additive mask: 0 may attend, the float minimum may not
    q, k, v = point(hooks, "q", layer, query), point(hooks, "k", layer, key), point(hooks, "v", layer, value)
    # Gemma 2's soft-capping and gpt-oss's learned sinks ("s_aux") come as keywords too
    softcap, sinks = kwargs.get("softcap"), kwargs.get("s_aux")
    z, weights = attend(q, k, v, mask, hooks, layer, scale=scaling, window=window, softcap=softcap, sinks=sinks)
    if hooks is not None and hooks.reads("value_norms", layer):  # Kobayashi et al. 2020's ||f(x)||, when asked
        w_o = out_weight(module)
        if w_o is not None:
            hooks.point("value_norms", layer, value_norms(v, w_o, q.shape[1]))
    if hooks is not None:
        hooks.finished(layer)
    return z.transpose(1, 2).contiguous(), weights


AttentionInterface.register(ATTENTION, _attention)
AttentionMaskInterface.register(ATTENTION, sdpa_mask)


def _norms_read(hooks: Hooks | None, n_layers: int) -> torch.Tensor | None:
    """(L, H, T) float32 on the CPU: the value norms a pass read in every layer, or None (not asked; a layer with no
    W_O attnviz knows)."""
    if hooks is None or sum(name == "value_norms" for name, _ in hooks.taken) != n_layers:
        return None
    return hooks.stacked("value_norms").float().cpu()


# Checked against transformers' eager weights (tests/test_lazy.py, tests/engines/test_families.py); others keep
# eager attention. Each computes scaled softmax over causal keys once its q and k reach the attention function
# (q/k norms, biases and fused projections come before it), with what the function is handed: a layer's scale
# (GPT-2's may differ by layer), its sliding window, soft-capping (Gemma 2) and learned sinks (gpt-oss).
CAPTURE_FAMILIES = ("llama", "qwen2", "qwen3", "mistral", "olmo2", "phi3", "gemma2", "gemma3_text", "gpt2", "gpt_oss")
FAMILY_NAMES = "Llama, Qwen 2/3, Mistral, OLMo 2, Phi-3, Gemma 2/3, GPT-2 and gpt-oss"
# each family as a person names it (transformers' model_type -> the name)
FAMILY_TITLES = {
    "bert": "BERT",
    "llama": "Llama",
    "qwen2": "Qwen 2",
    "qwen3": "Qwen 3",
    "mistral": "Mistral",
    "olmo2": "OLMo 2",
    "phi3": "Phi-3",
    "gemma2": "Gemma 2",
    "gemma3_text": "Gemma 3",
    "gpt2": "GPT-2",
    "gpt_oss": "gpt-oss",
}


# What keeps a known family off the path, in one sentence each (any other: its attention is not known to be plain)
OFF_THE_PATH = {
    "bloom": "BLOOM's ALiBi bias is added to the scores before its attention function, which never sees it",
    "mpt": "MPT's ALiBi bias is added to the scores before its attention function, which never sees it",
    "falcon": "Falcon's attention (ALiBi in some models) has not been checked against attnviz's",
    "t5": "T5's relative position bias is not passed to attention functions",
}


# The families whose rotary table has each pair's angle once, (T, Dh/2), turning the pairs (i, i + Dh/2) of the
# whole head (gpt-oss's own rotation); the others' tables are (T, r) with every angle twice, for the first r dimensions
HALF_TABLES = {"gpt_oss"}


def off_the_path(name: str, config) -> str:
    """The sentence that says why a model's attention is not attnviz's own (hooks, long texts, interventions)."""
    family = config.model_type
    why = OFF_THE_PATH.get(family, f"attnviz has not checked {family}'s attention against its own")
    return f"hook points are read in {FAMILY_NAMES} decoders; '{name}' is a {family} model: {why}."


def sliding_window(config) -> int | None:
    """The window a model's layers use, or None: Qwen 2/3 name one but use it only with use_sliding_window."""
    window = getattr(config, "sliding_window", None)
    if window and getattr(config, "use_sliding_window", True) is False:
        return None
    return window or None


def supports_capture(config) -> bool:
    """True for the model families whose captured queries and keys are known to give eager's exact weights.

    A family qualifies when its attention is scaled softmax over causal keys (within a sliding window or not, its
    scores soft-capped or not, beside learned sink logits or not: each a term LazyAttention has), with nothing else
    added to the scores (no ALiBi bias, no relative position bias).
    """
    return config.model_type in CAPTURE_FAMILIES


def layer_windows(model) -> tuple[int, ...]:
    """Each layer's sliding window (0: every earlier key): the layer's own (Gemma 3: 5 of every 6 layers), else the
    model's (Mistral names one for every layer)."""
    config = model.config
    out = []
    for block in decoder_layers(model):
        attn = attention_module(block)
        window = attn.sliding_window if hasattr(attn, "sliding_window") else sliding_window(config)
        out.append(int(window or 0))
    return tuple(out)


def check_layers(name: str, part: str, weights, expected: int | None) -> None:
    """One weight tensor per layer must come back; say how to fix it if not."""
    got = 0 if weights is None else sum(w is not None for w in weights)
    if got == 0 or (expected is not None and got != expected):
        raise RuntimeError(
            f"{name} returned {got} {part} attention tensors for {expected or 'its'} layers. {EAGER_HINT}"
        )


def _layers(config, *names: str) -> int | None:
    """The first of these config fields that holds a layer count."""
    for n in names:
        value = getattr(config, n, None)
        if isinstance(value, int):
            return value
    return None


KINDS_OF: dict[str, tuple[AttentionKind, ...]] = {
    "encoder": ("self",),
    "decoder": ("causal",),
    "encoder-decoder": ("self", "causal", "cross"),
}


@contextlib.contextmanager
def quiet_loading():
    """transformers' "Loading weights" bar left out while attnviz loads a model from disk (under a second for the
    bundled ones): in a notebook it was a bar and an "IProgress not found" warning in the first cell's output. A
    download keeps huggingface_hub's own bars; the caller's setting is restored after."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


class HFEngine:
    """A Hugging Face model and tokenizer, shared by every caller. An Engine.

    Passes of the families attnviz knows run two at once (engines.base.passes); any other model's, one at a time.
    """

    backend: Backend = "hf"

    def __init__(
        self, name: str, source: str, device: str | torch.device | None = None, *, local_files_only: bool = False
    ) -> None:
        self.name = name
        self.device = resolve_device(device)
        local = {"local_files_only": local_files_only}
        try:
            self.config = AutoConfig.from_pretrained(source, **local)
            self.tokenizer = Tokenizer(AutoTokenizer.from_pretrained(source, **local))
            self.architecture = architecture_of(self.config)
            loader = {"encoder-decoder": AutoModelForSeq2SeqLM, "decoder": self._decoder_loader()}.get(
                self.architecture, AutoModel
            )
            # An explicit dtype: the weights are float32 whatever the config says, and transformers does not
            # change torch's process-wide default dtype on the way.
            with quiet_loading():
                model = loader.from_pretrained(
                    source, attn_implementation=self._attention(), dtype=torch.float32, **local
                )
            self.model = model.to(self.device).eval()
        except Exception as err:  # the hub, the file system and the config all raise their own types
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ModelLoadError(
                f"Model '{name[:100]}' could not be loaded ({redact(first)[:300]}). Check the name or folder; "
                "with no network (or HF_HUB_OFFLINE=1) only models already on disk load. "
                'The model "default" (the bundled BERT) always works offline.'
            ) from err
        self.family = self.config.model_type
        self.max_tokens = limit_tokens(max_tokens_of(self.config, self.tokenizer.hf))
        self.n_layers = _layers(self.config, "num_hidden_layers", "n_layer", "decoder_layers", "num_layers") or 1
        self.n_heads = (
            _layers(self.config, "num_attention_heads", "n_head", "decoder_attention_heads", "num_heads") or 1
        )
        if not self.lazy:  # every weight of the longest input must fit the eager budget
            self.max_tokens = min(self.max_tokens, eager_tokens(self.n_layers, self.n_heads))
        self.kinds = KINDS_OF[self.architecture]
        self.device_name = describe_device(self.device)
        self._passes = passes(self._stateless())

    def _stateless(self) -> bool:
        """Whether a pass changes nothing in the model: BERT's encoder (its eager attention keeps no state)."""
        return self.family == "bert"

    lazy = False  # whether inputs past the eager budget get a LazyAttention (else the budget limits the input)
    sinks = False  # whether each head has a learned sink logit (gpt-oss): rows over the tokens sum to less than 1

    def _attention(self) -> str:
        """The attention implementation to load with: eager, so that output_attentions returns every weight."""
        return "eager"

    def _decoder_loader(self):
        """How a decoder loads: with its language-model head when it has one (so it can write)."""
        return AutoModel

    def encode(self, text: str) -> Encoded:
        """The text as the model's tokenizer cuts it, special tokens included."""
        return self.tokenizer.encode(text, self.max_tokens)

    def run(self, src: Encoded, target: str | None = None, progress=None) -> Results:
        """Self or causal attention; all three kinds for an encoder-decoder (teacher-forced over `target`)."""
        with self._passes, torch.inference_mode():
            ids = torch.tensor([src.ids], device=self.device)  # (1, T)
            if self.architecture == "encoder-decoder":
                return Results(self._run_seq2seq(src, ids, target))
            out = self.model(input_ids=ids, output_attentions=True)
            check_layers(self.name, "self", out.attentions, _layers(self.config, "num_hidden_layers", "n_layer"))
            kind = self.kinds[0]
            return Results({kind: self._result(out.attentions, src.axis, src.axis, kind, src.truncated)})

    def batch_weights(self, ids: list[tuple[int, ...]]) -> tuple[torch.Tensor, ...]:
        """One pass over several texts' ids, padded on the right: each layer's (B, H, T, T) weights, T the longest.

        Text b's own weights are [b, :, :n_b, :n_b] (its pads are masked out as keys, and a pad never precedes a
        real token, so a decoder's positions are the text's own); the rows and columns past n_b are padding.
        An encoder or a decoder's self-attention (an encoder-decoder's three kinds go through `run`)."""
        if self.architecture == "encoder-decoder":
            raise ValueError(f"'{self.name}' is an encoder-decoder: a batch pass covers encoders and decoders")
        longest = max(len(i) for i in ids)
        pad = self.tokenizer.hf.pad_token_id if self.tokenizer.hf.pad_token_id is not None else 0
        batch = torch.tensor([list(i) + [pad] * (longest - len(i)) for i in ids], device=self.device)
        mask = torch.tensor([[1] * len(i) + [0] * (longest - len(i)) for i in ids], device=self.device)
        with self._passes, torch.inference_mode():
            no_cache = {"use_cache": False} if self.architecture == "decoder" else {}
            out = self.model.base_model(input_ids=batch, attention_mask=mask, output_attentions=True, **no_cache)
        check_layers(self.name, "self", out.attentions, _layers(self.config, "num_hidden_layers", "n_layer"))
        return tuple(out.attentions)

    def _run_seq2seq(self, src: Encoded, ids: torch.Tensor, target: str | None) -> dict[str, Attention]:
        start = self._start_id()
        start_token = self.tokenizer.hf.convert_ids_to_tokens(start)
        if target is None or not target.strip():
            generated = self.model.generate(input_ids=ids, max_new_tokens=MAX_GENERATED, do_sample=False, num_beams=1)
            decoder_ids = generated[:, :-1] if generated.size(1) > 1 else generated  # inputs that predicted it
            written = generated[0, 1:].tolist()  # what the decoder wrote, after its start token
            tgt = self.tokenizer.axis_for_ids(written).shifted_right(start_token) if written else None
            if tgt is None or len(tgt) != decoder_ids.size(1):
                tgt = self.tokenizer.plain_axis(decoder_ids[0].tolist())
        else:
            labels = self.tokenizer.encode(target, self.max_tokens, target=True)
            decoder_ids = shift_right(torch.tensor([labels.ids], device=self.device), start)  # (1, Tt)
            tgt = labels.axis.shifted_right(start_token)
        out = self.model(input_ids=ids, decoder_input_ids=decoder_ids, output_attentions=True)
        n_enc = _layers(self.config, "encoder_layers", "num_layers")
        n_dec = _layers(self.config, "decoder_layers", "num_decoder_layers", "num_layers")
        check_layers(self.name, "encoder self", out.encoder_attentions, n_enc)
        check_layers(self.name, "decoder self", out.decoder_attentions, n_dec)
        check_layers(self.name, "cross", out.cross_attentions, n_dec)
        s = src.axis
        return {
            "self": self._result(out.encoder_attentions, s, s, "self", src.truncated),
            "causal": self._result(out.decoder_attentions, tgt, tgt, "causal", src.truncated),
            "cross": self._result(out.cross_attentions, tgt, s, "cross", src.truncated),
        }

    def _start_id(self) -> int:
        """The token a decoder starts from: decoder_start_token_id, else the pad token, else 0."""
        start = getattr(self.config, "decoder_start_token_id", None)
        if start is None:
            start = self.config.pad_token_id if self.config.pad_token_id is not None else 0
        return start

    def _result(self, per_layer, target: TokenAxis, source: TokenAxis, kind: AttentionKind, truncated: int):
        weights = to_weights(per_layer)  # (L, H, Tq, Tk); AttentionResult checks the causal triangle
        return AttentionResult(weights, target, source, kind, self.name, self.device_name, truncated)


class HFDecoderEngine(HFEngine):
    """A Hugging Face decoder with its language-model head: an Engine and a GeneratingEngine.

    Inputs past the eager budget (engines.base.eager_tokens) get a LazyAttention: SDPA computes the output while
    each layer's rotated queries and keys are kept (see ATTENTION), for models whose attention allows it.
    """

    def __init__(self, *args, **kwargs) -> None:
        try:
            config = AutoConfig.from_pretrained(args[1], local_files_only=kwargs.get("local_files_only", False))
            self.lazy = supports_capture(config)
        except Exception:  # HFEngine's own load reports the failure in full
            self.lazy = False
        super().__init__(*args, **kwargs)
        self.sinks = self.sink_logits() is not None
        if self.lazy:  # a long text's feed-forward a thousand positions at a time: its largest transient, cut
            feed_forward_by_rows(decoder_layers(self.model))

    def _attention(self) -> str:
        return ATTENTION if self.lazy else "eager"

    @property
    def windows(self) -> tuple[int, ...]:
        """Each layer's sliding window in tokens (0: every earlier key): Gemma 3's 512 on 5 of every 6 layers."""
        return layer_windows(self.model)

    def _stateless(self) -> bool:
        """Decoders on attnviz's attention with a fixed rotary table (a 'dynamic' one grows in place)."""
        return self.lazy and rope_type(self.config) == "default"

    def _decoder_loader(self):
        return AutoModelForCausalLM

    def run(self, src: Encoded, target: str | None = None, progress=None) -> Results:
        """Causal attention: every weight for a short input, a LazyAttention past the eager budget."""
        if not is_long(self, len(src.ids)):
            # on attnviz's attention, each key's ||f(x)|| too (the value-weighted view): a small share of the pass
            hooks = Hooks(read=("value_norms",), n_layers=self.n_layers) if self.lazy else None
            with self._passes, torch.inference_mode():
                weights = self.weights_of(src.ids, hooks)
            axis, device, windows = src.axis, self.device_name, self.held_windows()
            result = AttentionResult(
                weights,
                axis,
                axis,
                "causal",
                self.name,
                device,
                src.truncated,
                value_norms=_norms_read(hooks, self.n_layers),
                sinks=self.sinks,
                windows=windows,
            )
            return Results({"causal": result})
        return Results({"causal": self.lazy_run(src, progress)}, lazy=True)

    def held_windows(self) -> tuple[int, ...]:
        """Each layer's sliding window for a result that holds every weight, read off attnviz's attention modules
        (a model on transformers' own attention marks none); () where no layer has one."""
        windows = layer_windows(self.model) if self.lazy else ()
        return windows if any(windows) else ()

    def forward(self, enc: Encoded, hooks: Hooks):
        """One pass over the text with these hooks (engines.hooks; CAPTURE_FAMILIES): the model's output."""
        if not self.lazy:
            raise ValueError(off_the_path(self.name, self.config))
        with self._passes, torch.inference_mode():
            ids = torch.tensor([enc.ids], device=self.device)  # (1, T)
            return self.model(input_ids=ids, use_cache=False, **{HOOKS_KW: hooks})

    def lazy_run(self, src: Encoded, progress=None) -> LazyAttention:
        """One fused pass that reads each layer's Q and K at the hook points: linear in N, weights on demand."""
        softcap = getattr(self.config, "attn_logit_softcapping", None) or 0.0  # Gemma 2
        # where attnviz's CPU kernel runs, the analysis is computed in the forward pass (lazy.ForwardStats)
        analysis = None if softcap else forward_stats(src.axis, "causal", self.n_layers, self.n_heads, self.device)
        hooks = Hooks(
            read=forward_reads(self.device),
            fused=True,
            progress=progress,
            n_layers=self.n_layers,
            gather=True,
            stats=analysis,
        )
        with self._passes, torch.inference_mode():
            ids = torch.tensor([src.ids], device=self.device)  # (1, N)
            self.model.base_model(input_ids=ids, use_cache=False, **{HOOKS_KW: hooks})  # no logits, no cache
        q, k = hooks.stacked("q").float(), hooks.stacked("k").float()  # (L, H, N, Dh), (L, Hkv, N, Dh): stay on
        # the model's device; LazyAttention computes every block there and sends back only what a view draws
        modules = [attention_module(block) for block in decoder_layers(self.model)]
        scales = tuple(float(m.scaling) for m in modules)  # GPT-2's may differ by layer
        windows = layer_windows(self.model)
        lazy = LazyAttention(
            q,
            k,
            src.axis,
            src.axis,
            "causal",
            self.name,
            self.device_name,
            src.truncated,
            scale=scales[0],
            windows=windows if any(windows) else (),
            scales=scales if len(set(scales)) > 1 else (),
            softcap=float(softcap),
            sink_logits=self.sink_logits(),
            normalisers=given_normalisers(hooks.taken, self.n_layers),
        )
        if analysis is not None:
            lazy.take(analysis)
        return lazy

    def sink_logits(self) -> torch.Tensor | None:
        """(L, H) float32: each head's learned sink logit (gpt-oss's `sinks`), or None for a model without them (and
        for any decoder off attnviz's attention path: its layers' names are not known, BLOOM's `self_attention`)."""
        if not self.lazy:
            return None
        found = [getattr(attention_module(block), "sinks", None) for block in decoder_layers(self.model)]
        if not all(isinstance(t, torch.Tensor) for t in found):
            return None
        return torch.stack([t.detach().float() for t in found])  # type: ignore[union-attr]

    @property
    def stop_ids(self) -> set[int]:
        """Token ids that end a reply: the end-of-text tokens the config and the tokenizer name."""
        eos = self.config.eos_token_id
        ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        hf = self.tokenizer.hf
        for token in ("<|im_end|>", "<|endoftext|>", hf.eos_token):
            if token and token in hf.get_vocab():
                ids.add(hf.convert_tokens_to_ids(token))
        return ids

    @property
    def has_chat_template(self) -> bool:
        """Whether the tokenizer carries a chat template (the bundled Gemma 3 270M, a base model, has none)."""
        return bool(getattr(self.tokenizer.hf, "chat_template", None))

    def chat_prompt(self, prompt: str) -> str:
        """The prompt as a user message in the model's own chat template (the prompt as is without one)."""
        hf = self.tokenizer.hf
        if not self.has_chat_template:
            return prompt
        messages = [{"role": "user", "content": prompt}]
        return hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    @property
    def hooked(self) -> bool:
        """Whether passes go through the hook points: decoders of CAPTURE_FAMILIES, on attnviz's attention function."""
        return self.lazy

    def _hooks_kw(self, hooks: Hooks | None) -> dict:
        if hooks is None:
            return {}
        if not self.hooked:
            raise ValueError(off_the_path(self.name, self.config))
        return {HOOKS_KW: hooks}

    def logits(self, ids, hooks: Hooks | None = None) -> torch.Tensor:
        """(T, V) float32 on the CPU: the next-token logits at every position of one pass over `ids`, with hooks."""
        kw = self._hooks_kw(hooks)
        with self._passes, torch.inference_mode():
            out = self.model(input_ids=torch.tensor([list(ids)], device=self.device), use_cache=False, **kw)
            return out.logits[0].float().cpu()

    def residuals(self, ids) -> torch.Tensor:
        """(L, T, D) on the model's device: the residual stream entering each layer, one clean pass."""
        with self._passes, torch.inference_mode():
            out = self.model.base_model(
                input_ids=torch.tensor([list(ids)], device=self.device), use_cache=False, output_hidden_states=True
            )
            return torch.stack([h[0] for h in out.hidden_states[: self.n_layers]])  # [embeddings, after layer 0, ...]

    def logits_from(self, layer: int, x: torch.Tensor, hooks: Hooks | None = None, *, last: bool = False):
        """x (B, T, D) entering `layer` -> logits (B, T, V), or (B, V) at the last position, through transformers'
        own layers with attnviz's attention (causal: no mask given); the layers before it are not run again."""
        if not self.hooked:
            raise ValueError(off_the_path(self.name, self.config))
        inner = self.model.base_model
        with self._passes, torch.inference_mode():
            positions = torch.arange(x.shape[1], device=x.device)[None]  # (1, T)
            layers = decoder_layers(self.model)
            turn_of = self._turn_tables(x, positions)
            for i, block in enumerate(layers[layer:], layer):
                x = block(
                    x,
                    attention_mask=None,
                    position_ids=positions,
                    position_embeddings=turn_of[i],
                    **self._hooks_kw(hooks),
                )
                x = x[0] if isinstance(x, tuple) else x  # GPT-2's layers answer a tuple
            final_norm = inner.norm if hasattr(inner, "norm") else inner.ln_f
            hidden = final_norm(x[:, -1] if last else x)
            logits = self.model.lm_head(hidden)
            cap = getattr(self.config, "final_logit_softcapping", None)  # Gemma 2/3: the head's own soft cap
            return (capped(logits, cap) if cap else logits).float().cpu()

    def _turn_tables(self, x: torch.Tensor, positions: torch.Tensor) -> list:
        """Each layer's rotary table, transformers' own (cos, sin), each (1, T, r), for `positions` (1, T); None for
        every layer of a model without one (GPT-2 adds its positions to the embeddings, before the first layer)."""
        rotary = getattr(self.model.base_model, "rotary_emb", None)
        kinds = getattr(self.config, "layer_types", None)
        n_layers = len(decoder_layers(self.model))
        if rotary is None:
            return [None] * n_layers
        if kinds and "layer_type" in inspect.signature(rotary.forward).parameters:  # Gemma 3: two rotary tables,
            turns = {kind: rotary(x, positions, kind) for kind in set(kinds)}  # each to its layers
            return [turns[kind] for kind in kinds]
        return [rotary(x, position_ids=positions)] * n_layers

    def turns(self, layer: int, n: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(cos, sin), each (n, r): the rotary turn of `layer`'s queries and keys at positions 0..n-1, as the model
        applies it to their first r dimensions (x cos + rotate_half(x) sin); None for a model without rotary
        positions."""
        if not self.hooked:
            return None
        with self._passes, torch.inference_mode():
            x = torch.zeros(1, n, 1, device=self.device, dtype=self.model.dtype)  # the tables read its dtype, device
            table = self._turn_tables(x, torch.arange(n, device=self.device)[None])[layer]
        if table is None:
            return None
        cos, sin = table[0][0].float().cpu(), table[1][0].float().cpu()
        if self.family in HALF_TABLES:  # each pair's angle once: the pairs are (i, i + Dh/2), as rotate_half pairs them
            cos, sin = torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1)
        return cos, sin

    @property
    def n_kv_heads(self) -> int:
        """Key/value heads: fewer than the query heads with grouped-query attention (Gemma 3 270M: 1 for 4)."""
        return int(getattr(self.config, "num_key_value_heads", None) or self.n_heads)

    def why_no_steps(self) -> str | None:
        """Why this decoder's layers cannot be shown step by step (engines.decoder_steps), or None when they can."""
        if not self.hooked:
            return off_the_path(self.name, self.config)
        if not projects(attention_module(decoder_layers(self.model)[0])):
            return f"attnviz does not know where {self.family}'s layers project Q, K and V"
        return None

    def steps(self, text: str, layer: int, *, causal: bool = True) -> tuple[Encoded, AttentionSteps]:
        """Every intermediate of one layer's attention (engines.decoder_steps); a decoder is always causal."""
        why = self.why_no_steps()
        if why is not None:
            raise ValueError(f"'{self.name[:100]}' cannot be shown step by step: {why}.")
        return decoder_steps.decoder_steps(self, text, layer)

    def weights_of(self, ids, hooks: Hooks | None = None) -> torch.Tensor:
        """(L, H, T, T): the attention of one pass over `ids` (inside self._passes), through `hooks` if given."""
        kw = {} if hooks is None else {HOOKS_KW: hooks}
        ids_t = torch.tensor([list(ids)], device=self.device)
        out = self.model.base_model(input_ids=ids_t, output_attentions=True, **kw)
        check_layers(self.name, "self", out.attentions, _layers(self.config, "num_hidden_layers", "n_layer"))
        return to_weights(out.attentions)

    def generate(self, prompt: str, max_new_tokens: int, *, chat: bool = True, progress=None) -> Generation:
        """Greedy decoding with a key/value cache, one token at a time; then the attention of every step."""
        limit = min(self.max_tokens, eager_tokens(self.n_layers, self.n_heads))  # the steps keep every weight
        chat = chat and self.has_chat_template
        enc = self.tokenizer.encode(self.chat_prompt(prompt) if chat else prompt, limit, specials_by_id=chat)
        ids, stop = list(enc.ids), self.stop_ids
        with self._passes, torch.inference_mode():
            past, feed = None, list(ids)
            for step in range(max_new_tokens):
                if len(ids) >= limit:
                    break
                out = self.model(
                    input_ids=torch.tensor([feed], device=self.device), past_key_values=past, use_cache=True
                )
                past, nxt = out.past_key_values, int(out.logits[0, -1].argmax())
                ids.append(nxt)
                feed = [nxt]
                if progress:
                    progress(step + 1, max_new_tokens)
                if nxt in stop:
                    break
            windows = self.held_windows()
            return make_generation(
                self, self.tokenizer, enc, ids, self.weights_of, stop, sinks=self.sinks, windows=windows, chat=chat
            )


def open_engine(name: str, source: str, device=None, *, local_files_only: bool = False) -> HFEngine:
    """The right engine class for a model: a decoder with a head can write, the others cannot."""
    try:
        config = AutoConfig.from_pretrained(source, local_files_only=local_files_only)
        decoder = architecture_of(config) == "decoder" and config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except Exception:  # HFEngine reports the failure in full
        decoder = False
    cls = HFDecoderEngine if decoder else HFEngine
    return cls(name, source, device, local_files_only=local_files_only)
