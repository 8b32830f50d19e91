"""AppTest of the Corpus page: it lists the finished runs, draws a run's grid, histogram and examples from its
tables, starts a small run as admitted work, and places a head's queries and keys."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from apptest import APP, _charts, _ok
from plotly_data import array
from streamlit.testing.v1 import AppTest

from attnviz import api, escape
from attnviz.analysis import head_stats

RUNS = Path(os.environ["ATTNVIZ_CORPUS_DIR"])


@pytest.fixture(scope="module")
def run():
    """A finished BERT run on the built-in sentences, in the folder the page reads."""
    return api.corpus(list(head_stats.CORPUS), "default", RUNS / "sentences-default", window=64)


def _page(**params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    for k, v in params.items():
        at.query_params[k] = v
    return at.switch_page("app_pages/corpora.py").run()


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_the_page_draws_a_runs_grid_histogram_and_examples_from_its_tables(run):
    at = _page(run=run.folder.name, stat="prev", layer="1", head="3")
    _ok(at)
    grid, hist = _charts(at)[:2]
    assert np.allclose(array(grid["data"][0]["z"]), run.grid("prev"), atol=1e-6)
    assert grid["data"][0]["colorbar"]["title"]["text"] == "on previous (mean)"  # was "prev (mean)": the code's key
    heads = run.heads
    row = heads[(heads["stat"] == "prev") & (heads["layer"] == 0) & (heads["head"] == 2)].iloc[0]
    assert array(hist["data"][0]["y"]).tolist() == list(row["hist"])
    top = run.examples
    top = top[(top["stat"] == "prev") & (top["layer"] == 0) & (top["head"] == 2) & (top["kind"] == "top")]
    shown = [m.value for m in at.markdown if m.value.startswith("**#1**")]
    assert shown and f"{top.sort_values('rank').iloc[0]['value']:.3f}" in shown[0]
    assert any(":blue-background[" in m.value for m in at.markdown)  # the query marked in its text
    offered = at.selectbox(key="co.stat").options  # BERT's run: every statistic, [CLS] and [SEP] too
    assert all(head_stats.NAMES[k] in offered for k in head_stats.STATS), offered
    # every head labelled by the Model overview's rule from the run's means: a run measures no learned sink's share,
    # and the page, asking for that too (head_stats.NAMES has it), said of every run "the heads are not labelled"
    kind, n_tokens = run.manifest["kind"], run.texts["n_tokens"]
    uniform = sum(head_stats.uniform_entropy_of(n, kind) for n in n_tokens) / len(n_tokens)
    want = head_stats.labels({s: run.grid(s) for s in head_stats.STATS}, uniform, kind)
    assert grid["data"][0]["customdata"] == want and {"[CLS]", "previous-token"} <= {x for r in want for x in r}
    assert not any("not labelled" in c.value for c in at.caption) and run.manifest["sinks"] is False


def test_the_url_cannot_name_a_folder_that_is_not_a_listed_run(run):
    at = _page(run="../../etc", stat="nonsense", layer="99")
    _ok(at)
    assert at.selectbox(key="co.run").value in {r.folder.name for r in api.corpus_runs()}
    assert at.selectbox(key="co.stat").value == "entropy" and at.number_input(key="co.layer").value == 1


@pytest.mark.slow  # a corpus run
def test_the_run_shown_first_is_the_sidebar_model_s_newest_not_another_model_s(run, tiny_llama_dir):
    """The page opened on the newest run of any model: with BERT in the sidebar, a Gemma 3 run's grid, whose only
    sign was the run's name in the box."""
    newer = api.corpus(list(head_stats.CORPUS[:2]), str(tiny_llama_dir), RUNS / "sentences-tiny-newer", window=16)
    assert newer.manifest["finished"] > run.manifest["finished"]  # the premise: another model's run is newest
    finished = api.corpus_runs()
    assert finished[0].manifest["model"] != "default"
    at = _page()
    _ok(at)
    newest_own = next(r for r in finished if r.manifest["model"] == "default")
    assert at.selectbox(key="co.run").value == newest_own.folder.name
    at = _page(run=newer.folder.name)  # a link still names any run
    assert at.selectbox(key="co.run").value == newer.folder.name


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_heads_query_key_space_is_placed_on_demand_with_its_faithfulness(run):
    at = _page(run=run.folder.name, layer="2", head="4")
    assert len(_charts(at)) == 2  # grid and histogram: nothing placed until asked
    at.button(key="co.qkplot.button").click().run()
    _ok(at)
    scatter = _charts(at)[-1]
    assert [d["name"] for d in scatter["data"]] == ["queries", "keys"]
    assert any("Spearman" in c.value for c in at.caption)
    assert any("Position explains" in c.value and "of the keys'" in c.value for c in at.caption)  # over many texts
    assert not at.radio  # BERT adds its positions: no rotary turn to take out


