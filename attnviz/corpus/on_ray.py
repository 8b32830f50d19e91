"""The Ray engine of a corpus run: Ray Data's map_batches over the run's batches, one model-holding actor per worker.

Each actor loads the model once (corpus.models.load, in its own process) and calls the same per-batch function as
the embedded engine (corpus.measure.measure); a dataset item is one whole batch of the run (batch_size=1), so the
batches, and with them the numbers, are the embedded run's. No scheduler, queue or pool of ours: Ray Data places the
actors (`num_gpus=1` each on a GPU machine, else `threads` CPUs each) and streams the results back to the driver,
which writes each batch's part as it arrives. `ray.init()` with no address starts a local Ray for the run;
RAY_ADDRESS names a cluster (whose workers must be able to load the model by the same name).
Install with `pip install "attnviz[ray]"`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator

from attnviz.corpus.measure import Batch, Settings, measure


class MeasureActor:
    """A Ray Data actor: the model loaded once, then one batch of the run per call."""

    def __init__(self, model: str, settings: dict, device: str | None, threads: int) -> None:
        import torch

        from attnviz.corpus.models import info_of, load

        torch.set_num_threads(threads)
        self.engine = load(model, device)
        self.settings = Settings(**settings)
        self.info = json.dumps(info_of(self.engine))

    def __call__(self, rows: dict) -> dict:
        out: dict[str, list] = {"index": [], "partial": [], "info": []}
        for index, docs in zip(rows["index"], rows["documents"], strict=True):
            batch = Batch(int(index), [(int(d), str(s), str(t)) for d, s, t in json.loads(docs)])
            out["index"].append(batch.index)
            out["partial"].append(measure(self.engine, batch, self.settings).to_bytes())
            out["info"].append(self.info)
        return out


def measure_all(
    model: str,
    batches: list[Batch],
    settings: Settings,
    *,
    device: str | None = None,
    actors: int = 2,
    threads: int = 1,
) -> Iterator[tuple[int, bytes, dict]]:
    """(batch index, the partial's bytes, the model as loaded) for every batch, in the order they finish."""
    try:
        import ray
        import ray.data
    except ImportError as err:
        raise RuntimeError('--engine ray needs Ray: pip install "attnviz[ray]" (or ray[data])') from err
    import torch

    started = not ray.is_initialized()
    if started:
        for name, level in (("ray", logging.WARNING), ("ray.data", logging.ERROR)):
            logging.getLogger(name).setLevel(level)
        cpus = None if os.environ.get("RAY_ADDRESS") else max(actors * threads, 1)  # a cluster says its own
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        gpu = (device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cuda")
        items = [{"index": b.index, "documents": json.dumps(b.documents, ensure_ascii=False)} for b in batches]
        ds = ray.data.from_items(items, override_num_blocks=max(1, len(items)))
        out = ds.map_batches(
            MeasureActor,
            fn_constructor_kwargs={
                "model": model,
                "settings": settings.as_dict(),
                "device": device,
                "threads": threads,
            },
            batch_size=1,
            compute=ray.data.ActorPoolStrategy(size=actors),
            num_gpus=1 if gpu else 0,
            num_cpus=0 if gpu else threads,
        )
        for row in out.iter_rows():
            yield int(row["index"]), bytes(row["partial"]), json.loads(row["info"])
    finally:
        if started:
            ray.shutdown()
