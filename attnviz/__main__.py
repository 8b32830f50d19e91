"""The command line: python -m attnviz attention TEXT [--model NAME] [--backend hf|scratch] ..."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

from attnviz.engines.base import BACKENDS, Engine, ModelLoadError
from attnviz.result import head_name

BAD_INPUT = 2


def write_json(path: str | None, payload: dict) -> None:
    """Write the --json file, if one was asked for, and say so."""
    if path:
        Path(path).write_text(json.dumps(payload))
        print(f"wrote {path}")


def result_json(engine: Engine, results: dict, rows: list[int] | None = None) -> dict:
    """The --json layout: model, backend, device, truncated, and per kind its tokens and weights.

    With `rows` (0-based query indices), each kind's weights are only those rows, (L, H, len(rows), Tk), exact,
    and "rows" says which; a long text's LazyAttention computes just them.
    """
    first = results.main
    out = {}
    for kind, r in results.items():
        weights = r.weights if rows is None else r.rows(rows)  # a long text's rows: computed just for them
        out[kind] = {
            "kind": kind,
            "target_tokens": list(r.target_tokens),
            "source_tokens": list(r.source_tokens),
            "target_pieces": list(r.target.pieces),  # the tokenizer's raw pieces ("Ġanimal"); the tokens as text
            "source_pieces": list(r.source.pieces),
            "weights": weights.tolist(),
        }
        if rows is not None:
            out[kind]["rows"] = list(rows)
    return {
        "model": engine.name,
        "backend": engine.backend,
        "device": first.device,
        "truncated": first.truncated,
        "results": out,
    }


def read_text(args: argparse.Namespace) -> str:
    """The text to read: the argument, or the file given with --file (UTF-8); exactly one of them."""
    from attnviz.tokens import check_text

    if (args.text is None) == (args.file is None):
        raise ValueError("give the text either as an argument or with --file PATH (one of them)")
    if args.file is None:
        return check_text(args.text)
    path = Path(args.file)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ValueError(f"cannot read {args.file}: {err.strerror or err}") from err
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"{args.file} is not UTF-8 text") from err
    return check_text(text)


def parse_rows(raw: str | None) -> list[int] | None:
    """--rows "0,5,17" -> [0, 5, 17] (0-based query indices)."""
    if raw is None:
        return None
    try:
        rows = [int(part) for part in raw.split(",") if part.strip()]
    except ValueError as err:
        raise ValueError(f"--rows takes 0-based token indices separated by commas, like 0,5,17 (got {raw!r})") from err
    if not rows or min(rows) < 0:
        raise ValueError(f"--rows takes 0-based token indices separated by commas, like 0,5,17 (got {raw!r})")
    return rows


def progress_printer(what: str):
    """A (done, total) callback that shows progress on a terminal's stderr (and stays quiet in a pipe)."""
    if not sys.stderr.isatty():
        return None

    def report(done: int, total: int) -> None:
        print(f"\r{what}: layer {done}/{total}", end="\n" if done == total else "", file=sys.stderr, flush=True)

    return report


class TerminalPhases:
    """A request's progress on a terminal (service.Phases): one line per phase, quiet in a pipe."""

    def phase(self, name: str):
        """The (done, total) callback of one phase."""
        return progress_printer(name)


def cmd_attention(args: argparse.Namespace) -> int:
    """Per-head attention of one text, printed and optionally written as JSON (all of it, or chosen rows)."""
    from attnviz import api

    text = read_text(args)  # fail in milliseconds, before a model loads
    rows = parse_rows(args.rows)
    asked = api.prepare(args.model, args.backend, text, args.target, device=args.device)  # the door: resolved once
    engine = asked.engine
    n = len(engine.encode(text).ids)
    if rows is not None and max(rows) >= n:
        raise ValueError(f"--rows goes up to {max(rows)}, but the text is {n} tokens (indices 0 to {n - 1})")
    if args.json and rows is None and asked.long:
        gb = 4 * engine.n_layers * engine.n_heads * n * n / 2**30
        raise ValueError(
            f"the text is {n:,} tokens: every weight would be {gb:.1f} GB of JSON numbers. Write chosen query rows "
            "with --rows I,J,... (exact), or per-head statistics with the stats command"
        )
    results = asked.results(TerminalPhases())
    how = " (kept as queries and keys: weights computed on demand)" if results.lazy else ""
    for kind, r in results.items():
        print(
            f"{kind}: {r.n_layers} layers x {r.n_heads} heads, "
            f"{len(r.target_tokens)} x {len(r.source_tokens)} tokens{how}"
        )
    first = results.main
    print(f"model {engine.name} ({engine.backend}) on {first.device}")
    if first.truncated:
        print(f"note: the text was cut to {engine.max_tokens} tokens; {first.truncated} tokens were dropped")
    write_json(args.json, result_json(engine, results, rows))
    return 0


