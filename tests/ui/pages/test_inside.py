"""AppTest of the inside page: it runs on the bundled models and sends what the engines computed."""

import numpy as np
import pytest
from apptest import APP, _charts, _ok
from plotly_data import array
from streamlit.testing.v1 import AppTest


@pytest.mark.slow  # every step of a layer, on two models
def test_inside_page_runs_and_shows_the_shapes():
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("app_pages/inside.py").run()
    _ok(at)
    code = at.code[0].value
    assert "(1, 16, 384)" in code and "(1, 12, 16, 32)" in code
    assert len(_charts(at)) >= 10
    bars = {c["layout"]["title"]["text"]: c["data"][0]["colorbar"]["title"]["text"] for c in _charts(at)[:7]}
    assert bars["mask (1 = may attend)"] == "may attend" and bars["softmax: attention weights"] == "weight"
    at.select_slider(key="inside.d_model").set_value(64).run()
    at.select_slider(key="inside.heads").set_value(4).run()
    _ok(at)
    assert any("64 / 4 = **16**" in m.value for m in at.markdown)
    titles = [c["layout"].get("title", {}).get("text") for c in _charts(at)]
    assert "Layer 1: every head (random weights: d_model 64, 4 heads)" in titles  # not taken for the model's layer 1
    assert any("O(N²·d + N·d²)" in m.value for m in at.markdown)
    # the weights' growth is exactly N²: their line hides the dashed N² line, and the caption says so
    assert any("weights grew 1024× (N², so their line hides the ∝ N² line)" in c.value for c in at.caption)
    assert not any("never trained with a causal mask" in c.value for c in at.caption)
    at.toggle(key="inside.causal").set_value(True).run()
    assert any("never trained with a causal mask" in c.value for c in at.caption)


def test_inside_page_traces_any_engines_whole_pass():
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("app_pages/inside.py").run()
    _ok(at)
    trace = next(c.value for c in at.code if "[BertSelfAttention]" in c.value)
    assert "(1, 12, 16, 16)" in trace and "encoder.layer.0.intermediate.dense [Linear]" in trace
    assert any("encoder.layer.1 … encoder.layer.5 repeat" in c.value.replace("\\", "") for c in at.caption)


def test_the_intro_names_whose_weights_run(tiny_llama_dir):
    from attnviz.engines import registry
    from attnviz.ui.pages.inside import model_name

    assert model_name(registry.load("default", "scratch", "cpu")) == "The bundled BERT"
    llama = registry.load(str(tiny_llama_dir), "scratch", "cpu")
    assert model_name(llama).startswith("The Llama model ") and "BERT" not in model_name(llama)


def test_a_decoder_s_parts_are_said_from_its_steps(tiny_llama_dir):
    """The paragraph on what a decoder's layer adds names what its steps hold, and nothing they do not."""
    from attnviz.engines import registry
    from attnviz.ui.pages.inside import decoder_parts

    llama = registry.load(str(tiny_llama_dir), "scratch", "cpu")
    _, steps = llama.steps("The animal didn't cross the street because it was too tired.", 0)
    said = decoder_parts(llama, steps, 0)
    assert said.startswith("A Llama layer adds three things to that") and "**RMSNorm** scales" in said
    assert "**grouped-query attention**: 6 query heads share 2 key/value heads, 3 to each" in said
    assert not any(part in said for part in ("sliding window", "sink", "soft-capping", "of their own"))


def test_a_phone_s_shape_trail_keeps_every_shape_in_its_width(tiny_llama_dir):
    """A phone's code block shows about 38 characters: there each shape stands under its step, not in a column past
    the edge; elsewhere the shapes form one column."""
    from attnviz.engines import registry
    from attnviz.ui.pages.inside import shape_trail

    llama = registry.load(str(tiny_llama_dir), "scratch", "cpu")
    _, steps = llama.steps("The animal didn't cross the street because it was too tired.", 0)
    phone, wide = shape_trail(steps, 1, phone=True), shape_trail(steps, 1)
    n = steps.scores.shape[-1]
    assert max(map(len, phone.splitlines())) <= 38 and f"    (1, 6, {n}, {n})" in phone.splitlines()
    assert "each K head is read by 3 Q heads" in phone and phone.endswith("show head 2)")
    columns = {line.index("(1,") for line in wide.splitlines() if "(1," in line}
    assert len(columns) == 1 and len(wide.splitlines()) == len(steps.trace()) + 1


def test_a_text_past_the_step_maps_bound_is_refused_with_where_to_go(tiny_long_llama_dir, monkeypatch):
    """The step-by-step maps have a row for every token: past 512 tokens (at 1,300 Gemma 3 tokens they were 70 MB of
    figures, to every follower) the page says where long texts go, on the Inside and Masks pages alike; at 512 it
    draws them."""
    from attnviz.engines import registry

    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(tiny_long_llama_dir.parent))
    engine = registry.load(str(tiny_long_llama_dir), "hf", "cpu")
    words = ("the animal did not cross the street because it was tired " * 60).split()
    specials = len(engine.encode(" ".join(words[:10])).ids) - 10  # one token a word here, and the tokenizer's own
    for n, page in ((513, "inside"), (513, "masks"), (512, "inside")):
        text = " ".join(words[: n - specials])
        assert len(engine.encode(text).ids) == n
        at = AppTest.from_file(APP, default_timeout=120)
        at.query_params["model"], at.query_params["text"] = str(tiny_long_llama_dir), text
        at.switch_page(f"app_pages/{page}.py").run()
        _ok(at)
        refused = [i.value for i in at.info if "up to 512 tokens on this model" in i.value]
        assert bool(refused) == (n > 512), (n, page)


def test_every_map_of_a_decoders_parts_names_what_runs_along_its_columns(tiny_llama_dir, monkeypatch):
    """RMSNorm(X) had neither column labels nor an axis title (the maps beside it say "d1 … d12, too many to label")."""
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(tiny_llama_dir.parent))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["model"] = str(tiny_llama_dir)
    at.switch_page("app_pages/inside.py").run()
    _ok(at)
    for chart in _charts(at):
        x = chart["layout"].get("xaxis", {})
        named = x.get("showticklabels", True) or (x.get("title") or {}).get("text")
        assert named, chart["layout"]["title"]["text"]
    norm = next(c for c in _charts(at) if c["layout"]["title"]["text"].endswith("Norm(X)"))
    assert norm["layout"]["xaxis"]["title"]["text"].startswith("d1 … d")
    weights = array(next(c for c in _charts(at) if c["layout"]["title"]["text"].startswith("softmax"))["data"][0]["z"])
    n = weights.shape[0]  # a decoder's future is grey (NaN) on the weights as on the scores, not weight 0
    assert np.array_equal(np.isnan(weights), np.triu(np.ones((n, n), dtype=bool), 1))
    assert np.allclose(np.nansum(weights, axis=1), 1, atol=1e-5)
