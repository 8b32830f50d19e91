"""Benchmark: a corpus run's speed and memory, beside the floor and the script a user would write today.

On the same texts (the built-in corpus cut into pieces of at most 128 tokens with the model's own tokenizer, about
128 once re-tokenized alone; past the pieces there are, the list starts again), for each model:
- floor: the model's bare forward passes over the same padded sub-batches as the run, with PyTorch's fused
  attention (`attn_implementation="sdpa"`), no weights kept: what no attention statistic can beat;
- script: Hugging Face eager with `output_attentions=True`, one text at a time, every statistic in vectorised numpy
  over (layers, heads, N, N) at once, no Python loop over heads; its per-text statistics are checked against the
  run's (max abs difference printed; the target is 1e-5);
- embedded: `attnviz.corpus` in the process (`corpus.run.run` on the engine `attnviz corpus` uses: BERT rebuilt on
  attnviz's attention, SmolLM2 on Hugging Face with attnviz's attention function; loaded before the clock starts);
- ray: the same run through Ray Data with two single-thread actors (the clock includes starting Ray and loading
  the model in each actor).
Each configuration runs in its own process; its peak memory is the largest sum, sampled every 0.1 s, of the
proportional set size (PSS: a page shared by n processes counts 1/n in each) of that process and every process it
started (Ray's). Texts per second counts the texts over the clock's seconds. Torch uses its default threads (2
here) except in Ray's actors (1 each).

Usage: python bench/corpus.py [--models default,smollm2] [--texts 1000] [--runs 3] [--memory 4000]
                              [--statistics entropy]
(--memory N: the embedded run's peak memory at N texts as well, for the flatness check. --statistics: the script
and the runs compute only these, `attnviz.corpus(..., statistics=[...])`; the floor is the same.)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONFIGS = ("floor", "script", "embedded", "ray")
PIECE = 128
CHECKED = 50  # texts whose script statistics are compared with the run's


def texts_for(eng, n: int) -> list[str]:
    """n texts of at most PIECE tokens: the built-in corpus cut with the model's tokenizer, cycled."""
    from attnviz.corpus import readers

    big = " ".join(t for _, t in readers.builtin().documents)
    pieces = eng.tokenizer.cut(big, PIECE)
    return [pieces[i % len(pieces)] for i in range(n)]


def _folder(eng) -> str:
    from attnviz.engines import registry, smollm2

    return str(smollm2.converted()) if eng.name == "smollm2" else registry.resolve(eng.name).location


def _script_stats(weights, axis, names, excludes_end: bool = True):
    """A user's statistics `names` of one text, numpy over (L, H, N, N) at once: attnviz's definitions written again
    (only those asked are computed)."""
    import numpy as np

    from attnviz.blocks import is_punctuation

    w = weights  # (L, H, N, N) float32
    n = w.shape[-1]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    special = np.array(axis.special)

    def entropy():
        with np.errstate(divide="ignore", invalid="ignore"):
            return -np.where(w > 0, w * np.log(np.where(w > 0, w, 1)), 0).sum(-1).mean(-1)

    def punct():
        marks = np.array([not axis.special[t] and is_punctuation(axis.surface(t)) for t in range(n)])
        return w[..., marks].sum(-1).mean(-1)

    ways = {
        "entropy": entropy,
        "distance": lambda: (w * np.abs(i - j)).sum(-1).mean(-1),
        "cls": lambda: w[..., 0].mean(-1) if special[0] else np.zeros(w.shape[:2]),
        "sep": lambda: w[..., (special & (np.arange(n) > 0))].sum(-1).mean(-1),
        "punct": punct,
        "prev": lambda: np.diagonal(w, -1, -2, -1).sum(-1) / max(1, n - 1),
        "next": lambda: np.diagonal(w, 1, -2, -1).sum(-1) / max(1, n - 1),
        "self": lambda: np.diagonal(w, 0, -2, -1).mean(-1),
        "confidence": lambda: (w[..., :-1] if excludes_end and special[-1] else w).max(-1).mean(-1),
        "first": lambda: w[..., 0].mean(-1),
    }
    return {name: ways[name]() for name in names}