DOCTOR_TEXT = "The animal didn't cross the street because it was too tired."
DOCTOR_TOLERANCE = 1e-4


def offline_models() -> list[str]:
    """The bundled model and every model in the local Hugging Face cache."""
    from attnviz.engines import registry

    names = [f"default  ({registry.default_model_dir()})"]
    try:
        from huggingface_hub import scan_cache_dir

        names += sorted(r.repo_id for r in scan_cache_dir().repos if r.repo_type == "model")
    except Exception:  # no cache folder yet: nothing else is available offline
        pass
    return names


def cmd_doctor(args: argparse.Namespace) -> int:
    """What this machine has, and one attention pass on the chosen device checked against the CPU."""
    import platform

    import streamlit
    import torch
    import transformers

    from attnviz.engines import registry
    from attnviz.engines.scratch import describe_device, resolve_device

    device = resolve_device(args.device)
    print(f"python        {platform.python_version()} ({platform.machine()})")
    print(f"torch         {torch.__version__} (CUDA build: {torch.version.cuda or 'none'})")
    cuda = torch.cuda.is_available()
    print(f"CUDA          {'available: ' + torch.cuda.get_device_name(0) if cuda else 'not available'}")
    print(f"transformers  {transformers.__version__}")
    print(f"streamlit     {streamlit.__version__}")
    print("models offline:")
    for name in offline_models():
        print(f"  {name}")
    scratch = registry.load("default", "scratch", device).run(DOCTOR_TEXT)["self"]
    reference = registry.load("default", "hf", "cpu").run(DOCTOR_TEXT)["self"]
    diff = (scratch.weights - reference.weights).abs().max().item()
    verdict = "ok" if diff <= DOCTOR_TOLERANCE else "MISMATCH"
    print(
        f"attention     scratch engine on {describe_device(device)} vs Hugging Face on cpu, "
        f"{scratch.n_layers}x{scratch.n_heads} heads, {len(scratch.target_tokens)} tokens: "
        f"max |diff| = {diff:.2e} ({verdict}, tolerance {DOCTOR_TOLERANCE:g})"
    )
    return 0 if diff <= DOCTOR_TOLERANCE else 1


def _self_result(args: argparse.Namespace, *, eager_only: str = ""):
    """The engine and the self (or causal) attention of the text, for stats and rollout.

    eager_only names what needs every weight: a text past the eager budget is refused before it is read.
    """
    from attnviz import api

    text = read_text(args)
    asked = api.prepare(args.model, "hf", text, device=args.device)  # the door: resolved once, long decided once
    engine = asked.engine
    if eager_only and asked.long:
        n, limit = len(engine.encode(text).ids), api.eager_tokens(engine.n_layers, engine.n_heads)
        raise ValueError(f"{eager_only}: it takes texts up to {limit:,} tokens on this model, and this one is {n:,}")
    results = asked.results(TerminalPhases())
    return engine, results.get("self") or results["causal"]


def cmd_stats(args: argparse.Namespace) -> int:
    """Per-head statistics and labels of one text, at any length the model takes."""
    from attnviz.analysis import head_stats

    engine, result = _self_result(args)
    stats = result.stats(progress_printer("statistics"))  # a long text's: streamed through the rows, O(N) memory
    labels = head_stats.labels(stats, head_stats.uniform_entropy(result))
    for layer, row in enumerate(labels):
        print(f"layer {layer + 1}: " + " ".join(f"{h + 1}:{lab}" for h, lab in enumerate(row)))
    payload = {
        "model": engine.name,
        "tokens": list(result.target_tokens),
        "stats": {k: stats[k].tolist() for k in head_stats.STATS},
        "labels": labels,
    }
    write_json(args.json, payload)
    return 0


