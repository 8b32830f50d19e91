"""What each model family can do in attnviz, as the code decides it: docs/models.md's support table.

For each family a tiny model with seeded random weights is built from transformers' own config class (as
tests/engines/test_families.py builds them; the bundled BERT's tokenizer, whose ids fit every vocabulary here), saved
to a temporary folder, and every view is tried through attnviz's own entry points, exactly as a user's call goes:

- short: `attnviz.attention(text, model=folder)` (every weight; rows must sum to 1);
- long: the same past the eager budget (ATTNVIZ_EAGER_MB=1): "lazy" where queries and keys are kept and weights
  computed on demand, "eager" where every weight is held (a long text then stops at a few thousand tokens);
- hooks: a forward pass reading the queries at the hook points (engines/hooks.py);
- ablation, patching, induction, generation: `attnviz.ablate`, `attnviz.patch`, `attnviz.induction`,
  `attnviz.generate` on a few tokens;
- corpus: the engine a corpus run measures with (corpus.models.batched);
- query/key space: one head's queries and keys read for the space (corpus.qk.read_qk);
- value-weighted: the Heads page's ||αf(x)|| (analysis.view_options.value_weighted) on the short text's result, on
  the scratch backend where the page reads that one (a model it rebuilds: BERT, Llama);
- scratch: the model rebuilt on attnviz's from-scratch engine (registry.scratch_engine).

A cell is "yes" (or "lazy"/"eager"), or "no:" and the first sentence of what attnviz answers. The table is what the
code does, not a list kept beside it: tests/engines/test_families.py runs --check, which fails where docs/models.md
says otherwise.

Usage: python scripts/support_table.py [--write | --check]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
DOC = ROOT / "docs" / "models.md"
BEGIN = "<!-- support table: python scripts/support_table.py --write -->"
END = "<!-- end of the support table -->"
VIEWS = (
    "short",
    "long",
    "hooks",
    "ablation",
    "patching",
    "induction",
    "generation",
    "corpus",
    "query/key space",
    "value-weighted",
    "step by step",
    "scratch",
)
SHAPE = dict(
    hidden_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
    max_position_embeddings=1024,
)  # fmt: skip
TEXT = "The animal didn't cross the street because it was too tired, and the street was wide. " * 3
LONG = TEXT * 8


def _configs(vocab: int) -> dict:
    """family -> (what it is, its tiny config)."""
    from transformers import (
        BertConfig,
        Gemma2Config,
        Gemma3TextConfig,
        GPT2Config,
        GptOssConfig,
        LlamaConfig,
        MistralConfig,
        Olmo2Config,
        Phi3Config,
        Qwen2Config,
        Qwen3Config,
    )

    window = {"sliding_window": 16}
    return {
        "llama": ("Llama, SmolLM2", LlamaConfig(vocab_size=vocab, **SHAPE)),
        "qwen2": ("Qwen 2", Qwen2Config(vocab_size=vocab, **SHAPE)),
        "qwen3": ("Qwen 3 (q/k norms)", Qwen3Config(vocab_size=vocab, head_dim=12, **SHAPE)),
        "mistral": ("Mistral (a window on every layer)", MistralConfig(vocab_size=vocab, **window, **SHAPE)),
        "olmo2": ("OLMo 2", Olmo2Config(vocab_size=vocab, **SHAPE)),
        "phi3": ("Phi-3", Phi3Config(vocab_size=vocab, pad_token_id=0, **SHAPE)),
        "gemma3_text": (
            "Gemma 3 (windows on 5 of 6 layers, one key/value head)",
            Gemma3TextConfig(
                vocab_size=vocab,
                **{**SHAPE, "num_hidden_layers": 3, "num_key_value_heads": 1},
                head_dim=12,
                query_pre_attn_scalar=12,
                **window,
                layer_types=["sliding_attention", "sliding_attention", "full_attention"],
            ),
        ),  # fmt: skip
        "gpt2": ("GPT-2", GPT2Config(vocab_size=vocab, n_embd=48, n_layer=2, n_head=4, n_positions=1024)),
        "gpt2-by-layer": (
            "GPT-2 with a scale per layer (`scale_attn_by_inverse_layer_idx`)",
            GPT2Config(
                vocab_size=vocab, n_embd=48, n_layer=2, n_head=4, n_positions=1024, scale_attn_by_inverse_layer_idx=True
            ),
        ),
        "gemma2": (
            "Gemma 2 (soft-capped scores)",
            Gemma2Config(vocab_size=vocab, head_dim=12, query_pre_attn_scalar=12, **window, **SHAPE),
        ),
        "gpt_oss": (
            "gpt-oss (learned sinks)",
            GptOssConfig(vocab_size=vocab, head_dim=12, num_local_experts=4, num_experts_per_tok=2, **window, **SHAPE),
        ),
        "bert": (
            "BERT (an encoder)",
            BertConfig(
                vocab_size=vocab, hidden_size=48, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
            ),
        ),  # fmt: skip
    }


def _build(family: str, config, folder: Path, tokenizer) -> None:
    import torch
    from transformers import AutoModel, AutoModelForCausalLM

    torch.manual_seed(7)
    auto = AutoModel if family == "bert" else AutoModelForCausalLM
    model = auto.from_config(config, attn_implementation="eager")
    if family == "gpt_oss":  # its sinks start at zero: away from it, so that they take a share of each row
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("sinks"):
                    p.uniform_(-1.0, 2.0)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def _said(err: BaseException, folder: Path, family: str) -> str:
    """ "no: " and the first sentence of what attnviz answered (its temporary folder named by the family, a
    parenthesis left out)."""
    text = str(err).replace(str(folder), family).replace(folder.name, family)
    text = re.split(r"(?<=[.:;])\s| \(", text.strip(), maxsplit=1)[0].rstrip(".:;")
    return "no: " + text.replace("|", "/")


def _row(family: str, folder: Path) -> dict[str, str]:
    import attnviz
    from attnviz.corpus import models as corpus_models
    from attnviz.corpus import qk
    from attnviz.engines import registry
    from attnviz.engines.hooks import Hooks

    out: dict[str, str] = {}
    name = str(folder)
    try:
        engine = registry.load(name, "hf", "cpu")
    except Exception as e:
        return dict.fromkeys(VIEWS, _said(e, folder, family))

    def attempt(view, call):
        try:
            got = call()
        except Exception as e:
            out[view] = _said(e, folder, family)
        else:
            out[view] = got if isinstance(got, str) else "yes"

    decoder = engine.architecture == "decoder"
    attempt("short", lambda: attnviz.attention(TEXT, model=name))

    def long():
        old = os.environ.get("ATTNVIZ_EAGER_MB")
        os.environ["ATTNVIZ_EAGER_MB"] = "1"
        try:
            return "lazy" if attnviz.attention(LONG, model=name).lazy else "eager"
        finally:
            os.environ.pop("ATTNVIZ_EAGER_MB") if old is None else os.environ.__setitem__("ATTNVIZ_EAGER_MB", old)

    attempt("long", long)

    def hooks():
        if hasattr(engine, "forward"):
            engine.forward(engine.encode(TEXT), Hooks(read=("q",)))
            return "yes"
        scratch = registry.scratch_engine(engine)  # an encoder's hook points are its rebuilt layers'
        scratch.forward(scratch.encode(TEXT), Hooks(read=("q",)))
        return "yes (scratch backend)"

    attempt("hooks", hooks)
    attempt("ablation", lambda: attnviz.ablate(TEXT, "L1H1", model=name))

    def patching():
        from attnviz.interventions.runs import one_token, token_text

        words: list[str] = []  # two words the model writes as one token each (its own tokenizer's pieces)
        for i in engine.encode(TEXT).ids:
            word = token_text(engine, i)
            with contextlib.suppress(ValueError):
                if one_token(engine, word) == i and word not in words:
                    words.append(word)
            if len(words) == 2:
                break
        return attnviz.patch(TEXT, TEXT.replace("animal", "person"), *words, model=name)

    attempt("patching", patching)
    attempt("induction", lambda: attnviz.induction(model=name, length=8, batch=2))
    attempt("generation", lambda: attnviz.generate("The animal", model=name, max_new_tokens=2, chat=False))
    attempt("corpus", lambda: corpus_models.batched(corpus_models.corpus_engine(engine), family))

    def space():
        if hasattr(engine, "forward"):
            qk.read_qk(engine, TEXT, 0, 0)
            return "yes"
        qk.read_qk(registry.scratch_engine(engine), TEXT, 0, 0)  # an encoder's, on its rebuilt layers
        return "yes (scratch backend)"

    attempt("query/key space", space)

    def value_weighted():  # the Heads page's request_for: the scratch backend wherever it rebuilds the model
        from attnviz.analysis import view_options

        if registry.can_rebuild(engine):
            view_options.value_weighted(attnviz.attention(TEXT, model=name, backend="scratch").main)
            return "yes (scratch backend)"
        view_options.value_weighted(attnviz.attention(TEXT, model=name).main)
        return "yes"

    attempt("value-weighted", value_weighted)

    def steps():  # the Inside page's choice: BERT and Llama rebuilt on the scratch backend, other decoders as loaded
        if registry.can_rebuild(engine):
            registry.scratch_engine(engine).steps(TEXT, 0)
            return "yes (scratch backend)"
        why = registry.why_no_steps(engine)
        if why is not None:
            raise ValueError(why)
        engine.steps(TEXT, 0)
        return "yes"

    attempt("step by step", steps)
    attempt("scratch", lambda: registry.scratch_engine(engine))
    if not decoder:  # an encoder reads both ways: the decoder's views say so in their own words
        out["long"] = out["long"] if out["long"] != "eager" else "eager (512 tokens at most)"
    return out


def table() -> str:
    """The markdown table, from every family's tiny model."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    from attnviz.engines import registry

    hf_logging.set_verbosity_error()
    tokenizer = AutoTokenizer.from_pretrained(registry.default_model_dir(), model_max_length=1024)
    lines = ["| family | " + " | ".join(VIEWS) + " |", "|---" * (len(VIEWS) + 1) + "|"]
    notes: list[str] = []  # each refusal's sentence once, numbered under the table

    def cell(value: str) -> str:
        if not value.startswith("no: "):
            return value
        if value[4:] not in notes:
            notes.append(value[4:])
        return f"no ({notes.index(value[4:]) + 1})"

    with tempfile.TemporaryDirectory(prefix="attnviz-families-") as tmp:
        for family, (what, config) in _configs(tokenizer.vocab_size).items():
            folder = Path(tmp) / family
            _build(family, config, folder, tokenizer)
            with contextlib.redirect_stdout(sys.stderr):
                row = _row(family, folder)
            lines.append(f"| {what} (`{config.model_type}`) | " + " | ".join(cell(row[v]) for v in VIEWS) + " |")
    said = [f"({i}) {text}." for i, text in enumerate(notes, 1)]
    return (
        "\n".join(lines)
        + "\n\nWhat attnviz answers where a cell says no:\n\n"
        + "\n".join(f"- {x}" for x in said)
        + "\n"
    )


def _documented() -> str:
    text = DOC.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOC} has no support table between {BEGIN!r} and {END!r}")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="write the table into docs/models.md")
    parser.add_argument("--check", action="store_true", help="exit 1 where docs/models.md's table differs")
    args = parser.parse_args()
    made = table()
    if args.write:
        text = DOC.read_text(encoding="utf-8")
        head, rest = text.split(BEGIN, 1)
        DOC.write_text(head + BEGIN + "\n\n" + made + "\n" + END + rest.split(END, 1)[1], encoding="utf-8")
        print(f"wrote {DOC}")
        return 0
    if args.check:
        if made != _documented():
            print("docs/models.md's support table is not what the code does; the code's:\n\n" + made)
            return 1
        print("docs/models.md's support table is the code's")
        return 0
    print(made)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