def one(config: str, model: str, texts_file: Path, result: Path, names: tuple[str, ...]) -> None:
    """One configuration, in this process, computing the statistics `names`: writes {"seconds", "texts", ...} to
    `result`."""
    import numpy as np
    import torch

    from attnviz.corpus import measure, readers
    from attnviz.corpus import run as corpus_run
    from attnviz.engines import registry

    torch.set_grad_enabled(False)
    texts = json.loads(texts_file.read_text())
    eng = registry.load(model, "hf", "cpu") if config != "ray" else None  # Ray's actors load their own
    out: dict = {"config": config, "model": model, "texts": len(texts)}
    if config == "floor":
        from transformers import AutoModel

        base = AutoModel.from_pretrained(_folder(eng), attn_implementation="sdpa", dtype=torch.float32).eval()
        start = time.perf_counter()
        encs = [eng.tokenizer.encode(t, measure.Settings().window) for t in texts]  # as the run encodes them
        for group in measure.sub_batches(encs, eng.n_layers, eng.n_heads, measure.Settings().batch_mb):
            ids = [encs[i].ids for i in group]
            longest = max(len(x) for x in ids)
            batch = torch.tensor([list(x) + [0] * (longest - len(x)) for x in ids])
            mask = torch.tensor([[1] * len(x) + [0] * (longest - len(x)) for x in ids])
            base(input_ids=batch, attention_mask=mask)
        out["seconds"] = time.perf_counter() - start
    elif config == "script":
        from transformers import AutoModel

        base = AutoModel.from_pretrained(_folder(eng), attn_implementation="eager", dtype=torch.float32).eval()
        start = time.perf_counter()
        kept = []
        for k, text in enumerate(texts):
            enc = eng.tokenizer.encode(text, measure.Settings().window)  # as the run encodes them
            att = base(input_ids=torch.tensor([enc.ids]), output_attentions=True).attentions
            w = np.stack([a[0].numpy() for a in att])  # (L, H, N, N)
            stats = _script_stats(w, enc.axis, names)
            if k < CHECKED:
                kept.append(np.stack([stats[s] for s in names]))
        out["seconds"] = time.perf_counter() - start
        np.save(result.with_suffix(".npy"), np.stack(kept))
    else:
        from attnviz.corpus.models import corpus_engine

        eng = corpus_engine(eng) if eng is not None else None  # what `attnviz corpus` measures with
        folder = Path(tempfile.mkdtemp(prefix="attnviz-bench-")) / "run"
        corpus = readers.from_texts(texts)
        start = time.perf_counter()
        run = corpus_run.run(
            corpus,
            model,
            folder,
            executor="embedded" if config == "embedded" else "ray",
            actors=2,
            threads=1,
            engine_of=(lambda: eng) if eng else None,
            extras=False,
            settings=measure.Settings(statistics=names),
        )
        out["seconds"] = time.perf_counter() - start
        out["folder"] = str(run.folder)
        out["windows"] = run.manifest["counts"]["windows"]
    result.write_text(json.dumps(out))


