"""What every intervention shares: the decoder it needs, the per-token loss, the top next tokens, heads by name."""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from attnviz.engines.base import Engine, InterveningEngine
from attnviz.result import head_index

DECODER_ONLY = (
    "This needs a decoder whose attention attnviz computes (SmolLM2, or a Llama, Qwen 2 or 3, Mistral, OLMo 2, "
    "Phi-3, Gemma 2 or 3, GPT-2 or gpt-oss decoder; the scratch backend: Llama): "
    "it reads the next-token prediction, which an encoder such as BERT does not make."
)


def can_intervene(engine: Engine) -> bool:
    """Whether this engine is a decoder whose attention attnviz computes (what every intervention needs)."""
    return isinstance(engine, InterveningEngine) and engine.hooked


def decoder(engine: Engine) -> InterveningEngine:
    """The engine as an InterveningEngine, or a ValueError that says which models can do this."""
    if not isinstance(engine, InterveningEngine) or not engine.hooked:
        raise ValueError(DECODER_ONLY)
    return engine


def per_token_loss(logits: Tensor, ids: Sequence[int]) -> Tensor:
    """(T, V) logits of a pass over ids -> (T - 1,): at position i, the cross-entropy of token i + 1 (nats)."""
    target = torch.tensor(list(ids[1:]), dtype=torch.long)
    return F.cross_entropy(logits[:-1].float(), target, reduction="none")


def top_tokens(engine: Engine, row: Tensor, k: int = 5) -> list[dict]:
    """The k likeliest next tokens of one logits row (V,): [{"token", "id", "p"}], the token as text."""
    p = torch.softmax(row.float(), -1)
    values, ids = p.topk(k)
    return [
        {"token": token_text(engine, int(i)), "id": int(i), "p": float(v)} for i, v in zip(ids, values, strict=True)
    ]


def token_text(engine: Engine, token_id: int) -> str:
    """One token as the text it writes (a leading space kept), not the tokenizer's byte-level piece."""
    return decoder(engine).tokenizer.hf.decode([token_id])


def one_token(engine: Engine, word: str) -> int:
    """The id of `word` as one token, as the model would write it next (write " Anna" with its space)."""
    ids = decoder(engine).tokenizer.hf(word, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        pieces = [token_text(engine, i) for i in ids]
        raise ValueError(
            f"{word!r} is {len(ids)} tokens here ({pieces!r}): give a word that is one token "
            "(a name or word after a space is often one: ' Anna')"
        )
    return ids[0]


def parse_heads(raw: str, n_layers: int, n_heads: int) -> dict[int, list[int]]:
    """ "3.1,10.4" (0-based layer.head pairs) or "L4H2,L11H5" (1-based, as the pages name heads) -> {3: [1], 10: [4]};
    a ValueError that shows both forms otherwise."""
    heads: dict[int, list[int]] = {}
    for part in (p.strip() for p in raw.split(",") if p.strip()):
        m = re.fullmatch(r"(\d+)\.(\d+)", part)
        if m:
            layer, head = int(m.group(1)), int(m.group(2))
            if layer >= n_layers or head >= n_heads:
                raise ValueError(f"{part}: this model has layers 0-{n_layers - 1} and heads 0-{n_heads - 1} (0-based)")
        else:
            try:
                layer, head = head_index(part.upper())
            except ValueError:
                raise ValueError(
                    f"heads are written LAYER.HEAD, 0-based (3.1), or L<layer>H<head>, 1-based (L4H2), "
                    f"separated by commas (got {part!r})"
                ) from None
            if layer >= n_layers or head >= n_heads:
                raise ValueError(f"{part}: this model has layers 1-{n_layers} and heads 1-{n_heads} (1-based)")
        heads.setdefault(layer, []).append(head)
    if not heads:
        raise ValueError("name at least one head, like 3.1 (layer 3, head 1, 0-based) or L4H2 (1-based)")
    return heads
