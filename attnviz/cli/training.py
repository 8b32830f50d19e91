"""Commands that fetch or train what the pages show: `prepare` (SmolLM2's weights), `train-dates`, `train-heads`
and `eval-heads`."""

from __future__ import annotations

import argparse
from pathlib import Path

from attnviz.cli.common import (
    write_json,
)


def cmd_prepare(args: argparse.Namespace) -> int:
    """Convert the bundled models that need it (SmolLM2's and Gemma 3's GGUF files) into the local cache, ahead of
    time; a model whose packages are not installed is named with the command that installs it."""
    from attnviz.engines import bundles
    from attnviz.engines.base import ModelLoadError

    missing = 0
    for bundle in bundles.BUNDLES.values():
        try:
            print(f"{bundle.label} ready at {bundle.converted(log=print)}")
        except ModelLoadError as e:
            print(e)
            missing += 1
    return 1 if missing == len(bundles.BUNDLES) else 0


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
        print(
            f"{result['task']}, {m['heads']} head(s): held-out digit accuracy {m['accuracy']:.2%}, "
            f"whole sequences {m['sequence_accuracy']:.2%} ({m['steps']} training steps)"
        )
    write_json(args.json, result)
    return 0