def cmd_rollout(args: argparse.Namespace) -> int:
    """Attention rollout (every layer) and flow (the last) of one text."""
    from attnviz.analysis import rollout

    engine, result = _self_result(
        args, eager_only="rollout multiplies every layer's whole map (the stats command takes any length)"
    )
    rolled = rollout.rollout(result)
    try:
        flowed = rollout.flow(result).tolist()
    except ValueError as err:
        print(f"note: {err}")
        flowed = None
    last = rolled[-1]
    for i, tok in enumerate(result.target_tokens):
        j = int(last[i].argmax())
        print(f"{tok!r:>16} draws most from {result.source_tokens[j]!r} ({last[i, j]:.2f}) after the last layer")
    write_json(
        args.json,
        {"model": engine.name, "tokens": list(result.target_tokens), "rollout": rolled.tolist(), "flow": flowed},
    )
    return 0


def benchmark_json(engine: Engine, bench) -> dict:
    """The pronouns --json layout: the method, the scores, the baselines, every case (heads 0-based)."""
    from attnviz.analysis.pronoun_scores import PERMUTATIONS

    layer, head, best = bench.best_head
    held_out, picked = bench.held_out_best_head()
    return {
        "model": engine.name,
        "method": bench.method,
        "n": bench.n,
        "accuracy": bench.accuracy,
        "chance": bench.chance,
        "ties": bench.ties,
        "head_ties": bench.head_ties,
        "best_head": {"layer": layer, "head": head, "accuracy": best, "picked_on": "the same cases"},
        "held_out_best_head": {"accuracy": held_out, "heads": [{"layer": lay, "head": h} for lay, h in picked]},
        "permutation_best_head": {"expected_accuracy": bench.permutation_best_head(), "runs": PERMUTATIONS},
        "skipped": [{"text": c.text, "reason": why} for c, why in bench.skipped],
        "cases": [
            {
                "text": r.case.text,
                "pronoun": r.case.pronoun,
                "pronoun_at": r.case.pronoun_at,
                "candidates": list(r.case.candidates),
                "answer": r.case.answer,
                "predicted": r.predicted,
                "correct": r.correct,
                "tie": r.tie,
                "head_ties": r.head_ties,
                "scores": r.scores.tolist(),
            }
            for r in bench.results
        ],
    }


def cmd_pronouns(args: argparse.Namespace) -> int:
    """Score pronoun cases from a file with the Maximum Attention Score or the head vote."""
    from attnviz import api
    from attnviz.analysis import pronoun_scores

    cases = pronoun_scores.read_cases(Path(args.cases))[: args.limit]
    engine = api.engine(args.model, "hf", args.device)
    bench = api.pronoun_benchmark(engine, cases, args.method)
    if not bench.n:
        raise ValueError(
            f"none of the {len(cases)} cases could be scored: {bench.skipped[0][1] if bench.skipped else 'no cases'}"
        )
    layer, head, best = bench.best_head
    held_out, _ = bench.held_out_best_head()
    print(f"{engine.name}: {bench.n} of {len(cases)} cases scored with {pronoun_scores.METHOD_NAMES[bench.method]}")
    print(
        f"accuracy {bench.accuracy:.1%} (chance {bench.chance:.1%}); {bench.ties} predictions won a tie, "
        f"{bench.head_ties:,} heads had a tie at the top"
    )
    permuted = bench.permutation_best_head()
    print(
        f"best single head: layer {layer + 1}, head {head + 1} at {best:.1%} (picked on these cases; its yardstick, "
        f"the best of {bench.per_head.numel()} heads on randomly relabelled cases: {permuted:.1%}); "
        f"picked on one half and scored on the other: {held_out:.1%} (its yardstick: chance)"
    )
    for why, count in bench.skip_reasons().items():
        print(f"skipped {count}: {why}")
    for why, count in Counter(why for _, why in bench.skipped).items():
        print(f"  {count} x {why}")
    write_json(args.json, benchmark_json(engine, bench))
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    """Convert the bundled models that need it (SmolLM2's GGUF file) into the local cache, ahead of time."""
    from attnviz.engines import smollm2

    print(f"SmolLM2 ready at {smollm2.prepared(log=print)}")
    return 0