def test_the_run_speed_said_is_this_servers_last_run_else_what_was_measured_never_a_guess():
    """The caption said "about 15 paragraphs a second on this server's CPU" for BERT whatever the server, where the
    page's own run measured 7.5 (bench/RESULTS.md), and named no figure for Gemma 3."""
    from attnviz.corpus.run import CorpusRun
    from attnviz.ui.pages import corpora

    def made(model, name, docs, seconds):
        return CorpusRun(Path("x"), {"model": model, "corpus": {"name": name, "documents": docs}, "seconds": seconds})

    said = corpora.speed([], "gemma3")
    for model, took in corpora.MEASURED_S.items():  # every bundled model's measured figure, first the one asked
        assert f"{took:.0f} s on {api.shown_name(model)}" in said and took > 0
    assert said.index("Gemma 3") < said.index("BERT") and "has not run Gemma 3 270M on the corpus" in said
    assert "was not measured" not in said and "was not measured" in corpora.speed([], "someone/model")
    runs = [made("smollm2", "builtin-200", 200, 80.0), made("default", "built-in sentences", 8, 0.2)]
    runs.append(made("default", "builtin-50", 50, 4.0))
    assert corpora.speed(runs, "default") == (
        "This server's last run of the bundled BERT took 4.0 s for 50 paragraphs (12.5 a second)."
    )  # the Model overview's sentences are not paragraphs: not counted
    assert "took 80 s for 200 paragraphs (2.5 a second)" in corpora.speed(runs, "smollm2")
    # a run of a few short texts took less than a second: said as such, not "0 s"
    assert [corpora._seconds(t) for t in (0.04, 0.4, 9.9, 9.96, 80.4, 1234.0)] == [
        "0.0 s",
        "0.4 s",
        "9.9 s",
        "10 s",
        "80 s",
        "1,234 s",
    ]


@pytest.mark.slow  # a corpus run
def test_a_small_run_on_the_builtin_corpus_starts_from_the_page(tmp_path, monkeypatch):
    from attnviz.ui.pages import corpora

    shutil.rmtree(RUNS / "x", ignore_errors=True)
    at = _page()
    at.select_slider(key="co.size").set_value(50).run()
    at.button(key="co.start").click().run()
    _ok(at)
    made = [r for r in api.corpus_runs() if r.manifest["corpus"]["name"] == "builtin-50"]
    assert made and made[0].manifest["corpus"]["documents"] == 50
    assert at.selectbox(key="co.run").value == made[0].folder.name
    took = corpora._seconds(made[0].manifest["seconds"])  # "0.4 s" under 10 s, never "0 s"
    said = [c.value for c in at.caption]
    assert any(c.endswith(f", {took}.") for c in said), (took, said)  # the run picker says what it took
    # what the next one may take (that caption is escaped markdown: "2\\.8 s")
    assert any(f"took {escape.md(took)} for 50 paragraphs" in c for c in said), (took, said)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_decoders_run_does_not_offer_the_next_token_share(tiny_llama_dir):
    """A decoder's query never sees the token after it: the page offered its next-token share (0 everywhere, top
    examples at 0.000, a colour bar to -0.4). A link that asks for it gets the default statistic."""
    decoder = api.corpus(list(head_stats.CORPUS[:4]), str(tiny_llama_dir), RUNS / "sentences-tiny-llama", window=32)
    assert decoder.manifest["kind"] == "causal"
    at = _page(run=decoder.folder.name, stat="next")
    _ok(at)
    colour = at.selectbox(key="co.stat")
    offered = colour.options  # as the page shows them
    assert head_stats.NAMES["next"] not in offered and head_stats.NAMES["prev"] in offered, offered
    assert head_stats.NAMES["cls"] not in offered  # nor [CLS]: a decoder's first token is its sink ("first")
    # [SEP] where a window had a special token after its first (this tiny model reads with BERT's tokenizer)
    assert (head_stats.NAMES["sep"] in offered) == bool((decoder.grid("sep") > 0).any()), offered
    assert colour.value == "entropy"


