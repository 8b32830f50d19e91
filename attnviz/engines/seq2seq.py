"""A small encoder-decoder Transformer built from scratch.MultiHeadAttention, and its shipped date model.

Encoder: self-attention over the source. Decoder: masked (causal) self-attention over what it
has written so far, then cross-attention from each of its positions to every source position.
Pre-LayerNorm blocks, sinusoidal positions, characters as tokens. `DateEngine` serves the
checkpoint trained by attnviz/train/dates.py: free-form dates in, ISO dates out.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnviz.engines.base import Architecture, Backend, ModelLoadError, shift_right, to_weights
from attnviz.engines.hooks import Hooks
from attnviz.engines.scratch import MultiHeadAttention, causal_mask, describe_device, key_padding_mask, resolve_device
from attnviz.result import AttentionKind, AttentionResult, Results
from attnviz.tokens import NO_SPAN, Encoded, TokenAxis, check_text

CHECKPOINT_DIR = Path(__file__).resolve().parent / "checkpoints"
PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPACE_LABEL = "␣"  # a space drawn as a visible character on an axis


@dataclass(frozen=True)
class Seq2SeqConfig:
    """The sizes of our encoder-decoder and its character vocabulary."""

    chars: str  # the character vocabulary (after the four special tokens)
    d_model: int = 128
    num_heads: int = 4
    encoder_layers: int = 2
    decoder_layers: int = 2
    d_ff: int = 256
    max_source: int = 48
    max_target: int = 12


class CharVocab:
    """Characters <-> ids; 0..3 are <pad>, <s>, </s>, <unk>."""

    def __init__(self, chars: str) -> None:
        self.itos = [PAD, BOS, EOS, UNK, *chars]
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.pad, self.bos, self.eos, self.unk = 0, 1, 2, 3

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        """One id per character; characters outside the vocabulary are <unk>."""
        return [self.stoi.get(c, self.unk) for c in text]

    def decode(self, ids) -> str:
        """The characters of ids up to </s>, special tokens left out."""
        out = []
        for i in ids:
            if i == self.eos:
                break
            if i > self.unk:
                out.append(self.itos[i])
        return "".join(out)

    def label(self, i: int) -> str:
        """Id i as a token label; a space is drawn as a visible character."""
        s = self.itos[i]
        return SPACE_LABEL if s == " " else s


def sinusoidal_positions(n: int, d: int) -> Tensor:
    """(n, d): sin on even, cos on odd dimensions, wavelengths from 2π to 10000·2π."""
    pos = torch.arange(n, dtype=torch.float32)[:, None]  # (n, 1)
    freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))  # (d/2,)
    pe = torch.zeros(n, d, dtype=torch.float32)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    return pe


class FeedForward(nn.Sequential):
    """Linear, GELU, linear."""

    def __init__(self, d: int, d_ff: int) -> None:
        super().__init__(nn.Linear(d, d_ff), nn.GELU(), nn.Linear(d_ff, d))


class EncoderLayer(nn.Module):
    """Pre-LayerNorm self-attention and feed-forward."""

    def __init__(self, c: Seq2SeqConfig, index: int = 0) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(c.d_model), nn.LayerNorm(c.d_model)
        self.self_attn = MultiHeadAttention(c.d_model, c.num_heads, layer=index)
        self.ff = FeedForward(c.d_model, c.d_ff)

    def forward(self, x: Tensor, mask: Tensor | None, hooks: Hooks | None = None) -> tuple[Tensor, Tensor]:
        """(B, S, D) -> (B, S, D) and the self-attention weights (B, H, S, S)."""
        h = self.norm1(x)
        attended, w = self.self_attn(h, h, h, mask, hooks=hooks)  # (B, S, D), (B, H, S, S)
        x = x + attended
        return x + self.ff(self.norm2(x)), w


class DecoderLayer(nn.Module):
    """Pre-LayerNorm masked self-attention, cross-attention to the encoder, feed-forward."""

    def __init__(self, c: Seq2SeqConfig, index: int = 0) -> None:
        super().__init__()
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(c.d_model) for _ in range(3))
        self.self_attn = MultiHeadAttention(c.d_model, c.num_heads, layer=index, part="decoder.")
        self.cross_attn = MultiHeadAttention(c.d_model, c.num_heads, layer=index, part="cross.")
        self.ff = FeedForward(c.d_model, c.d_ff)

    def forward(
        self, y: Tensor, memory: Tensor, self_mask: Tensor, memory_mask: Tensor | None, hooks: Hooks | None = None
    ):
        """(B, T, D) -> (B, T, D), the masked self weights (B, H, T, T) and the cross weights (B, H, T, S)."""
        h = self.norm1(y)
        attended, w_self = self.self_attn(h, h, h, self_mask, hooks=hooks)  # (B, T, D), (B, H, T, T)
        y = y + attended
        attended, w_cross = self.cross_attn(self.norm2(y), memory, memory, memory_mask, hooks=hooks)  # (B, H, T, S)
        y = y + attended
        return y + self.ff(self.norm3(y)), w_self, w_cross


class Seq2Seq(nn.Module):
    """Encoder-decoder on our own attention; every forward also returns the weights of all three kinds."""

    positions: Tensor  # (T, D) a buffer: the sinusoidal positions

    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__()
        self.config = config
        self.vocab = CharVocab(config.chars)
        self.embed = nn.Embedding(len(self.vocab), config.d_model, padding_idx=0)
        self.register_buffer(
            "positions", sinusoidal_positions(max(config.max_source, config.max_target) + 2, config.d_model)
        )
        self.encoder = nn.ModuleList(EncoderLayer(config, i) for i in range(config.encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(config, i) for i in range(config.decoder_layers))
        self.enc_norm, self.dec_norm = nn.LayerNorm(config.d_model), nn.LayerNorm(config.d_model)
        self.out = nn.Linear(config.d_model, len(self.vocab))

    def _embed(self, ids: Tensor) -> Tensor:
        # No sqrt(d_model) scaling: with N(0, 1) embeddings it would drown the positions (|pe| <= 1), and
        # a model that cannot see order copies the right digits in the wrong order (1972 -> 1922).
        return self.embed(ids) + self.positions[: ids.size(1)]  # (B, T, D)

    def encode(self, src: Tensor, hooks: Hooks | None = None) -> tuple[Tensor, Tensor, list[Tensor]]:
        """src (B, S) -> memory (B, S, D), its key mask (B, 1, 1, S), encoder weights per layer."""
        mask = key_padding_mask(src != self.vocab.pad)  # (B, 1, 1, S)
        x, weights = self._embed(src), []
        for layer in self.encoder:
            x, w = layer(x, mask, hooks)
            weights.append(w)
        return self.enc_norm(x), mask, weights

    def decode(self, tgt_in: Tensor, memory: Tensor, memory_mask: Tensor, hooks: Hooks | None = None):
        """tgt_in (B, T) -> logits (B, T, V), decoder self and cross weights per layer."""
        self_mask = causal_mask(tgt_in.size(1), device=tgt_in.device)  # (T, T)
        y, w_self, w_cross = self._embed(tgt_in), [], []
        for layer in self.decoder:
            y, ws, wc = layer(y, memory, self_mask, memory_mask, hooks)
            w_self.append(ws)
            w_cross.append(wc)
        return self.out(self.dec_norm(y)), w_self, w_cross

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """(B, S) sources, (B, T) decoder inputs -> logits (B, T, V)."""
        memory, mask, _ = self.encode(src)
        return self.decode(tgt_in, memory, mask)[0]

    @torch.no_grad()
    def greedy(self, src: Tensor, max_len: int | None = None) -> Tensor:
        """(B, S) -> (B, 1 + n) decoder inputs: <s> then the predicted characters, up to </s>."""
        max_len = max_len or self.config.max_target
        memory, mask, _ = self.encode(src)
        out = torch.full((src.size(0), 1), self.vocab.bos, dtype=torch.long, device=src.device)
        done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        for _ in range(max_len):
            nxt = self.decode(out, memory, mask)[0][:, -1].argmax(-1)  # (B,)
            nxt = nxt.masked_fill(done, self.vocab.pad)
            out = torch.cat([out, nxt[:, None]], dim=1)
            done |= nxt == self.vocab.eos
            if done.all():
                break
        return out

    def save(self, folder: Path) -> None:
        """config.json and model.pt (the sinusoidal positions are rebuilt, not saved)."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(asdict(self.config), indent=1))
        torch.save({k: v for k, v in self.state_dict().items() if k != "positions"}, folder / "model.pt")

    @classmethod
    def load(cls, folder: Path, device=None) -> Seq2Seq:
        """A saved model, in eval mode, on the device asked for."""
        model = cls(Seq2SeqConfig(**json.loads((folder / "config.json").read_text()))).float()  # not the default
        state = torch.load(folder / "model.pt", map_location="cpu", weights_only=True)
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing != ["positions"] or unexpected:
            raise ModelLoadError(
                f"The checkpoint in {folder.name}/ does not fit Seq2Seq: missing {missing}, unexpected {unexpected}. "
                "Retrain it with python -m attnviz train-dates."
            )
        return model.to(resolve_device(device)).eval()


