"""AppTest of the overview page: it runs on the bundled models and sends what the engines computed."""

import json

import numpy as np
import pytest
from apptest import _charts, _maps, _ok, _overview
from conftest import SENTENCE
from plotly_data import array


def test_overview_page_grid_table_and_rollout(bundled_hf):
    from attnviz.analysis import head_stats, rollout

    at = _overview(stat="prev", layer="2", token="11", flow="true")
    _ok(at)
    grid, rolled, bars = _charts(at)
    r = bundled_hf.run(bundled_hf.encode(SENTENCE))["self"]
    assert r.source.special == (True,) + (False,) * 14 + (True,)
    expected = head_stats.head_stats(r)["prev"].numpy()
    assert np.allclose(array(grid["data"][0]["z"]), expected, atol=1e-5)
    assert grid["data"][0]["colorbar"]["title"]["text"] == "on previous"  # it said "prev", the code's key
    assert set(head_stats.SHORT) == set(head_stats.NAMES) and max(map(len, head_stats.SHORT.values())) <= 12
    assert len(at.dataframe) == 1 and len(at.dataframe[0].value) == 72
    assert list(at.dataframe[0].value.columns) == ["layer", "head", "label", *head_stats.STATS]  # BERT: every one
    shown = json.loads(at.dataframe[0].proto.columns)  # as drawn: the label's column wide, 4 decimals each
    assert shown["label"]["width"] == "medium"
    assert all(shown[k]["type_config"]["format"] == "%.4f" for k in head_stats.STATS)
    offered = at.selectbox[0].options
    assert "share on [CLS]" in offered and "share on [SEP]" in offered
    assert not any("learned sink" in o for o in offered)  # BERT has none: not offered
    assert [d["type"] for d in rolled["data"]] == ["heatmap"] * 3  # raw, rollout, flow
    assert not any(np.isnan(array(d["z"])).any() for d in rolled["data"])  # BERT masks nothing
    assert np.allclose(array(rolled["data"][1]["z"]), rollout.rollout(r)[1].numpy(), atol=1e-5)
    assert np.allclose(array(bars["data"][0]["y"]), rollout.rollout(r)[1][10].numpy(), atol=1e-5)  # "it"


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_overview_corpus_average_equals_the_mean_over_the_corpus(bundled_hf):
    from attnviz.analysis import head_stats

    at = _overview(corpus="true", stat="entropy")
    _ok(at)
    per_text = [head_stats.head_stats(bundled_hf.run(bundled_hf.encode(text))["self"]) for text in head_stats.CORPUS]
    expected = head_stats.average(per_text)["entropy"].numpy()
    assert np.allclose(array(_charts(at)[0]["data"][0]["z"]), expected, atol=1e-5)


def test_a_learned_sink_in_the_url_of_a_model_without_one_falls_back_to_entropy():
    """BERT's menu offered gpt-oss's "share on the learned sink", and choosing it failed the page (no such
    statistic)."""
    at = _overview(stat="sink")
    _ok(at)
    assert at.selectbox[0].value == "entropy" and not at.error


def test_the_caption_names_each_one_character_punctuation_mark():
    """‘'’ alone was hard to read on a projector: a one-character mark is named too."""
    at = _overview()
    _ok(at)
    caption = " ".join(c.value for c in at.caption)
    assert "all Unicode punctuation: ‘'’ (apostrophe), ‘\\.’ (full stop)." in caption, caption


def test_overview_computes_flow_only_when_asked():
    at = _overview()
    _ok(at)
    assert [d["type"] for d in _charts(at)[1]["data"]] == ["heatmap"] * 2  # raw and rollout


