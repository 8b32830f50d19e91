"""AppTest of the compare page: it runs on the bundled models and sends what the engines computed."""

import numpy as np
import pytest
from apptest import _charts, _compare, _maps, _ok, _tokens
from conftest import SENTENCE
from plotly_data import array


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_compare_page_opens_on_a_real_models_three_kinds():
    """It opened on BERT's what-ifs ("A what-if, not a model"): now on a trained model's own self, masked and cross
    attention, with no what-if warning; BERT's what-ifs on the sidebar's sentence are one click away."""
    at = _compare()
    _ok(at)
    assert at.radio(key="cmp.source").value == "dates"
    assert len(_maps(_charts(at)[0])) == 3 and not at.warning
    at.radio(key="cmp.source").set_value("bert").run()
    assert "animal ·3" in _charts(at)[0]["data"][0]["x"]  # the sentence the sidebar shows


def test_compare_page_with_the_date_model():
    at = _compare(source="dates")
    _ok(at)
    assert any("→ **2026\\-11\\-22**" in m.value for m in at.markdown)  # escaped: the model's output is text
    data = _maps(_charts(at)[0])
    assert len(data) == 3
    causal = array(data[1]["z"])
    assert np.isnan(causal[np.triu_indices(causal.shape[0], 1)]).all()  # the mask is drawn as masked
    (grey,) = (d for d in _charts(at)[0]["data"] if d.get("name") == "masked")  # grey over the causal panel only
    assert np.array_equal(array(grey["z"]) == 1, np.isnan(causal)) and grey["xaxis"] == data[1]["xaxis"]
    cross = array(data[2]["z"])
    assert cross.shape[0] != cross.shape[1] and np.allclose(cross.sum(-1), 1.0, atol=1e-5)
    assert len(at.get("download_button")) == 4


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_compare_page_with_bert_what_ifs():
    at = _compare(source="dates")
    at.radio(key="cmp.source").set_value("bert").run()
    _ok(at)
    notes = [w.value for w in at.warning]
    assert any("never trained with a causal mask" in n and "from layer 2 on" in n for n in notes)
    assert any("each sentence is run through BERT alone" in n for n in notes)
    charts = _charts(at)
    bi, ca, diff = (array(d["z"]) for d in _maps(charts[0]))
    assert np.isnan(ca[0, 1])  # the causal panel draws its mask as masked
    assert np.allclose(diff, np.nan_to_num(ca) - bi, atol=1e-5)  # masked cells count as 0 in the difference
    assert np.allclose(np.nansum(ca, -1), 1.0, atol=1e-5)
    cross = array(charts[1]["data"][0]["z"])
    assert cross.shape[0] != cross.shape[1]


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_compare_page_with_a_hub_encoder_decoder(tiny_marian_dir, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(tiny_marian_dir.parent))
    at = _compare(source="hub", hub=str(tiny_marian_dir), target="die katze")
    _ok(at)
    data = _maps(_charts(at)[0])
    cross = array(data[2]["z"])
    assert len(data) == 3 and cross.shape == (5, 16)  # [PAD] + "die katze" pieces x the sidebar text's 16 tokens
    assert _tokens(data[2]["x"])[:3] == ["[CLS]", "the", "animal"]


@pytest.mark.slow  # loads SmolLM2 (about 20 s the first time)
def test_the_compare_page_s_masked_panel_is_smollm2_s(smollm2_hf, bundled_hf):
    at = _compare(model="smollm2", backend="hf")
    _ok(at)
    assert at.radio(key="cmp.source").value == "llm"  # the default when the sidebar shows SmolLM2
    bert, llm = (array(d["z"]) for d in _maps(_charts(at)[0]))
    r = smollm2_hf.run(smollm2_hf.encode(SENTENCE))["causal"]
    assert np.isnan(llm[np.triu_indices(llm.shape[0], 1)]).all()  # the mask drawn as masked
    assert np.allclose(np.nan_to_num(llm), r.weights[-1, 0].numpy(), atol=1e-6)  # last layer, head 1
    assert np.allclose(bert, bundled_hf.run(bundled_hf.encode(SENTENCE))["self"].weights[-1, 0].numpy(), atol=1e-6)
