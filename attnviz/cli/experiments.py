"""Commands that score or intervene: `pronouns` (a benchmark of cases from a file), `induction`, `ablate` and `patch`
(on a decoder, SmolLM2 by default)."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from attnviz.cli.common import (
    cut,
    read_text,
    write_json,
)
from attnviz.engines.base import Engine
from attnviz.result import head_name


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
    from attnviz.corpus import pronoun_files

    cases = pronoun_files.read_cases(Path(args.cases))[: args.limit]
    engine = api.engine(args.model, "hf", args.device)
    bench = api.pronoun_benchmark(engine, cases, args.method)
    if not bench.n:
        raise ValueError(
            f"none of the {len(cases)} cases could be scored: {bench.skipped[0][1] if bench.skipped else 'no cases'}"
        )
    layer, head, best = bench.best_head
    held_out, _ = bench.held_out_best_head()
    print(f"{engine.name}: {bench.n} of {len(cases)} cases scored with {pronoun_scores.METHOD_ABOUT[bench.method]}")
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


def _decoder_engine(args: argparse.Namespace):
    """The decoder an intervention runs on (SmolLM2 by default), on the asked backend."""
    from attnviz import api

    return api.engine(args.model, args.backend, args.device)


def cmd_induction(args: argparse.Namespace) -> int:
    """Induction heads on a repeated random sequence: loss per token and every head's scores."""
    from attnviz import api
    from attnviz.interventions import induction_scores as induction

    got = api.induction(_decoder_engine(args), length=args.length, seed=args.seed, batch=args.batch)
    print(
        f"{got.model}: {got.batch} sequences of {len(got.ids)} tokens ({got.length} random, twice); mean loss "
        f"first copy {got.first_copy_loss:.2f}, second copy {got.second_copy_loss:.2f} nats"
    )
    sd = got.spread("induction")
    for layer, head, score in got.best(5):
        print(f"  {head_name(layer, head)} (1-based): induction {score:.3f} ± {float(sd[layer, head]):.3f}")
    write_json(
        args.json,
        {
            "model": got.model,
            "tokens": list(got.ids),
            "length": got.length,
            "batch": got.batch,
            "loss": got.loss.tolist(),
            "induction": got.induction.tolist(),
            "prefix": got.prefix.tolist(),
            "duplicate": got.duplicate.tolist(),
            **{f"{name}_sd": got.spread(name).tolist() for name in induction.SCORES},
        },
    )
    return 0


def cmd_ablate(args: argparse.Namespace) -> int:
    """Some heads knocked out: the loss per token and the next tokens, before and after."""
    from attnviz import api
    from attnviz.interventions.runs import parse_heads, token_text

    engine = _decoder_engine(args)
    text = read_text(args)
    heads = parse_heads(args.heads, engine.n_layers, engine.n_heads)
    got = api.ablate(text, heads, model=engine, mode=args.mode, position=args.position)
    said = cut(engine, engine.encode(text).truncated)
    print(
        f"{got.model}: {sum(map(len, heads.values()))} head(s) {got.mode}-ablated; mean loss "
        f"{got.loss_before.mean():.3f} -> {got.loss_after.mean():.3f} nats"
    )
    for name, top in (("before", got.top_before), ("after", got.top_after)):
        print(
            f"  next token after token {got.position + 1} (1-based) {name}: "
            + ", ".join(f"{t['token']!r} {t['p']:.2f}" for t in top)
        )
    write_json(
        args.json,
        {
            "model": got.model,
            **said,
            "heads": [[layer, h] for layer, hs in sorted(got.heads.items()) for h in hs],
            "mode": got.mode,
            "tokens": [token_text(engine, i) for i in got.ids],
            "position": got.position,
            "loss_before": got.loss_before.tolist(),
            "loss_after": got.loss_after.tolist(),
            "top_before": got.top_before,
            "top_after": got.top_after,
        },
    )
    return 0


def cmd_patch(args: argparse.Namespace) -> int:
    """Each head's clean output patched into the corrupted run: the share of the logit difference restored."""
    from attnviz import api

    engine = _decoder_engine(args)
    got = api.patch(args.clean, args.corrupt, args.answer, args.wrong, model=engine)
    said = [
        cut(engine, engine.encode(t).truncated, f"the {w} text")
        for w, t in (("clean", args.clean), ("corrupted", args.corrupt))
    ]
    print(
        f"{got.model}: logit({args.answer!r}) - logit({args.wrong!r}) = {got.clean_diff:+.2f} clean, "
        f"{got.corrupt_diff:+.2f} corrupted"
    )
    if got.restored is None:
        print(
            f"  the share restored is undefined and was not computed: it needs the model to get the pair right both "
            f"ways (d clean > 0 > d corrupted), and here d clean is {got.clean_diff:+.2f}, d corrupted "
            f"{got.corrupt_diff:+.2f}"
        )
    else:
        flat = got.restored.flatten()
        for i in flat.topk(min(5, flat.numel())).indices.tolist():
            layer, head = divmod(i, got.restored.shape[1])
            print(f"  {head_name(layer, head)} (1-based): restores {flat[i]:+.3f}")
    write_json(
        args.json,
        {
            "model": got.model,
            "truncated": [c["truncated"] for c in said],  # the clean text's, the corrupted text's
            "max_tokens": engine.max_tokens,
            "clean_diff": got.clean_diff,
            "corrupt_diff": got.corrupt_diff,
            "flips": got.flips,
            "restored": None if got.restored is None else got.restored.tolist(),
        },
    )
    return 0
