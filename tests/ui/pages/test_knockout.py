"""AppTest of the Knock out and patch page, on a tiny Llama (fast) and the message BERT gets."""

import json

import pytest
from apptest import APP, _charts, _ok
from plotly_data import array
from streamlit.testing.v1 import AppTest

from attnviz.engines import registry
from attnviz.interventions import ablation, patching

TEXT = "When Anna and Peter went to the market, Peter handed the basket to"


def _page(**params):
    at = AppTest.from_file(APP, default_timeout=180)
    for k, v in params.items():
        at.query_params[k] = v
    return at.switch_page("app_pages/knockout.py").run()


@pytest.fixture()
def tiny(tiny_llama_dir, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(tiny_llama_dir.parent))
    return str(tiny_llama_dir), registry.load(str(tiny_llama_dir), "hf", "cpu")


def test_knocking_a_head_out_shows_the_loss_before_and_after_and_the_grid_on_request(tiny):
    folder, engine = tiny
    at = _page(model=folder, text=TEXT)
    _ok(at)
    expected = ablation.ablate(engine, TEXT, {0: [0]}, "zero")
    loss = _charts(at)[0]["data"]
    assert abs(array(loss[1]["y"]) - expected.loss_after.numpy()).max() < 1e-4
    assert loss[0]["x"][0] == 2 and loss[0]["x"][-1] == len(expected.ids)  # 1-based position of the token predicted
    assert _charts(at)[1]["layout"]["title"]["text"] == "Layer 2: every head (L1H1 knocked out)"  # not the clean run
    table = at.dataframe[1]  # the next tokens after: every probability to 4 decimals, as drawn
    assert json.loads(table.proto.columns)["probability"]["type_config"]["format"] == "%.4f"
    assert abs(table.value["probability"].sum() - sum(t["p"] for t in expected.top_after)) < 1e-6
    names = at.multiselect(key="ko.names")
    names.set_value(names.options[:4]).run()  # four heads of layer 1: the title counts them, not names them all
    _ok(at)
    assert _charts(at)[1]["layout"]["title"]["text"] == "Layer 2: every head (4 heads knocked out)"
    at.button(key="ko.grid").click().run()
    _ok(at)
    assert [b.key for b in at.button if b.key == "ko.grid"] == []  # pressed: the grid in its place, not under it
    grid, _ = ablation.importance(engine, TEXT, "zero")
    assert abs(array(_charts(at)[2]["data"][0]["z"]) - grid.numpy()).max() < 1e-4


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_patching_a_pair_of_one_s_own_shows_the_share_restored(tiny):
    folder, engine = tiny
    at = _page(model=folder, tab="patch")
    at.selectbox(key="pa.pair").set_value("your own pair").run()
    at.text_input(key="pa.answer").set_value("anna").run()
    at.text_input(key="pa.wrong").set_value("peter").run()
    at.button(key="pa.run").click().run()
    _ok(at)
    clean, corrupt = at.text_input(key="pa.clean").value, at.text_input(key="pa.corrupt").value
    expected = patching.patch(engine, clean, corrupt, "anna", "peter")
    # a model no one measured gets no figures of another's (they named SmolLM2's whatever the model)
    assert any("depends on the model's tokenizer" in c.value for c in at.caption)
    assert not any("Measured on" in c.value for c in at.caption)
    if expected.restored is None:  # a random model: it does not get the pair right both ways, and the page says so
        assert "undefined" in at.info[0].value and not _charts(at)
    else:
        assert abs(array(_charts(at)[0]["data"][0]["z"]) - expected.restored.numpy()).max() < 1e-4


def test_an_empty_text_from_a_link_is_a_message_not_a_traceback(tiny):
    """A shared link's ?text= empty: the knock-out section encodes the sidebar's text (this run's request, once) and
    says what is wrong; it raised ValueError into "Something went wrong" (scripts/hostile.py urls, on Gemma 3)."""
    folder, _ = tiny
    at = _page(model=folder, text="")
    assert not at.exception and not at.error
    assert any("The text is empty" in w.value for w in at.warning)


def test_a_pair_of_different_lengths_is_a_message_not_a_traceback(tiny):
    folder, _ = tiny
    at = _page(model=folder, tab="patch")
    at.selectbox(key="pa.pair").set_value("your own pair").run()
    at.text_input(key="pa.corrupt").set_value("When Anna went to the market, Anna handed the basket to").run()
    at.text_input(key="pa.answer").set_value("anna").run()
    at.text_input(key="pa.wrong").set_value("peter").run()
    at.button(key="pa.run").click().run()
    assert not at.exception and "same length in tokens" in at.warning[0].value


@pytest.mark.slow  # loads SmolLM2
def test_bert_is_told_the_page_needs_a_decoder_and_one_click_shows_it_with_smollm2():
    at = _page()
    _ok(at)
    assert "decoder" in at.info[0].value and "Gemma 3 270M" in at.info[0].value and not _charts(at)
    assert at.button(key="decoder.gemma3").label == "With Gemma 3 270M"  # the other bundled decoder, one click away
    at.button(key="decoder.smollm2").click().run()
    _ok(at)
    assert at.sidebar.selectbox(key="sb.choice").value == "smollm2"
    assert at.query_params["model"] == "smollm2"  # the URL says so too: a shared link opens SmolLM2
    assert not at.info or "decoder" not in at.info[0].value
    assert _charts(at)[0]["data"][1]["name"]  # the loss before and after, drawn for SmolLM2
