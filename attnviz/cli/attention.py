"""Commands on one text's attention: `attention` (the weights, all or chosen rows), `stats`, `rollout`, and `doctor`
(versions, the GPU, the offline models, and an attention check against Hugging Face)."""

from __future__ import annotations

import argparse

from attnviz.cli.common import (
    TerminalPhases,
    cut,
    parse_rows,
    progress_printer,
    read_text,
    result_json,
    write_json,
)


def cmd_attention(args: argparse.Namespace) -> int:
    """Per-head attention of one text, printed and optionally written as JSON (all of it, or chosen rows)."""
    from attnviz import api
    from attnviz.result import counted

    text = read_text(args)  # fail in milliseconds, before a model loads
    rows = parse_rows(args.rows)
    asked = api.prepare(args.model, args.backend, text, args.target, device=args.device)  # the door: resolved once
    engine = asked.engine
    if args.target is not None and "cross" not in engine.kinds:  # it ran without a word, the target unread
        raise ValueError(f"--target is the decoder's text of an encoder-decoder (such as dates); {args.model} has none")
    n = asked.tokens  # the request's one encoding (the engine runs on it)
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
            f"{kind}: {counted(r.n_layers, 'layer')} x {counted(r.n_heads, 'head')}, "
            f"{len(r.target_tokens)} x {len(r.source_tokens)} tokens{how}"
        )
    first = results.main
    print(f"model {engine.name} ({engine.backend}) on {first.device}")
    cut(engine, first.truncated)
    write_json(args.json, result_json(engine, results, rows))
    return 0


DOCTOR_TEXT = "The animal didn't cross the street because it was too tired."


DOCTOR_TOLERANCE = 1e-4


def offline_models() -> list[str]:
    """Every model this machine loads offline: the bundled ones that are installed (SmolLM2 also says whether its
    one-time conversion is done), the folders in $ATTNVIZ_MODEL_DIRS and the hub ids in the local cache."""
    from attnviz.engines import bundles, registry
    from attnviz.engines.base import ModelLoadError

    names = [f"default  ({registry.default_model_dir()})", "dates  (shipped with attnviz)"]
    for bundle in bundles.BUNDLES.values():
        try:
            bundle.fingerprint()
        except ModelLoadError:
            names.append(f"{bundle.name}  not installed: {bundle.install}")
            continue
        where = bundle.path if bundle.ready() else "converted on its first load or by prepare"
        names.append(f"{bundle.name}  ({where})")
    names += [f"{name}  (a folder in $ATTNVIZ_MODEL_DIRS)" for name in registry.local_folders()]
    return names + list(registry.local_hub_models())


def cmd_doctor(args: argparse.Namespace) -> int:
    """What this machine has, and one attention pass on the chosen device checked against the CPU."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    import torch
    import transformers

    from attnviz.engines import registry
    from attnviz.engines.scratch import describe_device, resolve_device
    from attnviz.version import __version__

    device = resolve_device(args.device)
    print(f"attnviz       {__version__}")
    print(f"python        {platform.python_version()} ({platform.machine()})")
    print(f"torch         {torch.__version__} (CUDA build: {torch.version.cuda or 'none'})")
    cuda = torch.cuda.is_available()
    print(f"CUDA          {'available: ' + torch.cuda.get_device_name(0) if cuda else 'not available'}")
    print(f"transformers  {transformers.__version__}")
    try:  # the app's; the command line and the library work without it (a GPU host with no web front end, say)
        app = version("streamlit")
    except PackageNotFoundError:
        app = "not installed (the app needs it: pip install streamlit; the command line does not)"
    print(f"streamlit     {app}")
    print("models offline:")
    for name in offline_models():
        print(f"  {name}")
    from attnviz import fused

    runs, what = fused.check(torch.device(device))
    print(f"long texts    {'the fused statistics pass' if runs else 'the plain path, slower'}: {what}")
    ours, theirs = registry.load("default", "scratch", device), registry.load("default", "hf", "cpu")
    scratch = ours.run(ours.encode(DOCTOR_TEXT))["self"]
    reference = theirs.run(theirs.encode(DOCTOR_TEXT))["self"]
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
        n, limit = asked.tokens, api.eager_tokens(engine.n_layers, engine.n_heads)
        raise ValueError(f"{eager_only}: it takes texts up to {limit:,} tokens on this model, and this one is {n:,}")
    results = asked.results(TerminalPhases())
    return engine, results.get("self") or results["causal"]


def cmd_stats(args: argparse.Namespace) -> int:
    """Per-head statistics and labels of one text, at any length the model takes."""
    from attnviz.analysis import head_stats

    engine, result = _self_result(args)
    stats = result.stats(progress_printer("statistics"))  # a long text's: streamed through the rows, O(N) memory
    stats = head_stats.with_sink(stats, result)  # gpt-oss's learned sinks, labelled as the Model overview does
    labels = head_stats.labels(stats, head_stats.uniform_entropy(result), result.kind)
    for layer, row in enumerate(labels):
        print(f"layer {layer + 1}: " + " ".join(f"{h + 1}:{lab}" for h, lab in enumerate(row)))
    payload = {
        "model": engine.name,
        **cut(engine, result.truncated),
        "tokens": list(result.target_tokens),
        "stats": {k: stats[k].tolist() for k in (*head_stats.STATS, "sink") if k in stats},  # a learned sink's too
        "labels": labels,
    }
    write_json(args.json, payload)
    return 0


def cmd_rollout(args: argparse.Namespace) -> int:
    """Attention rollout (every layer) and flow (the last) of one text."""
    from attnviz.analysis import rollout
    from attnviz.result import percent

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
    pooled = rollout.first_token_share(last) if result.kind == "causal" else 0.0
    if pooled > 0.5:  # every token "draws most from 'The' (1.00)" on SmolLM2, with no word why
        print(
            f"note: on a decoder, rollout pools on the first token ({percent(pooled)} of a token's rollout on average "
            "after the last layer): it is in every token's past and the sink of many heads; an earlier layer's rollout "
            "(in --json) says more"
        )
    payload = {"model": engine.name, **cut(engine, result.truncated), "tokens": list(result.target_tokens)}
    write_json(args.json, {**payload, "rollout": rolled.tolist(), "flow": flowed})
    return 0
