"""The `corpus` command: what every head does across a corpus, written as Parquet tables (docs/corpus.md)."""

from __future__ import annotations

import argparse
import sys

from attnviz.result import head_name


def corpus_printer():
    """A (fraction, what) callback: a bar with the time left on a terminal's stderr (quiet in a pipe)."""
    import time

    if not sys.stderr.isatty():
        return None
    started = time.monotonic()
    first: list[tuple[float, float]] = []  # (fraction, time) of the first report: resumed work counts from there

    def report(fraction: float, what: str) -> None:
        now = time.monotonic()
        if not first:
            first.append((fraction, now))
        f0, t0 = first[0]
        rate = (fraction - f0) / (now - t0) if now > t0 and fraction > f0 else 0.0
        left = f"{(1 - fraction) / rate:,.0f} s left" if rate > 0 and fraction < 1 else "…"
        bar = "#" * int(fraction * 30)
        print(
            f"\rcorpus [{bar:<30}] {fraction:5.1%} {what} · {left} ({now - started:,.0f} s)   ",
            end="",
            file=sys.stderr,
            flush=True,
        )
        if fraction >= 1:
            print(file=sys.stderr)

    return report


def cmd_corpus(args: argparse.Namespace) -> int:
    """What every head does across a corpus: a run's Parquet tables (resumable)."""
    from attnviz import api
    from attnviz.result import counted

    run = api.corpus(
        args.path,
        args.model,
        args.out,
        executor=args.executor,
        text_column=args.text_column,
        window=args.window,
        device=args.device,
        actors=args.actors,
        threads=args.threads,
        progress=corpus_printer(),
        batch_mb=args.batch_mb,
        statistics=[s.strip() for s in args.statistics.split(",") if s.strip()] if args.statistics else None,
    )
    m = run.manifest
    c = m["counts"]
    skipped = sum(m["corpus"]["skipped"].values())
    print(
        f"wrote {run.folder}: {counted(c['windows'], 'window')} ({counted(c['tokens'], 'token')}) of "
        f"{counted(m['corpus']['documents'], 'document')}"
        f"{f' ({skipped:,} skipped: see manifest.json)' if skipped else ''}, "
        f"{counted(m['layers'], 'layer')} x {counted(m['heads'], 'head')}, {m['engine']}, {m['seconds']:,.1f} s"
    )
    print("tables: " + ", ".join(f"{t}.parquet" for t in ("heads", "examples", "texts", "text_stats")))
    heads = run.heads
    for stat in (s for s in ("prev", "first", "entropy") if s in m["stats"]):
        rows = heads[heads["stat"] == stat].sort_values("mean", ascending=False).head(3)
        print(
            f"highest mean {stat}: "
            + ", ".join(f"{head_name(int(r['layer']), int(r['head']))} {r['mean']:.3f}" for _, r in rows.iterrows())
        )
    return 0