@pytest.mark.slow  # SmolLM2
def test_a_decoders_overview_calls_its_first_token_heads_sinks_and_none_cls(smollm2_hf):
    from attnviz.analysis import head_stats

    at = _overview(model="smollm2", backend="hf", stat="first")
    _ok(at)
    shown = {str(t) for row in _charts(at)[0]["data"][0]["text"] for t in row}
    r = smollm2_hf.run(smollm2_hf.encode(SENTENCE))["causal"]
    named = {lab for row in head_stats.labels(r.stats(), head_stats.uniform_entropy(r), "causal") for lab in row}
    assert "sink" in named and "[CLS]" not in named and "first-token" not in named
    assert not any("[CLS]" in t or "first-token" in t for t in shown) and any("sink" in t for t in shown), shown
    # no [CLS] and no [SEP] in a decoder's text: neither is offered nor a column of zeros in the table
    offered = at.selectbox[0].options
    assert "share on [CLS]" not in offered and "share on [SEP]" not in offered and "share on itself" in offered
    columns = list(at.dataframe[0].value.columns)
    assert not {"cls", "sep", "next"} & set(columns) and {"first", "prev", "punct"} <= set(columns), columns
    assert "share on the next token" not in offered  # the causal mask hides it: 0 by definition
    caption = " ".join(c.value for c in at.caption)
    assert (
        "a head is previous-token, self or sink when more than" in caption  # never next-token or [SEP] here
        and "judged on the attention it gives to the other tokens" in caption
        and "count in no statistic" in caption
    )
    future = np.triu(np.ones((len(r.target_tokens),) * 2, dtype=bool), 1)  # grey (NaN) on raw and rollout alike
    raw, rolled = (array(d["z"]) for d in _maps(_charts(at)[1]))
    assert np.array_equal(np.isnan(raw), future) and np.array_equal(np.isnan(rolled), future)
    assert np.allclose(np.nansum(rolled, axis=1), 1, atol=1e-4)


@pytest.mark.slow  # builds and loads a tiny model: about 5 s
def test_a_model_with_learned_sinks_colours_its_grid_by_the_sink_s_share(tiny_gpt_oss_dir, monkeypatch):
    """gpt-oss (a tiny seeded one, offered from a model folder as an operator offers one): the Model overview offers
    "share on the learned sink", draws each head's (head_stats.sink_share of the typed text) and says what it is."""
    from attnviz.analysis import head_stats
    from attnviz.engines import registry

    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(tiny_gpt_oss_dir.parent))
    at = _overview(model=tiny_gpt_oss_dir.name, backend="hf", stat="sink")
    _ok(at)
    assert at.selectbox[0].value == "sink"
    oss = registry.load(str(tiny_gpt_oss_dir), "hf", "cpu")
    expected = head_stats.sink_share(oss.run(oss.encode(SENTENCE))["causal"])
    assert expected is not None and expected.min() > 0.01 and expected.max() < 1
    assert np.allclose(array(_charts(at)[0]["data"][0]["z"]), expected.numpy(), atol=1e-5)
    assert "learned sink in every head" in " ".join(c.value for c in at.caption)


@pytest.mark.slow  # a corpus run of the built-in sentences on the tiny gpt-oss
def test_a_corpus_average_of_a_model_with_learned_sinks_labels_no_head_and_says_why(tiny_gpt_oss_dir, monkeypatch):
    """The corpus average labelled gpt-oss's heads from the corpus's means and the typed text's sink share: two texts'
    figures in one label. A corpus run measures no sink's share: no labels, no sink colouring, and the page says so."""
    from attnviz.ui.pages import overview

    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(tiny_gpt_oss_dir.parent))
    at = _overview(model=tiny_gpt_oss_dir.name, backend="hf", stat="sink", corpus="true")
    _ok(at)
    assert [i.value for i in at.info] == [overview.SINKS_UNMEASURED]
    table = at.dataframe[0].value
    assert set(table["label"]) == {""} and "sink" not in table.columns and len(table) > 0
    grid = _charts(at)[0]
    assert np.allclose(array(grid["data"][0]["z"]).ravel(), table["entropy"].to_numpy(), atol=1e-4)  # not the sink's
    typed = _overview(model=tiny_gpt_oss_dir.name, backend="hf", stat="sink")  # the typed text: labelled, its sink
    assert not typed.info and "sink" in typed.dataframe[0].value.columns
    assert set(typed.dataframe[0].value["label"]) != {""}