def cmd_train_dates(args: argparse.Namespace) -> int:
    """Retrain the shipped date model."""
    from attnviz.engines import date_training

    return date_training.main(
        steps=args.steps, out=Path(args.out) if args.out else date_training.CHECKPOINT_DIR / "dates"
    )


def cmd_train_heads(args: argparse.Namespace) -> int:
    """Retrain the shipped head-count models (1, 2, 4, 8 heads) on one task or both."""
    from attnviz.lessons import head_models

    tasks = head_models.TASKS if args.task == "all" else (args.task,)
    return head_models.main(tasks, steps=args.steps, root=Path(args.out) if args.out else head_models.FOLDER)


def cmd_eval_heads(args: argparse.Namespace) -> int:
    """The shipped head-count models' accuracy on the held-out sequences, recomputed."""
    from attnviz.lessons import head_models

    result = head_models.held_out_accuracy(args.task, Path(args.root) if args.root else head_models.FOLDER)
    for m in result["models"]:
        print(f"{result['task']}, {m['heads']} head(s): held-out digit accuracy {m['accuracy']:.2%}, "
              f"whole sequences {m['sequence_accuracy']:.2%} ({m['steps']} training steps)")  # fmt: skip
    write_json(args.json, result)
    return 0


def cmd_class(args: argparse.Namespace) -> int:
    """Start a class ahead of a lesson: its code, the teacher's and the students' links, when it ends."""
    import datetime as dt

    from attnviz.liveclass import reach
    from attnviz.liveclass.store import DATABASE_ERRORS, Store, error_line, links

    args.base_url = args.base_url or os.environ.get(reach.BASE_URL_ENV) or "http://localhost:8501"
    links(args.base_url, "CHECK")  # a bad address fails before a class is made
    if reach.is_loopback(reach.url_host(args.base_url)):
        found = reach.lan_address()
        hint = f" (this machine's network address looks like http://{found}:8501)" if found else ""
        print(f"attnviz: warning: {args.base_url} opens on this machine only: students' devices cannot reach it. "
              f"Pass --base-url with the address students open{hint}.", file=sys.stderr)  # fmt: skip
    try:
        store = Store(args.db) if args.db else Store()
    except DATABASE_ERRORS as err:  # an unusable setting or an unreachable server: one line, not a traceback
        raise ValueError(f"the class database cannot be used: {error_line(err)}") from None
    code, secret, expires = store.create_class(hours=args.hours)
    urls = links(args.base_url, code, secret)
    when = dt.datetime.fromtimestamp(expires, dt.UTC).isoformat(timespec="seconds")
    print(
        f"class {code}, ends {when}\nstudents: {urls['student_url']}\nteacher (keep it private): {urls['teacher_url']}"
    )
    write_json(args.json, {"code": code, "teacher_url": urls["teacher_url"], "student_url": urls["student_url"],
                           "expires": when})  # fmt: skip
    return 0


def settle_memory() -> int:
    """Set what the server has loaded so far (Python, torch, transformers, Streamlit, the default model) aside from
    the garbage collector's full passes, which otherwise walk those half a million objects every few seconds under a
    class's load and stop every page for about 0.4 s each time (seen in bench/load.py --class: a change's p95 went
    up by as much). Everything made later (pages, figures, sessions) is still collected. How many objects."""
    import gc

    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def cmd_serve(args: argparse.Namespace) -> int:
    """The app, with the default model loaded (and the default text computed) before the server opens."""

    from streamlit.web import cli as streamlit_cli

    from attnviz.liveclass import reach, store

    try:  # the class database (ATTNVIZ_DB) opens now, or the server does not start
        db = store.Store()
    except store.DATABASE_ERRORS as err:
        print(f"attnviz: error: the class database ({store.DB_ENV}) cannot be used: {store.error_line(err)}",
              file=sys.stderr)  # fmt: skip
        return BAD_INPUT
    print(f"attnviz: classes are stored in {db.describe()}", flush=True)
    db.close()
    address = reach.EVERY_INTERFACE if args.lan else args.address
    given = args.public_url or os.environ.get(reach.BASE_URL_ENV)
    if given:  # the operator's address: the class's links and QR code carry it
        os.environ[reach.BASE_URL_ENV] = url = reach.checked_url(given)
        warning = reach.LOOPBACK_WARNING.format(url=url) if reach.is_loopback(reach.url_host(url)) else None
    else:
        url, warning = reach.room_url(address, args.port)
        if url:  # for a teacher who opened the server on its own machine (localhost)
            os.environ[reach.FOUND_URL_ENV] = url
    where = url or "the address the teacher's browser opens"
    print(f"attnviz: listening on {address}:{args.port}; students open {where}", flush=True)
    if warning:
        print(f"attnviz: warning: {warning}", file=sys.stderr, flush=True)
    app = Path(__file__).resolve().parent / "streamlit_app.py"  # inside the package: works from any folder
    if not args.no_preload:
        from attnviz import service
        from attnviz.ui import controls

        seconds = service.preload(controls.DEFAULT_TEXT)
        print(f"attnviz: default model loaded and its first page computed in {seconds:.1f} s", flush=True)
    settle_memory()
    from attnviz.ui.frame import SETTINGS  # the server's settings as flags: nothing is written into any folder

    flags = [f"--{k}={v}" for k, v in SETTINGS.items()]
    flags += ["--server.port", str(args.port), "--server.address", address]
    sys.argv = ["streamlit", "run", str(app), *flags, *args.streamlit]
    return streamlit_cli.main()