def _tree_pss(root: int) -> int:
    """The PSS (bytes) of a process and all its descendants, read from /proc."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
        except OSError:
            continue
    return total


def measured(config: str, model: str, texts_file: Path, names: tuple[str, ...]) -> dict:
    """One configuration in a fresh process, with its peak memory."""
    result = Path(tempfile.mkdtemp(prefix="attnviz-bench-")) / "result.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--one",
            config,
            "--model",
            model,
            "--texts-file",
            str(texts_file),
            "--result",
            str(result),
            "--statistics",
            ",".join(names),
        ],
        cwd=ROOT,
    )
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_pss(proc.pid))
        time.sleep(0.1)
    if proc.returncode != 0:
        raise SystemExit(f"{config} on {model} failed (exit {proc.returncode})")
    out = json.loads(result.read_text())
    out["peak_mb"] = peak / 2**20
    if config == "script":
        out["script_stats"] = str(result.with_suffix(".npy"))
    return out


def compare(script: dict, run: dict, names: tuple[str, ...]) -> dict[str, float]:
    """Max abs difference between the script's per-text statistics and the run's, on the first CHECKED texts, per
    statistic."""
    import numpy as np
    import pandas as pd

    stats = names

    theirs = np.load(script["script_stats"])  # (T, S, L, H)
    ts = pd.read_parquet(Path(run["folder"]) / "text_stats.parquet")
    ts = ts[ts["doc"] < len(theirs)].sort_values(["doc", "window", "layer", "head"])
    if (ts["window"] > 0).any():
        raise SystemExit("a benchmark text was cut into windows: the pieces must fit one window")
    ours = np.stack([ts[s].to_numpy() for s in stats], 1).reshape(len(theirs), -1, len(stats))  # (T, L*H, S)
    theirs = theirs.reshape(len(theirs), len(stats), -1).transpose(0, 2, 1)
    return {s: float(np.abs(ours[..., i] - theirs[..., i]).max()) for i, s in enumerate(stats)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="default,smollm2")
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--memory", type=int, default=0, help="also the embedded run's peak memory at this many texts")
    parser.add_argument("--statistics", default=None, help="compute only these (comma-separated; default: every one)")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--model", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--texts-file", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    from attnviz.corpus.measure import Settings

    names = Settings(statistics=args.statistics.split(",") if args.statistics else Settings().statistics).statistics
    if args.one:
        one(args.one, args.model, Path(args.texts_file), Path(args.result), names)
        return 0
    import torch
    from long_inputs import gflops

    from attnviz.engines import registry

    print(
        f"# torch {torch.__version__}, {os.cpu_count()} cores, {torch.get_num_threads()} threads; float32 matrix "
        f"speed {gflops('cpu'):,.0f} GFLOP/s; {args.texts} texts of at most {PIECE} tokens; statistics: "
        f"{', '.join(names)}"
    )
    configs = args.configs.split(",")
    for model in args.models.split(","):
        eng = registry.load(model, "hf", "cpu")
        files = {}
        for n in {args.texts, args.memory} - {0}:
            files[n] = Path(tempfile.mkdtemp(prefix="attnviz-bench-")) / f"texts-{n}.json"
            files[n].write_text(json.dumps(texts_for(eng, n)))
        del eng
        for r in range(1, args.runs + 1):
            rows = {c: measured(c, model, files[args.texts], names) for c in configs}
            diff = compare(rows["script"], rows["embedded"], names) if {"script", "embedded"} <= set(rows) else {}
            print(f"\n## {model}, run {r} of {args.runs} (windows: {rows.get('embedded', {}).get('windows')})")
            print("| config | seconds | texts/s | peak MB | vs floor |")
            print("|---|---:|---:|---:|---:|")
            floor = rows.get("floor", {}).get("seconds")
            for c, row in rows.items():
                ratio = f"{row['seconds'] / floor:.2f}x" if floor else "-"
                print(
                    f"| {c} | {row['seconds']:.1f} | {row['texts'] / row['seconds']:.1f} | {row['peak_mb']:,.0f} "
                    f"| {ratio} |"
                )
            if "script" in rows and "embedded" in rows:
                worst = ", ".join(f"{k} {v:.1e}" for k, v in diff.items())
                print(
                    f"embedded vs script: {rows['script']['seconds'] / rows['embedded']['seconds']:.2f}x faster; "
                    f"max abs difference of the first {CHECKED} texts' statistics: {worst}"
                )
            sys.stdout.flush()
        if args.memory:
            big = measured("embedded", model, files[args.memory], names)
            small = measured("embedded", model, files[args.texts], names)
            print(
                f"\n{model}: embedded peak memory {small['peak_mb']:,.0f} MB at {args.texts} texts, "
                f"{big['peak_mb']:,.0f} MB at {args.memory} ({big['peak_mb'] / small['peak_mb'] - 1:+.1%})"
            )
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
