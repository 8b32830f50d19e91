"""The command line (the `attnviz` console script, `python -m attnviz`): one parser, a module per kind of command.

Bad input exits 2 with one line (`attnviz: error: ...`), never a traceback."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# Before any command's module imports torch, which reads this once: tensors of 2 MB or more on transparent huge pages
# where the kernel gives them on request (THP "madvise", as here and on Ubuntu). A fresh 256 MB tensor takes 65,536
# page faults on 4 KB pages, 128 on huge ones: 0.20 s against 0.08 s on this VM (docs/testing.md, "Memory"). An
# operator's own setting stands (THP_MEM_ALLOC_ENABLE=0 turns it off).
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

from attnviz.cli.attention import cmd_attention, cmd_doctor, cmd_rollout, cmd_stats
from attnviz.cli.common import BAD_INPUT, common_args, text_args
from attnviz.cli.corpus_run import cmd_corpus
from attnviz.cli.experiments import cmd_ablate, cmd_induction, cmd_patch, cmd_pronouns
from attnviz.cli.serving import cmd_class, cmd_serve
from attnviz.cli.training import cmd_eval_heads, cmd_prepare, cmd_train_dates, cmd_train_heads
from attnviz.engines.base import BACKENDS, ModelLoadError


def _reading_commands(sub: argparse._SubParsersAction) -> None:
    """attention, stats, rollout and pronouns: what a text's attention is."""
    att = common_args(sub.add_parser("attention", help="per-head attention weights of a text"))
    text_args(att)
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
        p = common_args(sub.add_parser(name, help=text))
        text_args(p)
        p.set_defaults(func=func)
    pr = common_args(sub.add_parser("pronouns", help="does attention resolve pronouns? (Maximum Attention Score)"))
    pr.add_argument(
        "--cases", required=True, help='a .jsonl file, a Winograd .xml file, or "lesson" (the built-in pairs)'
    )
    pr.add_argument("--method", choices=("mas", "vote"), default="mas", help="mas: Klein & Nabi 2019; vote: head vote")
    pr.add_argument("--limit", type=int, default=None, help="only the first N cases (WSC273: --limit 273)")
    pr.set_defaults(func=cmd_pronouns)


def _intervention_commands(sub: argparse._SubParsersAction) -> None:
    """induction, ablate and patch: a decoder's heads measured by changing its run."""
    ind = common_args(sub.add_parser("induction", help="induction heads on a repeated random sequence"), model=False)
    ablate_help = "knock heads out: the loss and next tokens before and after"
    ab = common_args(sub.add_parser("ablate", help=ablate_help), model=False)
    pa = common_args(sub.add_parser("patch", help="patch each head's clean output into a corrupted run"), model=False)
    for p, func in ((ind, cmd_induction), (ab, cmd_ablate), (pa, cmd_patch)):
        p.add_argument(
            "--model", default="smollm2", help='a decoder: "smollm2" or "gemma3" (bundled), a hub id or a folder'
        )
        p.add_argument("--backend", choices=BACKENDS, default="hf", help="how attention is computed")
        p.set_defaults(func=func)
    ind.add_argument("--length", type=int, default=50, help="random tokens in each copy")
    ind.add_argument("--seed", type=int, default=0, help="the seed of the batch's sequences")
    ind.add_argument("--batch", type=int, default=10, help="sequences averaged (ARENA's 10)")
    text_args(ab)
    ab.add_argument(
        "--heads",
        required=True,
        metavar="L.H[,L.H...]",
        help="0-based layer.head pairs (3.1), or heads as the pages name them, 1-based (L4H2)",
    )
    ab.add_argument(
        "--mode",
        choices=("zero", "mean"),
        default="zero",
        help="a knocked-out head's output: zeros, or its mean over a reference corpus",
    )
    ab.add_argument("--position", type=int, default=-1, help="where the next tokens are read (0-based; -1: last)")
    pa.add_argument("--clean", required=True, help="the prompt the model gets right")
    pa.add_argument("--corrupt", required=True, help="the same prompt with one word changed (same length in tokens)")
    pa.add_argument("--answer", required=True, help="the right next token, with its leading space: ' Anna'")
    pa.add_argument("--wrong", required=True, help="the wrong next token: ' Peter'")


