"""AppTest of the generate page: it runs on the bundled models and sends what the engines computed."""

import html
import io
import json

import numpy as np
import pandas as pd
import pytest
from apptest import APP, _charts, _ok
from plotly_data import array
from streamlit.testing.v1 import AppTest


@pytest.mark.slow  # SmolLM2 writes
def test_the_generate_page_writes_and_shows_every_step(smollm2_hf):
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["model"], at.query_params["backend"] = "smollm2", "hf"
    at.switch_page("app_pages/generate.py").run()
    at.button(key="gen.go").click().run()
    _ok(at)
    assert any("Paris" in m.value for m in at.markdown)
    gen = smollm2_hf.generate("What is the capital of France?", 24)
    steps, heads = _charts(at)
    z = array(steps["data"][0]["z"])
    assert z.shape == (len(gen.written), len(gen.result.source))
    assert np.allclose(np.nan_to_num(z), gen.steps[0, 0].numpy(), atol=1e-6)  # layer 1, head 1
    assert steps["data"][0]["y"][0].startswith("step 1: ") and not any(" ·" in y for y in steps["data"][0]["y"])
    rows = [html.unescape(y) for y in steps["data"][0]["y"]]
    assert rows == [f"step {i + 1}: {t}" for i, t in enumerate(gen.written)]
    labels = "".join(steps["data"][0]["y"] + steps["data"][0]["x"] + heads["data"][0]["x"])
    assert "Paris" in gen.written and not set("ĠĊ▁") & set(labels)  # text, not byte-level pieces
    assert array(heads["data"][0]["z"]).shape == (30 * 9, gen.prompt_tokens)  # step 1 across every head
    assert at.toggle(key="gen.chat").value and any("chat template's included" in c.value for c in at.caption)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_model_with_no_chat_template_offers_none_and_says_its_prompt_went_as_written(tiny_llama_dir, monkeypatch):
    """Gemma 3 270M (a base model) has no chat template: 'As a chat message' was on and did nothing, and the caption
    said the template was included."""
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(tiny_llama_dir.parent))
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["model"], at.query_params["backend"] = str(tiny_llama_dir), "hf"
    at.switch_page("app_pages/generate.py").run()
    _ok(at)
    chat = at.toggle(key="gen.chat.none")
    assert chat.value is False and chat.proto.disabled and "no chat template" in chat.help
    at.text_area(key="gen.prompt").set_value("a b c").run()
    at.slider(key="gen.n").set_value(3).run()
    at.button(key="gen.go").click().run()
    _ok(at)
    assert any("as written: no chat template" in c.value for c in at.caption)
    assert not any("chat template's included" in c.value for c in at.caption)


@pytest.mark.slow  # a tiny Llama writes (about a second in a full run)
def test_the_writing_shown_exports_as_png_csv_and_json_with_its_prompt_and_tokens(tiny_llama_dir, monkeypatch):
    """The Generate page had no export: a teacher could not keep what the model wrote nor where it looked."""
    from attnviz.ui import widgets

    rows = {}
    real = widgets.download_row
    monkeypatch.setattr(widgets, "download_row", lambda *a, **k: (rows.setdefault(a[0], a), real(*a, **k)))
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(tiny_llama_dir.parent))
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["model"], at.query_params["backend"] = str(tiny_llama_dir), "hf"
    at.switch_page("app_pages/generate.py").run()
    at.text_area(key="gen.prompt").set_value("a b <c>").run()
    at.slider(key="gen.n").set_value(4).run()
    at.button(key="gen.go").click().run()
    at.slider(key="gen.layer").set_value(2).run()
    _ok(at)
    assert [b.proto.label for b in at.get("download_button")] == ["PNG", "SVG", "CSV", "JSON"]
    stem, _, figure, csv, bundle = rows["attnviz_generate_L2_H1"][:5]
    steps, _ = _charts(at)
    shown = np.nan_to_num(array(steps["data"][0]["z"]))
    d = json.loads(bundle())
    assert d["prompt"] == "a b <c>" and d["manifest"]["text"] == "a b <c>" and d["manifest"]["layer"] == 2
    assert d["written_tokens"] == [html.unescape(y).split(": ", 1)[1] for y in steps["data"][0]["y"]]
    (panel,) = d["panels"]
    weights = np.array([[0.0 if w is None else w for w in row] for row in panel["weights"]])
    assert np.allclose(np.where(panel["masked"], 0.0, weights), shown, atol=1e-6)  # the map drawn, cell for cell
    assert np.allclose(weights.sum(axis=1), 1.0, atol=1e-5)  # each step's row: where that query looked, all of it
    table = pd.read_csv(io.StringIO(csv()), index_col=0)
    assert table.shape == shown.shape and np.allclose(table.to_numpy(), weights, atol=1e-6)
    assert figure("png")[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow  # loads SmolLM2 (about 20 s the first time)
def test_a_model_that_cannot_write_hands_the_generate_page_to_smollm2():
    at = AppTest.from_file(APP, default_timeout=180).run()
    at.switch_page("app_pages/generate.py").run()
    _ok(at)
    assert at.info and at.info[0].value.startswith("The bundled BERT does not write text")  # as the menu names it