@pytest.mark.slow  # a corpus run
def test_a_run_of_a_model_with_learned_sinks_says_why_its_heads_are_not_labelled(tiny_gpt_oss_dir):
    """gpt-oss's learned sinks take a share of every row that a corpus run does not measure (the Model overview's
    sink_share is a text's): a label would leave it out, so the page labels no head and says why."""
    oss = api.corpus(list(head_stats.CORPUS[:4]), str(tiny_gpt_oss_dir), RUNS / "sentences-oss", window=32)
    assert oss.manifest["sinks"] is True and oss.manifest["kind"] == "causal"
    at = _page(run=oss.folder.name)
    _ok(at)
    assert {x for row in _charts(at)[0]["data"][0]["customdata"] for x in row} == {""}
    assert any("learned sinks take a share of every row" in c.value for c in at.caption)


@pytest.mark.slow  # a corpus run
def test_a_run_of_some_statistics_offers_those_and_labels_no_head():
    """A run made with statistics=[...] holds those only: the page offers them, a link naming another gets the
    first of them, and the grid's cells carry no label (a label needs every statistic)."""
    some = api.corpus(
        list(head_stats.CORPUS[:4]), "default", RUNS / "sentences-some", window=32, statistics=["prev", "self"]
    )
    at = _page(run=some.folder.name, stat="entropy")
    _ok(at)
    colour = at.selectbox(key="co.stat")
    assert colour.options == [head_stats.NAMES["prev"], head_stats.NAMES["self"]] and colour.value == "prev"
    grid = _charts(at)[0]
    assert np.allclose(array(grid["data"][0]["z"]), some.grid("prev"), atol=1e-6)
    assert any("computed prev, self only" in c.value for c in at.caption)


@pytest.mark.slow  # a corpus run
def test_a_statistic_constant_over_the_corpus_shows_a_sentence_not_examples():
    """Texts without punctuation: every query's share on punctuation is 0, and the page listed "top examples" at
    0.000 anyway (SmolLM2's share on [CLS] was the case found; it is no longer offered). Now it says so; a varying
    statistic still shows its examples, and the caption says how equal values are ranked."""
    plain = ["the cat sat on the mat", "a dog ran home in the rain", "we read the book under a tree"]
    unpunctuated = api.corpus(plain, "default", RUNS / "sentences-unpunctuated", window=24)
    ex = unpunctuated.examples
    punct = ex[(ex["stat"] == "punct") & (ex["layer"] == 0) & (ex["head"] == 0)]
    assert len(punct) and punct["value"].max() - punct["value"].min() <= 1e-6  # constant: the premise
    at = _page(run=unpunctuated.folder.name, stat="punct", layer="1", head="1")
    _ok(at)
    assert at.selectbox(key="co.stat").value == "punct"
    assert any("has the same" in i.value and "no examples to show" in i.value for i in at.info)
    assert not [m.value for m in at.markdown if m.value.startswith("**#1**")]
    at = _page(run=unpunctuated.folder.name, stat="entropy", layer="1", head="1")
    _ok(at)
    assert [m.value for m in at.markdown if m.value.startswith("**#1**")]
    assert any("one per document in turn" in c.value for c in at.caption)