def _decoder_engine(args: argparse.Namespace):
    """The decoder an intervention runs on (SmolLM2 by default), on the asked backend."""
    from attnviz import api

    return api.engine(args.model, args.backend, args.device)


def cmd_induction(args: argparse.Namespace) -> int:
    """Induction heads on a repeated random sequence: loss per token and every head's scores."""
    from attnviz import api
    from attnviz.interventions import induction_scores as induction

    got = api.induction(_decoder_engine(args), length=args.length, seed=args.seed, batch=args.batch)
    print(f"{got.model}: {got.batch} sequences of {len(got.ids)} tokens ({got.length} random, twice); mean loss "
          f"first copy {got.first_copy_loss:.2f}, second copy {got.second_copy_loss:.2f} nats")  # fmt: skip
    sd = got.spread("induction")
    for layer, head, score in got.best(5):
        print(f"  {head_name(layer, head)} (1-based): induction {score:.3f} ± {float(sd[layer, head]):.3f}")
    write_json(args.json, {
        "model": got.model, "tokens": list(got.ids), "length": got.length, "batch": got.batch,
        "loss": got.loss.tolist(), "induction": got.induction.tolist(), "prefix": got.prefix.tolist(),
        "duplicate": got.duplicate.tolist(),
        **{f"{name}_sd": got.spread(name).tolist() for name in induction.SCORES},
    })  # fmt: skip
    return 0


def cmd_ablate(args: argparse.Namespace) -> int:
    """Some heads knocked out: the loss per token and the next tokens, before and after."""
    from attnviz import api
    from attnviz.interventions.runs import parse_heads, token_text

    engine = _decoder_engine(args)
    text = read_text(args)
    heads = parse_heads(args.heads, engine.n_layers, engine.n_heads)
    got = api.ablate(text, heads, model=engine, mode=args.mode, position=args.position)
    print(f"{got.model}: {sum(map(len, heads.values()))} head(s) {got.mode}-ablated; mean loss "
          f"{got.loss_before.mean():.3f} -> {got.loss_after.mean():.3f} nats")  # fmt: skip
    for name, top in (("before", got.top_before), ("after", got.top_after)):
        print(f"  next token after token {got.position + 1} (1-based) {name}: "
              + ", ".join(f"{t['token']!r} {t['p']:.2f}" for t in top))  # fmt: skip
    write_json(args.json, {
        "model": got.model, "heads": [[layer, h] for layer, hs in sorted(got.heads.items()) for h in hs],
        "mode": got.mode, "tokens": [token_text(engine, i) for i in got.ids], "position": got.position,
        "loss_before": got.loss_before.tolist(), "loss_after": got.loss_after.tolist(),
        "top_before": got.top_before, "top_after": got.top_after,
    })  # fmt: skip
    return 0


