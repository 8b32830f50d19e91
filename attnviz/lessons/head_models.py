"""One head vs many: tiny encoders with 1, 2, 4 and 8 heads at the same d_model, trained on one task.

Two tasks, each made to need attention (the course's ablation: "train with 1 vs 8 heads, compare performance on a
copy task"). The input is LENGTH digits x_0 … x_{LENGTH-1}:
- **reversal**: the answer at position i is x_{LENGTH-1-i}. Each position finds one other position by where it is.
- **mirror-sum**: the answer at position i is (x_{i-1} + x_{LENGTH-1-i}) mod 10 (x_{-1} = 0). Each position needs
  two other positions at once, its previous token and its mirror: work for two heads.

Every model: digit embedding + sinusoidal positions (lessons.encodings) -> LAYERS blocks of our from-scratch
MultiHeadAttention (post-norm, ReLU feed-forward) -> a digit at every position. Same d_model, same seed, same
batches, same steps; only the head count changes, so d_k = d_model / heads shrinks as heads grow.

Held out: a fixed set of sequences (seeded) that training batches never contain (checked sequence by sequence).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnviz.engines.date_training import warmup_cosine
from attnviz.engines.scratch import MultiHeadAttention, resolve_device
from attnviz.engines.seq2seq import CHECKPOINT_DIR
from attnviz.lessons.encodings import sinusoidal

FOLDER = CHECKPOINT_DIR / "heads"
TASKS = ("reversal", "mirror-sum")
HEAD_COUNTS = (1, 2, 4, 8)
VOCAB = 10  # digits 0-9
LENGTH = 12
HELD_OUT_SEED, HELD_OUT_N = 2026, 2000


@dataclass(frozen=True)
class TinyConfig:
    """The sizes of one head-count model."""

    heads: int
    d_model: int = 32
    layers: int = 1
    d_ff: int = 64
    vocab: int = VOCAB
    length: int = LENGTH


@dataclass(frozen=True)
class HeadRecipe:
    """How every head-count model is trained (the same for all)."""

    steps: int = 1500
    batch: int = 64
    lr: float = 3e-3
    warmup: int = 50
    seed: int = 0
    eval_every: int = 50


class Block(nn.Module):
    """Attention then feed-forward, each added back and normed (the original transformer's order)."""

    def __init__(self, c: TinyConfig) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(c.d_model, c.heads)
        self.norm1, self.norm2 = nn.LayerNorm(c.d_model), nn.LayerNorm(c.d_model)
        self.ffn = nn.Sequential(nn.Linear(c.d_model, c.d_ff), nn.ReLU(), nn.Linear(c.d_ff, c.d_model))

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """x (B, T, D) -> (the block's output (B, T, D), its attention weights (B, H, T, T))."""
        a, w = self.attention(x, x, x)  # (B, T, D), (B, H, T, T)
        x = self.norm1(x + a)
        return self.norm2(x + self.ffn(x)), w


class TinyEncoder(nn.Module):
    """Digits -> a digit at every position, through `layers` attention blocks of `heads` heads."""

    positions: Tensor  # (T, D) a buffer: the sinusoidal positions

    def __init__(self, config: TinyConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab, config.d_model)
        self.register_buffer("positions", sinusoidal(config.length, config.d_model), persistent=False)  # (T, D)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.out = nn.Linear(config.d_model, config.vocab)

    def forward(self, ids: Tensor) -> tuple[Tensor, list[Tensor]]:
        """ids (B, T) -> (logits (B, T, vocab), each layer's weights (B, H, T, T))."""
        x = self.embed(ids) + self.positions[: ids.shape[1]]  # (B, T, D)
        weights = []
        for block in self.blocks:
            x, w = block(x)
            weights.append(w)
        return self.out(x), weights

    def save(self, folder: Path, name: str) -> None:
        """name.json (the config) and name.pt (the weights; the sinusoidal positions are rebuilt)."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.json").write_text(json.dumps(asdict(self.config), indent=1))
        torch.save(self.state_dict(), folder / f"{name}.pt")

    @classmethod
    def load(cls, folder: Path, name: str, device=None) -> TinyEncoder:
        """A saved model in eval mode."""
        model = cls(TinyConfig(**json.loads((folder / f"{name}.json").read_text())))
        model.load_state_dict(torch.load(folder / f"{name}.pt", map_location="cpu", weights_only=True))
        return model.to(resolve_device(device)).eval()


def answer(ids: Tensor, task: str) -> Tensor:
    """(B, T) -> (B, T): the task's right answer for each sequence."""
    if task == "reversal":
        return ids.flip(-1)
    if task == "mirror-sum":
        previous = torch.cat([torch.zeros_like(ids[:, :1]), ids[:, :-1]], dim=1)  # (B, T): x_{i-1}, 0 first
        return (previous + ids.flip(-1)) % VOCAB
    raise ValueError(f"unknown task {task!r}: choose one of {', '.join(TASKS)}")


def recipe_for(task: str) -> HeadRecipe:
    """The shipped recipe: reversal is learnt in a few hundred steps, mirror-sum needs more."""
    return HeadRecipe(steps=1000 if task == "reversal" else 3000)


def held_out() -> Tensor:
    """(HELD_OUT_N, LENGTH): the fixed evaluation sequences, distinct, never in training."""
    gen = torch.Generator().manual_seed(HELD_OUT_SEED)
    seqs = torch.randint(0, VOCAB, (HELD_OUT_N * 2, LENGTH), generator=gen)
    return torch.unique(seqs, dim=0)[:HELD_OUT_N]


def training_batch(gen: torch.Generator, n: int, excluded: set[tuple[int, ...]]) -> Tensor:
    """(n, LENGTH) random sequences, none of them in `excluded`."""
    rows: list[list[int]] = []
    while len(rows) < n:
        for row in torch.randint(0, VOCAB, (n, LENGTH), generator=gen).tolist():
            if tuple(row) not in excluded and len(rows) < n:
                rows.append(row)
    return torch.tensor(rows)


@torch.no_grad()
def accuracy(model: TinyEncoder, seqs: Tensor, task: str) -> tuple[float, float, float]:
    """(digit accuracy, whole-sequence accuracy, mean cross-entropy) of the model on seqs."""
    dev = next(model.parameters()).device
    was_training = model.training
    model.eval()
    logits, _ = model(seqs.to(dev))
    target = answer(seqs, task).to(dev)
    pred = logits.argmax(-1)
    loss = F.cross_entropy(logits.flatten(0, 1), target.flatten()).item()
    model.train(was_training)
    return (pred == target).float().mean().item(), (pred == target).all(-1).float().mean().item(), loss


@dataclass
class Curve:
    """A model's training record: loss on each training batch logged, held-out accuracy every eval_every steps."""

    heads: int
    steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    held_out_accuracy: list[float] = field(default_factory=list)
    held_out_loss: list[float] = field(default_factory=list)
    seconds: float = 0.0


def train_one(heads: int, task: str, recipe: HeadRecipe, device=None, log=print) -> tuple[TinyEncoder, Curve]:
    """Train one head-count model; every model sees the same batches in the same order."""
    torch.manual_seed(recipe.seed)
    model = TinyEncoder(TinyConfig(heads=heads)).to(resolve_device(device)).train()
    dev = next(model.parameters()).device
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=0.01)
    sched = warmup_cosine(opt, recipe.warmup, recipe.steps)
    test = held_out()
    excluded = {tuple(r) for r in test.tolist()}
    gen = torch.Generator().manual_seed(recipe.seed)
    curve, start = Curve(heads), time.perf_counter()
    for step in range(1, recipe.steps + 1):
        ids = training_batch(gen, recipe.batch, excluded).to(dev)
        logits, _ = model(ids)
        loss = F.cross_entropy(logits.flatten(0, 1), answer(ids, task).flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if step % recipe.eval_every == 0 or step == 1:
            acc, _, held_loss = accuracy(model, test, task)
            curve.steps.append(step)
            curve.train_loss.append(round(loss.item(), 5))
            curve.held_out_accuracy.append(round(acc, 5))
            curve.held_out_loss.append(round(held_loss, 5))
            if step % (recipe.eval_every * 10) == 0:
                log(f"  {heads} heads, step {step:5d}: loss {loss.item():.4f}, held-out digit accuracy {acc:.2%}")
    curve.seconds = round(time.perf_counter() - start, 1)
    return model.eval(), curve


def name(heads: int) -> str:
    """The checkpoint's file stem for a head count."""
    return f"heads{heads}"


def train_all(task: str, recipe: HeadRecipe, out: Path, head_counts=HEAD_COUNTS, log=print) -> dict:
    """Train every head count on a task, save each model and the curves (out/curves.json); the summary."""
    models: list[dict] = []
    summary = {"task": task, "length": LENGTH, "vocab": VOCAB, "recipe": asdict(recipe), "models": models}
    for heads in head_counts:
        log(f"{task}: training {heads} head(s), d_model {TinyConfig(heads).d_model}, {recipe.steps} steps")
        model, curve = train_one(heads, task, recipe, device="cpu", log=log)
        model.save(out, name(heads))
        acc, exact, loss = accuracy(model, held_out(), task)
        log(f"  {heads} heads: held-out digit accuracy {acc:.2%}, whole sequences {exact:.2%} ({curve.seconds} s)")
        models.append(
            {
                "heads": heads,
                "accuracy": round(acc, 5),
                "sequence_accuracy": round(exact, 5),
                "held_out_loss": round(loss, 5),
                "steps": recipe.steps,
                "curve": asdict(curve),
            }
        )
    (out / "curves.json").write_text(json.dumps(summary, indent=1))
    return summary


def shipped(task: str) -> dict:
    """What the shipped checkpoints' training recorded (curves.json)."""
    return json.loads((folder_of(task) / "curves.json").read_text())


def folder_of(task: str, root: Path = FOLDER) -> Path:
    """Where a task's checkpoints live."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}: choose one of {', '.join(TASKS)}")
    return root / task


def held_out_accuracy(task: str, root: Path = FOLDER, device=None) -> dict:
    """{"task", "held_out", "models": [{"heads", "accuracy", "sequence_accuracy", "steps"}]}: the saved models on
    the held-out set, recomputed now (not read from curves.json)."""
    folder = folder_of(task, root)
    record = {m["heads"]: m for m in json.loads((folder / "curves.json").read_text())["models"]}
    models = []
    for heads in sorted(record):
        acc, exact, _ = accuracy(TinyEncoder.load(folder, name(heads), device), held_out(), task)
        models.append(
            {
                "heads": heads,
                "accuracy": round(acc, 5),
                "sequence_accuracy": round(exact, 5),
                "steps": record[heads]["steps"],
            }
        )
    return {"task": task, "held_out": HELD_OUT_N, "models": models}


@torch.no_grad()
def attention_on(model: TinyEncoder, digits: str) -> tuple[Tensor, Tensor]:
    """A typed digit string (LENGTH digits) -> (the model's answer (T,), each layer's weights (layers, H, T, T))."""
    ids = parse_digits(digits)[None]  # (1, T)
    logits, weights = model(ids.to(next(model.parameters()).device))
    return logits[0].argmax(-1).cpu(), torch.stack([w[0] for w in weights]).float().cpu()


def lookup_shares(weights: Tensor) -> dict[str, Tensor]:
    """(..., H, T, T) weights -> {"mirror", "previous", "self"}: each head's mean share of attention on the
    position the answer needs (query i's mirror T-1-i; its previous token i-1, from i = 1) and on itself."""
    t = weights.shape[-1]
    i = torch.arange(t)
    return {
        "mirror": weights[..., i, t - 1 - i].mean(-1),
        "previous": weights[..., i[1:], i[1:] - 1].mean(-1),
        "self": weights[..., i, i].mean(-1),
    }


def parse_digits(text: str) -> Tensor:
    """'3 1 4 1 5 9 2 6 5 3 5 8' or '314159265358' -> (LENGTH,) digits; a ValueError that says what is wrong."""
    digits = [c for c in text if not c.isspace() and c != ","]
    if any(c not in "0123456789" for c in digits):
        raise ValueError("type digits 0-9 only (spaces and commas are ignored)")
    if len(digits) != LENGTH:
        raise ValueError(f"type exactly {LENGTH} digits, not {len(digits)}: the models were trained on {LENGTH}")
    return torch.tensor([int(c) for c in digits])


def sample_digits(seed: int = 7) -> str:
    """A held-out sequence as a string, for a default the models never trained on."""
    row = held_out()[seed % HELD_OUT_N]
    return "".join(map(str, row.tolist()))


def main(tasks=TASKS, steps: int | None = None, root: Path = FOLDER) -> int:
    """Train every head count on each task and save; prints as it goes."""
    for task in tasks:
        recipe = recipe_for(task) if steps is None else HeadRecipe(steps=steps)
        print(f"task: {task} of {LENGTH} digits; {recipe}")
        summary = train_all(task, recipe, folder_of(task, root))
        for m in summary["models"]:
            print(
                f"{task}, {m['heads']} heads: held-out digit accuracy {m['accuracy']:.2%}, "
                f"sequences {m['sequence_accuracy']:.2%}"
            )
        print(f"saved {folder_of(task, root)}")
    return 0
