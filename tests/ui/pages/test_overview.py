"""AppTest of the overview page: it runs on the bundled models and sends what the engines computed."""

import numpy as np
import pytest
from apptest import _charts, _ok, _overview
from conftest import SENTENCE
from plotly_data import array


def test_overview_page_grid_table_and_rollout(bundled_hf):
    from attnviz.analysis import head_stats, rollout

    at = _overview(stat="prev", layer="2", token="11", flow="true")
    _ok(at)
    grid, rolled, bars = _charts(at)
    r = bundled_hf.run(SENTENCE)["self"]
    assert r.source.special == (True,) + (False,) * 14 + (True,)
    expected = head_stats.head_stats(r)["prev"].numpy()
    assert np.allclose(array(grid["data"][0]["z"]), expected, atol=1e-5)
    assert len(at.dataframe) == 1 and len(at.dataframe[0].value) == 72
    assert [d["type"] for d in rolled["data"]] == ["heatmap"] * 3  # raw, rollout, flow
    assert np.allclose(array(rolled["data"][1]["z"]), rollout.rollout(r)[1].numpy(), atol=1e-5)
    assert np.allclose(array(bars["data"][0]["y"]), rollout.rollout(r)[1][10].numpy(), atol=1e-5)  # "it"


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_overview_corpus_average_equals_the_mean_over_the_corpus(bundled_hf):
    from attnviz.analysis import head_stats

    at = _overview(corpus="true", stat="entropy")
    _ok(at)
    per_text = [head_stats.head_stats(bundled_hf.run(text)["self"]) for text in head_stats.CORPUS]
    expected = head_stats.average(per_text)["entropy"].numpy()
    assert np.allclose(array(_charts(at)[0]["data"][0]["z"]), expected, atol=1e-5)


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
    r = smollm2_hf.run(SENTENCE)["causal"]
    named = {lab for row in head_stats.labels(r.stats(), head_stats.uniform_entropy(r), "causal") for lab in row}
    assert "sink" in named and "[CLS]" not in named and "first-token" not in named
    assert not any("[CLS]" in t or "first-token" in t for t in shown) and any("sink" in t for t in shown), shown
    caption = " ".join(c.value for c in at.caption)
    assert (
        "self or sink when more than" in caption
        and "judged on the attention it gives to the other tokens" in caption
        and "count in no statistic" in caption
    )
