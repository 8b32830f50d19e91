"""What the commands share: the flags, the text read from an argument or a file, JSON written, progress shown on a
terminal, and the exit status of bad input."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from attnviz.engines.base import Engine
from attnviz.result import Results

BAD_INPUT = 2


def write_json(path: str | None, payload: dict) -> None:
    """Write the --json file, if one was asked for, and say so."""
    if path:
        Path(path).write_text(json.dumps(payload))
        print(f"wrote {path}")


def cut(engine: Engine, truncated: int, what: str = "the text") -> dict:
    """Says on the terminal that a text was cut to the model's limit, and returns the JSON's fields for it (every
    command that reads a text writes them: "truncated", the tokens dropped, and "max_tokens")."""
    if truncated:
        print(f"note: {what} was cut to {engine.max_tokens:,} tokens; {truncated:,} tokens were dropped")
    return {"truncated": truncated, "max_tokens": engine.max_tokens}


def result_json(engine: Engine, results: Results, rows: list[int] | None = None) -> dict:
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
            # where a 0 is the model's mask, not a weight it computed, and where a row sums to under 1: a sliding
            # window's layers (each layer's window in tokens, 0 for none) and a learned sink's share
            **({"windows": list(r.windows)} if any(r.windows) else {}),
            **({"sinks": True} if r.sinks else {}),
            "weights": weights.tolist(),
        }
        if rows is not None:
            out[kind]["rows"] = list(rows)
    return {
        "model": engine.name,
        "backend": engine.backend,
        "device": first.device,
        "truncated": first.truncated,  # tokens dropped (the command says so on the terminal: cut)
        "max_tokens": engine.max_tokens,
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


def common_args(p: argparse.ArgumentParser, *, model: bool = True, json_out: bool = True) -> argparse.ArgumentParser:
    """The flags most commands share: --model, --device, --json."""
    if model:
        p.add_argument(
            "--model",
            default="default",
            help='"default" (BERT), "smollm2", "gemma3", "dates" (bundled), a hub id or a folder',
        )
    p.add_argument("--device", choices=("cpu", "cuda"), default=None, help="where it runs (default: a GPU if any)")
    if json_out:
        p.add_argument("--json", metavar="PATH", default=None, help="also write the numbers to PATH as JSON")
    return p


def text_args(p: argparse.ArgumentParser) -> None:
    """The text, as an argument or from a file."""
    p.add_argument("text", nargs="?", default=None, help="the text (or give --file)")
    p.add_argument("--file", metavar="PATH", default=None, help="read the text from a UTF-8 file (a long text)")