def _setup_commands(sub: argparse._SubParsersAction) -> None:
    """doctor, prepare and the training of the shipped small models."""
    doc = common_args(
        sub.add_parser("doctor", help="versions, GPU, offline models, and an attention check"),
        model=False,
        json_out=False,
    )
    doc.set_defaults(func=cmd_doctor)
    prep = sub.add_parser(
        "prepare", help="convert the bundled SmolLM2 and Gemma 3 once into the local cache (else their first loads do)"
    )
    prep.set_defaults(func=cmd_prepare)
    tr = sub.add_parser("train-dates", help="train the shipped date model from scratch (a few minutes on 2 cores)")
    tr.add_argument("--steps", type=int, default=None, help="training steps (default: the shipped recipe)")
    tr.add_argument("--out", default=None, help="folder to save to (default: the shipped checkpoint's folder)")
    tr.set_defaults(func=cmd_train_dates)
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


def _serving_commands(sub: argparse._SubParsersAction) -> None:
    """serve (the app) and class (a class made ahead of a lesson)."""
    srv = sub.add_parser(
        "serve",
        help="run the app, the default model loaded before the first visitor",
        description="Further --server.* and other streamlit flags are passed on to streamlit.",
    )
    srv.add_argument("--port", type=int, default=8501, help="the port to serve on (default 8501)")
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


def _corpus_command(sub: argparse._SubParsersAction) -> None:
    """corpus: what every head does across many texts."""
    corpus_help = "what every head does across a corpus: Parquet tables (docs/corpus.md)"
    co = common_args(sub.add_parser("corpus", help=corpus_help), json_out=False)
    co.add_argument("path", help="a folder of .txt files, a .jsonl / .csv / .parquet / .txt file, or 'builtin'")
    co.add_argument(
        "--out",
        default=None,
        metavar="FOLDER",
        help="the run's folder (default: under "
        "ATTNVIZ_CORPUS_DIR or ~/.cache/attnviz/corpus); run again on it to resume",
    )
    co.add_argument(
        "--engine",
        dest="executor",
        choices=("embedded", "ray"),
        default="embedded",
        help="embedded (this process) or ray (Ray Data actors; RAY_ADDRESS names a cluster)",
    )
    co.add_argument("--text-column", default="text", help="the text's field or column (JSONL, CSV, Parquet)")
    co.add_argument("--window", type=int, default=256, help="tokens per window; a longer document is cut")
    co.add_argument("--actors", type=int, default=2, help="Ray: model-holding actors (a GPU each on a GPU machine)")
    co.add_argument("--threads", type=int, default=1, help="Ray on CPUs: threads per actor")
    co.add_argument("--batch-mb", type=int, default=128, help="the weights of one sub-batch stay under this")
    co.add_argument(
        "--statistics",
        default=None,
        metavar="NAMES",
        help="compute only these, comma-separated (entropy,distance,cls,sep,punct,prev,next,self,confidence,first; "
        "default: every one and a decoder's induction scores)",
    )
    co.set_defaults(func=cmd_corpus)


def build_parser() -> argparse.ArgumentParser:
    """Every command and its flags, in groups."""
    parser = argparse.ArgumentParser(
        prog="attnviz", description="See where a transformer's attention goes (also: python -m attnviz)."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _reading_commands(sub)
    _intervention_commands(sub)
    _setup_commands(sub)
    _serving_commands(sub)
    _corpus_command(sub)
    return parser


def writable(path: str | None) -> None:
    """Refuse a --json file whose folder is not there, before a model loads and a text is read (the command wrote
    "[Errno 2] No such file or directory" after the whole computation)."""
    if path and not Path(path).absolute().parent.is_dir():
        raise ValueError(f"cannot write {path}: there is no folder {Path(path).absolute().parent}")


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
        writable(getattr(args, "json", None))
        return args.func(args)
    except (ValueError, ModelLoadError, OSError, SyntaxError) as err:  # SyntaxError: malformed XML
        print(f"attnviz: error: {err}", file=sys.stderr)
        return BAD_INPUT