def decoded(result: AttentionResult) -> str:
    """The text the decoder wrote, read back from a result's decoder tokens (after <s>)."""
    return "".join(result.target_tokens[1:]).replace(SPACE_LABEL, " ")


def batch_ids(vocab: CharVocab, texts: list[str], add_eos: bool = True) -> Tensor:
    """Texts -> (B, S) padded ids, each ending in </s>."""
    rows = [vocab.encode(t) + ([vocab.eos] if add_eos else []) for t in texts]
    width = max(len(r) for r in rows)
    return torch.tensor([r + [vocab.pad] * (width - len(r)) for r in rows], dtype=torch.long)


class DateEngine:
    """The shipped date model as an Engine: {"self", "causal", "cross"} for one typed date."""

    backend: Backend = "scratch"
    family = "dates"
    architecture: Architecture = "encoder-decoder"
    kinds: tuple[AttentionKind, ...] = ("self", "causal", "cross")
    lazy = False  # a few dozen characters: always every weight
    sinks = False

    def __init__(self, name: str = "dates", folder: Path = CHECKPOINT_DIR / "dates", device=None) -> None:
        self.name = name
        self.model = Seq2Seq.load(folder, device)
        self.n_layers, self.n_heads = self.model.config.decoder_layers, self.model.config.num_heads
        self.vocab = self.model.vocab
        self.device = next(self.model.parameters()).device
        self.device_name = describe_device(self.device)
        self.max_tokens = self.model.config.max_source
        self._lock = threading.Lock()

    def encode(self, text: str) -> Encoded:
        """The source side as the encoder sees it: one token per character, then </s>."""
        text = check_text(text)
        kept = text[: self.max_tokens - 1]
        ids = tuple(self.vocab.encode(kept) + [self.vocab.eos])
        n = len(kept)
        axis = TokenAxis(
            tuple(self.vocab.label(i) for i in ids),
            (False,) * n + (True,),
            tuple(range(n + 1)),
            tuple((i, i + 1) for i in range(n)) + (NO_SPAN,),
            text,
        )
        return Encoded(ids, axis, len(text) - n)

    def predict(self, texts: list[str]) -> list[str]:
        """The ISO date the model writes for each text (greedy decoding)."""
        with self._lock:
            src = batch_ids(self.vocab, [t[: self.max_tokens - 1] for t in texts]).to(self.device)
            return [self.vocab.decode(row[1:].tolist()) for row in self.model.greedy(src)]

    def _target_axis(self, tgt_in: Tensor) -> TokenAxis:
        ids = tgt_in[0].tolist()
        n = len(ids)
        special = tuple(i <= self.vocab.unk for i in ids)
        return TokenAxis(tuple(self.vocab.label(i) for i in ids), special, tuple(range(n)), (NO_SPAN,) * n)

    def run(self, enc: Encoded, target: str | None = None, progress=None) -> Results:
        """Teacher-forced over `target`, or over the model's own prediction when no target is given."""
        with self._lock, torch.inference_mode():
            src = torch.tensor([enc.ids], device=self.device)  # (1, S): the characters, then </s>
            if target is None or not target.strip():
                tgt_in = self.model.greedy(src)  # (1, 1 + n): <s> y1 .. yn (</s>)
                tgt_in = tgt_in[:, :-1] if tgt_in[0, -1] == self.vocab.eos else tgt_in
            else:
                labels = batch_ids(self.vocab, [target[: self.model.config.max_target]], add_eos=True)
                tgt_in = shift_right(labels, self.vocab.bos).to(self.device)  # (1, T): <s> y1 .. yT
            memory, mask, w_enc = self.model.encode(src)
            _, w_self, w_cross = self.model.decode(tgt_in, memory, mask)
        s, t, truncated, dev = enc.axis, self._target_axis(tgt_in), enc.truncated, self.device_name
        return Results(
            {
                "self": AttentionResult(to_weights(w_enc), s, s, "self", self.name, dev, truncated),
                "causal": AttentionResult(to_weights(w_self), t, t, "causal", self.name, dev, truncated),
                "cross": AttentionResult(to_weights(w_cross), t, s, "cross", self.name, dev, truncated),
            }
        )


def train_step(model: Seq2Seq, optimizer, src: Tensor, tgt: Tensor) -> float:
    """One teacher-forced step on (B, S) sources and (B, T) targets ending in </s>; returns the loss."""
    tgt_in = shift_right(tgt, model.vocab.bos)  # (B, T): <s> y1 .. y(T-1)
    logits = model(src, tgt_in)  # (B, T, V)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1), ignore_index=model.vocab.pad)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.item()