def cmd_patch(args: argparse.Namespace) -> int:
    """Each head's clean output patched into the corrupted run: the share of the logit difference restored."""
    from attnviz import api

    got = api.patch(args.clean, args.corrupt, args.answer, args.wrong, model=_decoder_engine(args))
    print(f"{got.model}: logit({args.answer!r}) - logit({args.wrong!r}) = {got.clean_diff:+.2f} clean, "
          f"{got.corrupt_diff:+.2f} corrupted")  # fmt: skip
    if got.restored is None:
        print(f"  the share restored is undefined and was not computed: it needs the model to get the pair right both "
              f"ways (d clean > 0 > d corrupted), and here d clean is {got.clean_diff:+.2f}, d corrupted "
              f"{got.corrupt_diff:+.2f}")  # fmt: skip
    else:
        flat = got.restored.flatten()
        for i in flat.topk(min(5, flat.numel())).indices.tolist():
            layer, head = divmod(i, got.restored.shape[1])
            print(f"  {head_name(layer, head)} (1-based): restores {flat[i]:+.3f}")
    write_json(args.json, {
        "model": got.model, "clean_diff": got.clean_diff, "corrupt_diff": got.corrupt_diff, "flips": got.flips,
        "restored": None if got.restored is None else got.restored.tolist(),
    })  # fmt: skip
    return 0


def _common(p: argparse.ArgumentParser, *, model: bool = True, json_out: bool = True) -> argparse.ArgumentParser:
    """The flags most commands share: --model, --device, --json."""
    if model:
        p.add_argument("--model", default="default", help='"default" (bundled BERT), a hub id or a folder')
    p.add_argument("--device", choices=("cpu", "cuda"), default=None)
    if json_out:
        p.add_argument("--json", metavar="PATH", default=None)
    return p


def _text_args(p: argparse.ArgumentParser) -> None:
    """The text, as an argument or from a file."""
    p.add_argument("text", nargs="?", default=None, help="the text (or give --file)")
    p.add_argument("--file", metavar="PATH", default=None, help="read the text from a UTF-8 file (a long text)")


def corpus_printer():
    """A (fraction, what) callback: a bar with the time left on a terminal's stderr (quiet in a pipe)."""
    import time

    if not sys.stderr.isatty():
        return None
    started = time.monotonic()
    first = [None]

    def report(fraction: float, what: str) -> None:
        now = time.monotonic()
        if first[0] is None:  # resumed work counts from where it started
            first[0] = (fraction, now)
        f0, t0 = first[0]
        rate = (fraction - f0) / (now - t0) if now > t0 and fraction > f0 else 0.0
        left = f"{(1 - fraction) / rate:,.0f} s left" if rate > 0 and fraction < 1 else "…"
        bar = "#" * int(fraction * 30)
        print(f"\rcorpus [{bar:<30}] {fraction:5.1%} {what} · {left} ({now - started:,.0f} s)   ", end="",
              file=sys.stderr, flush=True)  # fmt: skip
        if fraction >= 1:
            print(file=sys.stderr)

    return report


