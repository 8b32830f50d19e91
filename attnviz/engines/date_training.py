"""Dates written in free form -> ISO dates: the data, the training recipe, and the checks of the shipped model.

"saturday 22 november 2026", "Nov 22, 2026", "22/11/2026", "the 3rd of march 1999" -> "2026-11-22", ...
Numeric dates are day first (22/11/2026), never month first, so every input has one answer.
Held out: every date whose ordinal is divisible by 7 never appears in training, in any format.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from dataclasses import dataclass

import torch

from attnviz.engines.base import shift_right
from attnviz.engines.seq2seq import CHECKPOINT_DIR, Seq2Seq, Seq2SeqConfig, batch_ids, train_step

MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
FIRST, LAST = dt.date(1900, 1, 1).toordinal(), dt.date(2099, 12, 31).toordinal()
CHARS = "".join(sorted(set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,./-'")))
HELD_OUT_EVERY = 7


@dataclass(frozen=True)
class Example:
    """One training or test pair, and where each field of the date lies in the source."""

    source: str
    target: str  # YYYY-MM-DD
    spans: dict[str, tuple[int, int]]  # "year" / "month" / "day" -> [start, end) character span in source


def ordinal_suffix(day: int) -> str:
    """'st', 'nd', 'rd' or 'th' for a day of the month."""
    return "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


def _parts(d: dt.date, rng: random.Random) -> list[tuple[str, str | None]]:
    """One format of date d as (text piece, field or None) pieces."""
    month = MONTHS[d.month - 1]
    mon = month[:3]
    weekday = WEEKDAYS[d.weekday()]
    day, yr = str(d.day), str(d.year)
    dd, mm = f"{d.day:02d}", f"{d.month:02d}"
    nth = day + ordinal_suffix(d.day)
    formats = [
        [(weekday, None), (" ", None), (day, "day"), (" ", None), (month, "month"), (" ", None), (yr, "year")],
        [(mon, "month"), (" ", None), (day, "day"), (", ", None), (yr, "year")],
        [(month, "month"), (" ", None), (day, "day"), (", ", None), (yr, "year")],
        [(dd, "day"), ("/", None), (mm, "month"), ("/", None), (yr, "year")],
        [(day, "day"), ("/", None), (str(d.month), "month"), ("/", None), (yr, "year")],
        [(dd, "day"), (".", None), (mm, "month"), (".", None), (yr, "year")],
        [(dd, "day"), ("-", None), (mm, "month"), ("-", None), (yr, "year")],
        [("the ", None), (nth, "day"), (" of ", None), (month, "month"), (" ", None), (yr, "year")],
        [(nth, "day"), (" ", None), (month, "month"), (" ", None), (yr, "year")],
        [(month, "month"), (" ", None), (nth, "day"), (", ", None), (yr, "year")],
        [(day, "day"), (" ", None), (mon, "month"), (" ", None), (yr, "year")],
        [(day, "day"), (" ", None), (month, "month"), (" ", None), (yr, "year")],
        [(weekday, None), (", ", None), (month, "month"), (" ", None), (day, "day"), (", ", None), (yr, "year")],
        [(weekday[:3], None), (" ", None), (dd, "day"), (" ", None), (mon, "month"), (" ", None), (yr, "year")],
        [(yr, "year"), ("/", None), (mm, "month"), ("/", None), (dd, "day")],
        [(mon, "month"), (" ", None), (dd, "day"), (" '", None), (yr, "year")],
    ]
    return rng.choice(formats)


def make_example(d: dt.date, rng: random.Random) -> Example:
    """Date d written in a random format and letter case, with its ISO answer."""
    case = rng.choice([str.lower, str.lower, str.title, str.upper, lambda s: s.capitalize()])
    text, spans = "", {}
    for piece, field in _parts(d, rng):
        if field:
            spans[field] = (len(text), len(text) + len(piece))
        text += piece
    return Example(case(text), d.isoformat(), spans)


def sample(rng: random.Random, n: int, held_out: bool) -> list[Example]:
    """n examples from the training dates (held_out=False) or the held-out dates."""
    out: list[Example] = []
    while len(out) < n:
        o = rng.randint(FIRST, LAST)
        if (o % HELD_OUT_EVERY == 0) == held_out:
            out.append(make_example(dt.date.fromordinal(o), rng))
    return out


@dataclass(frozen=True)
class DateRecipe:
    """The training recipe of the shipped model."""

    steps: int = 1200
    batch: int = 128
    lr: float = 2e-3
    warmup: int = 100
    seed: int = 0


def train(recipe: DateRecipe = DateRecipe(), config: Seq2SeqConfig | None = None, device=None, log=print) -> Seq2Seq:
    """Train a date model from scratch; a linear warm-up then cosine decay of the learning rate."""
    torch.manual_seed(recipe.seed)
    rng = random.Random(recipe.seed)
    model = Seq2Seq(config or Seq2SeqConfig(chars=CHARS)).to(device or "cpu").train()
    dev = next(model.parameters()).device
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=0.01)

    sched = warmup_cosine(opt, recipe.warmup, recipe.steps)
    start = time.perf_counter()
    for step in range(recipe.steps):
        batch = sample(rng, recipe.batch, held_out=False)
        src = batch_ids(model.vocab, [e.source for e in batch]).to(dev)
        tgt = batch_ids(model.vocab, [e.target for e in batch]).to(dev)
        loss = train_step(model, opt, src, tgt)
        sched.step()
        if step % 200 == 0 or step == recipe.steps - 1:
            log(f"step {step:5d}  loss {loss:.4f}  {time.perf_counter() - start:6.1f} s")
    return model.eval()


@dataclass(frozen=True)
class Evaluation:
    """Held-out accuracy and cross-attention alignment of a date model."""

    n: int
    exact: float  # share of held-out inputs whose whole output is right
    alignment: dict[
        str, tuple[float, int]
    ]  # field -> (mean cross-attention mass on its source span, best head 0-based)


OUTPUT_FIELDS = {"year": range(0, 4), "month": range(5, 7), "day": range(8, 10)}  # character positions in YYYY-MM-DD


@torch.no_grad()
def evaluate_dates(model: Seq2Seq, n: int = 1000, seed: int = 12345) -> Evaluation:
    """Exact match on n held-out dates, and how well the last decoder layer's cross-attention aligns."""
    examples = sample(random.Random(seed), n, held_out=True)
    dev = next(model.parameters()).device
    src = batch_ids(model.vocab, [e.source for e in examples]).to(dev)
    out = model.greedy(src)
    exact = sum(model.vocab.decode(row[1:].tolist()) == e.target for row, e in zip(out, examples, strict=True)) / n
    # Teacher-forced over the right answers: row j of the decoder (input <s> y1..) is the query writing y(j+1).
    tgt = batch_ids(model.vocab, [e.target for e in examples], add_eos=True).to(dev)  # (N, 11): 10 characters, </s>
    tgt_in = shift_right(tgt, model.vocab.bos)  # (N, 11): <s> and the 10 characters
    memory, mask, _ = model.encode(src)
    cross = model.decode(tgt_in, memory, mask)[2][-1]  # (N, H, 11, S), last decoder layer
    alignment = {}
    for field, positions in OUTPUT_FIELDS.items():
        on_span = torch.zeros(n, cross.size(1), dtype=torch.float32)  # (N, H)
        for i, e in enumerate(examples):
            a, b = e.spans[field]
            on_span[i] = cross[i, :, list(positions), a:b].sum(-1).mean(-1).cpu()
        per_head = on_span.mean(0)  # (H,)
        alignment[field] = (per_head.max().item(), int(per_head.argmax()))
    return Evaluation(n, exact, alignment)


def main(steps: int | None = None, out=CHECKPOINT_DIR / "dates") -> int:
    """Train, evaluate, save; prints as it goes."""
    recipe = DateRecipe() if steps is None else DateRecipe(steps=steps)
    print(f"training the date model: {recipe}")
    model = train(recipe)
    ev = evaluate_dates(model)
    print(f"held-out exact match: {ev.exact:.2%} of {ev.n}")
    for field, (mass, head) in ev.alignment.items():
        print(f"cross-attention on the source's {field}: {mass:.2f} (best head of the last decoder layer: {head + 1})")
    model.save(out)
    print(f"saved {out}")
    return 0


def warmup_cosine(optimizer, warmup: int, steps: int):
    """The learning-rate schedule both shipped recipes use: linear warm-up over `warmup` steps, then a cosine
    decay to 0 at `steps`."""
    import math

    import torch

    def factor(step: int) -> float:
        return min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * step / steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