def cmd_corpus(args: argparse.Namespace) -> int:
    """What every head does across a corpus: a run's Parquet tables (resumable)."""
    from attnviz import api

    run = api.corpus(args.path, args.model, args.out, engine=args.engine, text_column=args.text_column,
                     window=args.window, device=args.device, actors=args.actors, threads=args.threads,
                     progress=corpus_printer(), batch_mb=args.batch_mb)  # fmt: skip
    m = run.manifest
    c = m["counts"]
    skipped = sum(m["corpus"]["skipped"].values())
    print(f"wrote {run.folder}: {c['windows']:,} windows ({c['tokens']:,} tokens) of {m['corpus']['documents']:,} "
          f"documents{f' ({skipped:,} skipped: see manifest.json)' if skipped else ''}, {m['layers']} layers x "
          f"{m['heads']} heads, {m['engine']}, {m['seconds']:,.1f} s")  # fmt: skip
    print("tables: " + ", ".join(f"{t}.parquet" for t in ("heads", "examples", "texts", "text_stats")))
    heads = run.heads
    for stat in ("prev", "first", "entropy"):
        rows = heads[heads["stat"] == stat].sort_values("mean", ascending=False).head(3)
        print(f"highest mean {stat}: " + ", ".join(f"{head_name(int(r['layer']), int(r['head']))} {r['mean']:.3f}"
                                                   for _, r in rows.iterrows()))  # fmt: skip
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Every command and its flags."""
    parser = argparse.ArgumentParser(
        prog="attnviz", description="See where a transformer's attention goes (also: python -m attnviz)."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    att = _common(sub.add_parser("attention", help="per-head attention weights of a text"))
    _text_args(att)
    att.add_argument(
        "--rows", default=None, metavar="I,J,...", help="write only these query rows (0-based), exact, at any length"
    )
    att.add_argument("--backend", choices=BACKENDS, default="hf", help="how attention is computed")
    att.add_argument("--engine", choices=BACKENDS, dest="backend", help=argparse.SUPPRESS)  # the old name
    att.add_argument("--target", default=None, help="decoder text for encoder-decoder models")
    att.set_defaults(func=cmd_attention)
    for name, func, text in (
        ("stats", cmd_stats, "per-head statistics and labels"),
        ("rollout", cmd_rollout, "attention rollout and flow"),
    ):
        p = _common(sub.add_parser(name, help=text))
        _text_args(p)
        p.set_defaults(func=func)
    ind = _common(sub.add_parser("induction", help="induction heads on a repeated random sequence"), model=False)
    ab = _common(sub.add_parser("ablate", help="knock heads out: the loss and next tokens before and after"),
                 model=False)  # fmt: skip
    pa = _common(sub.add_parser("patch", help="patch each head's clean output into a corrupted run"), model=False)
    for p, func in ((ind, cmd_induction), (ab, cmd_ablate), (pa, cmd_patch)):
        p.add_argument("--model", default="smollm2", help='a decoder: "smollm2" (bundled), a Llama hub id or folder')
        p.add_argument("--backend", choices=BACKENDS, default="hf", help="how attention is computed")
        p.set_defaults(func=func)
    ind.add_argument("--length", type=int, default=50, help="random tokens in each copy")
    ind.add_argument("--seed", type=int, default=0, help="the seed of the batch's sequences")
    ind.add_argument("--batch", type=int, default=10, help="sequences averaged (ARENA's 10)")
    _text_args(ab)
    ab.add_argument("--heads", required=True, metavar="L.H[,L.H...]",
                    help="0-based layer.head pairs (3.1), or heads as the pages name them, 1-based (L4H2)")  # fmt: skip
    ab.add_argument("--mode", choices=("zero", "mean"), default="zero")
    ab.add_argument("--position", type=int, default=-1, help="where the next tokens are read (0-based; -1: last)")
    pa.add_argument("--clean", required=True, help="the prompt the model gets right")
    pa.add_argument("--corrupt", required=True, help="the same prompt with one word changed (same length in tokens)")
    pa.add_argument("--answer", required=True, help="the right next token, with its leading space: ' Anna'")
    pa.add_argument("--wrong", required=True, help="the wrong next token: ' Peter'")
    pr = _common(sub.add_parser("pronouns", help="does attention resolve pronouns? (Maximum Attention Score)"))
    pr.add_argument(
        "--cases", required=True, help='a .jsonl file, a Winograd .xml file, or "lesson" (the built-in pairs)'
    )
    pr.add_argument("--method", choices=("mas", "vote"), default="mas", help="mas: Klein & Nabi 2019; vote: head vote")
    pr.add_argument("--limit", type=int, default=None, help="only the first N cases (WSC273: --limit 273)")
    pr.set_defaults(func=cmd_pronouns)
    doc = _common(
        sub.add_parser("doctor", help="versions, GPU, offline models, and an attention check"),
        model=False,
        json_out=False,
    )
    doc.set_defaults(func=cmd_doctor)
    prep = sub.add_parser(
        "prepare", help="convert the bundled SmolLM2 once into the local cache (else its first load does)"
    )
    prep.set_defaults(func=cmd_prepare)
    srv = sub.add_parser(
        "serve",
        help="run the app, the default model loaded before the first visitor",
        description="Further --server.* and other streamlit flags are passed on to streamlit.",
    )
    srv.add_argument("--port", type=int, default=8501)
    srv.add_argument("--address", default="127.0.0.1", help="the interface to listen on (0.0.0.0: every one)")
    srv.add_argument(
        "--lan",
        action="store_true",
        help="serve the room: listen on every interface; the class's links and QR code carry this machine's "
        "network address (see docs/class.md)",
    )
    srv.add_argument(
        "--public-url",
        default=None,
        metavar="URL",
        help="the address students open, where the machine cannot know it (a container, a proxy); "
        "default: $ATTNVIZ_BASE_URL",
    )
    srv.add_argument("--no-preload", action="store_true", help="open at once; the first visitor waits for the model")
    srv.set_defaults(func=cmd_serve)
    tr = sub.add_parser("train-dates", help="train the shipped date model from scratch (a few minutes on 2 cores)")
    tr.add_argument("--steps", type=int, default=None, help="training steps (default: the shipped recipe)")
    tr.add_argument("--out", default=None, help="folder to save to (default: the shipped checkpoint's folder)")
    tr.set_defaults(func=cmd_train_dates)
    cl = sub.add_parser("class", help="a class a teacher leads live (see docs/class.md)")
    cl_sub = cl.add_subparsers(dest="class_command", required=True)
    cc = cl_sub.add_parser("create", help="start a class ahead of a lesson and print its links")
    cc.add_argument(
        "--base-url",
        default=None,
        help="the address students open (default: $ATTNVIZ_BASE_URL, else http://localhost:8501, with a warning)",
    )
    cc.add_argument("--hours", type=float, default=None, help="how long it lasts (default: ATTNVIZ_CLASS_HOURS or 8)")
    cc.add_argument(
        "--db",
        default=None,
        help="a database file or postgresql:// URL (default: ATTNVIZ_DB, else a file in the user's data folder)",
    )
    cc.add_argument(
        "--json", default=None, metavar="OUT", help='write {"code", "teacher_url", "student_url", "expires"}'
    )
    cc.set_defaults(func=cmd_class)
    th = sub.add_parser("train-heads", help="train the 1/2/4/8-head models (about a minute a task on 2 cores)")
    th.add_argument("--task", choices=("reversal", "mirror-sum", "all"), default="all")
    th.add_argument("--steps", type=int, default=None, help="training steps (default: each task's shipped recipe)")
    th.add_argument("--out", default=None, help="folder to save to (default: the shipped checkpoints' folder)")
    th.set_defaults(func=cmd_train_heads)
    ev = sub.add_parser("eval-heads", help="held-out accuracy of the 1/2/4/8-head models, recomputed")
    ev.add_argument("--task", choices=("reversal", "mirror-sum"), default="reversal")
    ev.add_argument("--root", default=None, help="checkpoints folder (default: the shipped ones)")
    ev.add_argument("--json", default=None, metavar="OUT", help='write {"task", "models": [...]} to OUT')
    ev.set_defaults(func=cmd_eval_heads)
    co = _common(sub.add_parser("corpus", help="what every head does across a corpus: Parquet tables (docs/corpus.md)"),
                 json_out=False)  # fmt: skip
    co.add_argument("path", help="a folder of .txt files, a .jsonl / .csv / .parquet / .txt file, or 'builtin'")
    co.add_argument("--out", default=None, metavar="FOLDER", help="the run's folder (default: under "
                    "ATTNVIZ_CORPUS_DIR or ~/.cache/attnviz/corpus); run again on it to resume")  # fmt: skip
    co.add_argument(
        "--engine",
        choices=("embedded", "ray"),
        default="embedded",
        help="embedded (this process) or ray (Ray Data actors; RAY_ADDRESS names a cluster)",
    )
    co.add_argument("--text-column", default="text", help="the text's field or column (JSONL, CSV, Parquet)")
    co.add_argument("--window", type=int, default=256, help="tokens per window; a longer document is cut")
    co.add_argument("--actors", type=int, default=2, help="Ray: model-holding actors (a GPU each on a GPU machine)")
    co.add_argument("--threads", type=int, default=1, help="Ray on CPUs: threads per actor")
    co.add_argument("--batch-mb", type=int, default=128, help="the weights of one sub-batch stay under this")
    co.set_defaults(func=cmd_corpus)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; bad input exits 2 with one line, never a traceback."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "serve":  # only serve passes flags on (to streamlit)
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.streamlit = extra
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    try:
        return args.func(args)
    except (ValueError, ModelLoadError, OSError, SyntaxError) as err:  # SyntaxError: malformed XML
        print(f"attnviz: error: {err}", file=sys.stderr)
        return BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
