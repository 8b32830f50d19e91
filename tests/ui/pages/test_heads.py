"""AppTest of the heads page: it runs on the bundled models and sends what the engines computed."""

import numpy as np
import pytest
from apptest import _app, _charts, _maps, _ok, _tokens
from conftest import SENTENCE
from plotly_data import array


def test_heads_page_sends_one_heatmap_per_head_equal_to_the_engine(bundled_hf):
    at = _app()
    _ok(at)
    r = bundled_hf.run(bundled_hf.encode(SENTENCE))["self"]
    maps = [d for d in _charts(at)[0]["data"] if d["type"] == "heatmap"]
    assert len(maps) == 12
    for h, d in enumerate(maps):
        assert np.allclose(array(d["z"]), r.weights[0, h].numpy(), atol=1e-6)
        assert _tokens(d["x"]) == _tokens(d["y"]) == list(r.target_tokens)
    assert not any("Grey" in c.value for c in at.caption)  # an encoder hides nothing: no grey to explain


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_layer_slider_changes_the_layer(bundled_hf):
    at = _app()
    at.slider(key="heads.layer").set_value(4).run()
    _ok(at)
    z = array(_charts(at)[0]["data"][7]["z"])
    assert np.allclose(z, bundled_hf.run(bundled_hf.encode(SENTENCE))["self"].weights[3, 7].numpy(), atol=1e-6)
    assert at.query_params["layer"] == "4"  # the shareable URL follows the slider


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_hiding_specials_drops_them_and_renormalises():
    at = _app()
    at.toggle(key="heads.hide").set_value(True).run()
    _ok(at)
    d = _charts(at)[0]["data"][0]
    assert "[CLS]" not in _tokens(d["x"]) and "[SEP]" not in _tokens(d["x"]) and len(d["x"]) == 14
    assert np.allclose(array(d["z"]).sum(-1), 1.0, atol=1e-5)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_merging_word_pieces_gives_words():
    at = _app(text="The playwright was unbelievably tired.")
    at.toggle(key="heads.merge").set_value(True).run()
    _ok(at)
    toks = _tokens(_charts(at)[0]["data"][0]["x"])
    assert toks == ["[CLS]", "The", "playwright", "was", "unbelievably", "tired", ".", "[SEP]"]


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_url_state_round_trips():
    at = _app(text="A shared link for class.", layer="3", view="Head", head="5", hide="true", palette="Blues")
    _ok(at)
    assert at.text_input(key="sb.text").value == "A shared link for class."
    assert at.slider(key="heads.layer").value == 3 and at.slider(key="heads.head").value == 5
    assert at.toggle(key="heads.hide").value is True
    spec = _charts(at)[0]
    assert spec["layout"]["title"]["text"] == "Layer 3, head 5 (special tokens hidden)"
    params = {k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()}
    assert params["text"] == "A shared link for class." and params["layer"] == "3" and params["head"] == "5"
    assert params["hide"] == "true" and params["palette"] == "Blues" and params["view"] == "Head"


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_nonsense_url_values_fall_back_to_defaults():
    at = _app(layer="99", view="nope", palette="x")
    _ok(at)
    assert at.slider(key="heads.layer").value == 1


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_overview_is_one_tiled_heatmap():
    at = _app(view="Overview")
    _ok(at)
    data = _charts(at)[0]["data"]
    assert len(data) == 1 and data[0]["type"] == "heatmap"
    assert len(at.get("download_button")) == 4  # PNG, SVG, CSV, JSON of the overview


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_scratch_engine_from_the_sidebar(bundled_hf):
    at = _app(model="scratch")
    _ok(at)
    z = array(_charts(at)[0]["data"][2]["z"])
    assert np.allclose(z, bundled_hf.run(bundled_hf.encode(SENTENCE))["self"].weights[0, 2].numpy(), atol=1e-5)


@pytest.mark.parametrize("text", ["   ", "\u200b"])
def test_empty_text_gives_a_message_not_a_traceback(text):
    at = _app(text=text)
    assert not at.exception
    assert at.warning and ("empty" in at.warning[0].value or "no characters" in at.warning[0].value)


def test_a_link_to_a_model_the_server_does_not_offer_opens_the_default_with_a_notice():
    at = _app(model="no-such-owner/no-such-model-xyz")
    _ok(at)
    assert at.info and "does not offer" in at.info[0].value and "no\\-such\\-owner" in at.info[0].value
    assert len([d for d in _charts(at)[0]["data"] if d["type"] == "heatmap"]) == 12  # the default, drawn


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_an_unknown_model_typed_on_a_server_that_downloads_is_a_message(monkeypatch):
    monkeypatch.setenv("ATTNVIZ_ALLOW_DOWNLOADS", "1")  # HF_HUB_OFFLINE=1 still keeps the test offline
    at = _app(model="no-such-owner/no-such-model-xyz")
    assert not at.exception
    assert at.error and '"default"' in at.error[0].value


@pytest.mark.slow  # loads SmolLM2 (about 20 s the first time)
def test_smollm2_heads_are_its_real_causal_attention(smollm2_hf):
    at = _app(model="smollm2", backend="hf")
    _ok(at)
    maps = [d for d in _charts(at)[0]["data"] if d["type"] == "heatmap"]
    r = smollm2_hf.run(smollm2_hf.encode(SENTENCE))["causal"]
    z = array(maps[4]["z"])
    assert len(maps) == 9 and np.allclose(np.nan_to_num(z), r.weights[0, 4].numpy(), atol=1e-6)
    assert np.array_equal(np.isnan(z), np.triu(np.ones_like(z, dtype=bool), 1))  # the future grey, not weight 0
    assert any("Grey cells are each token's future" in c.value for c in at.caption)  # and the caption says so


def test_value_weighted_view_shows_the_raw_map_beside_alpha_f_x(smollm2_scratch):
    at = _app(model="smollm2", backend="hf", view="Head", layer="2", head="3", value="true")
    _ok(at)
    raw, norms = (array(d["z"]) for d in _maps(_charts(at)[0]))
    r = smollm2_scratch.run(smollm2_scratch.encode(SENTENCE))["causal"]
    expected = (r.weights[1, 2] * r.value_norms[1, 2][None, :]).numpy()
    assert np.allclose(np.nan_to_num(raw), r.weights[1, 2].numpy(), atol=1e-5)
    assert np.allclose(np.nan_to_num(norms), expected, rtol=1e-4, atol=1e-6)
    future = np.triu(np.ones(norms.shape, dtype=bool), 1)  # grey on both maps, not 0 on the norms' (it was)
    assert np.array_equal(np.isnan(norms), future) and np.array_equal(np.isnan(raw), future)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_value_weighted_view_of_a_decoder_attnviz_does_not_rebuild(tiny_gpt_oss_dir, monkeypatch):
    """The view said 'BERT and SmolLM2 only' on every other decoder: on attnviz's attention the hf pass reads each
    key's ||f(x)|| itself."""
    from attnviz.engines import registry

    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(tiny_gpt_oss_dir.parent))
    at = _app(model=str(tiny_gpt_oss_dir), view="Head", layer="1", head="2", value="true")
    _ok(at)
    assert not at.warning
    raw, norms = (array(d["z"]) for d in _maps(_charts(at)[0]))
    engine = registry.load(str(tiny_gpt_oss_dir), "hf", "cpu")
    r = engine.run(engine.encode(SENTENCE))["causal"]
    assert r.value_norms is not None and np.allclose(np.nan_to_num(raw), r.weights[0, 1].numpy(), atol=1e-5)
    expected = (r.weights[0, 1] * r.value_norms[0, 1][None, :]).numpy()
    assert np.allclose(np.nan_to_num(norms), expected, rtol=1e-4, atol=1e-6)


def test_value_weighted_with_the_first_token_aside_is_still_alpha_f_x_unscaled(smollm2_scratch):
    at = _app(model="smollm2", backend="hf", view="Head", layer="10", head="3", value="true", sink="true")
    _ok(at)
    raw, norms = (array(d["z"]) for d in _maps(_charts(at)[0]))
    r = smollm2_scratch.run(smollm2_scratch.encode(SENTENCE))["causal"]
    w, f = r.weights[9, 2], r.value_norms[9, 2]
    expected = (w * f[None, :])[1:, 1:].numpy()  # the head's own alpha: no 1 / (1 - alpha_first)
    assert norms.shape == expected.shape == (len(r.target_tokens) - 1,) * 2
    assert np.array_equal(np.isnan(norms), np.triu(np.ones(norms.shape, dtype=bool), 1))
    assert np.allclose(np.nan_to_num(norms), expected, rtol=1e-4, atol=1e-6)
    alpha = w[1:, 1:] / w[1:, 1:].sum(-1, keepdim=True)  # the alpha panel is renormalised, and says so
    assert np.allclose(np.nan_to_num(raw), alpha.numpy(), atol=1e-5)
    assert (w[1:, 0] > 0.3).any()  # a head with a real sink: renormalising would have changed the norms
    titles = " ".join(a["text"] for a in _charts(at)[0]["layout"]["annotations"])
    assert "rows renormalised" in titles and "nothing rescaled" in titles


def test_setting_the_first_token_aside_renormalises_the_rest(smollm2_hf):
    at = _app(model="smollm2", backend="hf", sink="true")
    _ok(at)
    d = [d for d in _charts(at)[0]["data"] if d["type"] == "heatmap"][0]
    assert len(d["x"]) == 12 and _tokens(d["x"])[0] == "animal"
    r = smollm2_hf.run(smollm2_hf.encode(SENTENCE))["causal"].weights[0, 0, 1:, 1:]
    assert np.allclose(np.nan_to_num(array(d["z"])), (r / r.sum(-1, keepdim=True)).numpy(), atol=1e-6)
    assert "first token set aside" in _charts(at)[0]["layout"]["title"]["text"]


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_the_kind_shown_is_in_the_link_and_a_class_poll_scores_that_kind(tiny_marian_dir, monkeypatch):
    from attnviz.analysis import poll_answers
    from attnviz.engines import registry
    from attnviz.ui.pages.classroom import shown

    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(tiny_marian_dir.parent))
    at = _app(model=str(tiny_marian_dir), kind="cross")  # an encoder-decoder: self, causal and cross
    _ok(at)
    assert at.radio(key="heads.kind").value == "cross" and at.query_params["kind"] == "cross"
    dates = registry.load("dates", "hf", "cpu")
    results = dates.run(dates.encode("22/11/2026"))
    assert shown(results, "cross") is results["cross"] and shown(results, None) is results["self"]
    assert shown(results, "nonsense") is results.main
    view = {"layer": 0, "head": 1, "query": 2, "kind": "cross"}
    row, _ = poll_answers.model_answer(shown(results, view["kind"]), "token", view)
    assert row == results["cross"].weights[0, 1, 2].tolist()  # the cross map the class saw, not the encoder's


@pytest.mark.slow  # loads SmolLM2 (about 20 s the first time)
def test_smollm2_tokens_read_as_text_and_the_raw_pieces_are_in_the_one_head_hover(smollm2_hf):
    text = "The animal didn't cross\nthe street."
    at = _app(model="smollm2", backend="hf", text=text)
    _ok(at)
    grid = [d for d in _charts(at)[0]["data"] if d["type"] == "heatmap"]
    assert _tokens(grid[0]["x"]) == ["The", "animal", "didn", "'t", "cross", "↵", "the", "street", "."]
    at = _app(model="smollm2", backend="hf", text=text, view="Head")
    _ok(at)
    d = _charts(at)[0]["data"][0]
    r = smollm2_hf.run(smollm2_hf.encode(text))["causal"]
    assert not set("ĠĊ") & set("".join(d["x"] + d["y"]))
    assert d["customdata"][5][1] == ["Ċ", "Ġanimal"] and "customdata" in d["hovertemplate"]
    assert r.target.pieces[1] == "Ġanimal" and r.target_tokens[1] == "animal"


def test_a_long_text_is_heavy_work_refused_when_the_server_is_busy_then_drawn(smollm2_hf, monkeypatch):
    import threading

    from attnviz import service
    from attnviz.admission import Admission

    monkeypatch.setenv("ATTNVIZ_EAGER_MB", "1")  # SmolLM2: texts past 31 tokens are long
    monkeypatch.setattr(service, "_ADMISSION", [Admission(1, 2**40, 0)])  # one slot, no line
    text = "The admission test reads this text, which is long enough to be read lazily. " * 4
    held, release = threading.Event(), threading.Event()

    def other_page() -> None:
        with service.admission().admitted("another page", "a benchmark", 1):
            held.set()
            release.wait(30)

    t = threading.Thread(target=other_page)
    t.start()
    held.wait(5)
    at = _app(model="smollm2", backend="hf", text=text)
    assert not at.exception
    assert any("The server is busy" in w.value for w in at.warning), [w.value for w in at.warning]
    assert not _charts(at)  # nothing computed, nothing drawn
    release.set()
    t.join(10)
    at.run()
    _ok(at)
    assert _charts(at) and service.admission().status()["running"] == []


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_one_view_is_built_and_serialised_once_for_every_session_that_shows_it(monkeypatch):
    """A class following its teacher: the second session's chart is the first's, replayed, with no new to_json."""
    import plotly.io

    calls = []
    to_json = plotly.io.to_json
    monkeypatch.setattr(plotly.io, "to_json", lambda *a, **k: calls.append(1) or to_json(*a, **k))
    view = {"text": "One view for the whole class.", "view": "Head", "layer": "2", "head": "7"}
    first = _app(**view)
    _ok(first)
    assert len(calls) == 1
    second = _app(**view)
    _ok(second)
    assert len(calls) == 1  # replayed: not serialised again
    assert _charts(second) == _charts(first) and _charts(second)[0]["layout"]["title"]["text"] == "Layer 2, head 7"
    other = _app(**{**view, "head": "8"})  # another view is its own chart
    _ok(other)
    assert len(calls) == 2 and _charts(other)[0]["layout"]["title"]["text"] == "Layer 2, head 8"


@pytest.mark.parametrize(
    "long", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["a sentence", "a long text"]
)  # a long text's pass: slow
def test_one_render_resolves_once_encodes_once_on_a_miss_and_never_on_a_hit(long, monkeypatch):
    """One request per run, encoded once: a miss of the memo resolves the model once, asks the memo once, encodes the
    text once (the long/eager decision, the page's token options and the engine share that encoding) and goes down
    to the service's computation once; a hit resolves once, asks the memo once and encodes nothing. (Before: the
    page, the decision and the engine each encoded, and a miss went down to the service three times.)"""
    from apptest import APP
    from streamlit.testing.v1 import AppTest

    from attnviz import api, service
    from attnviz.engines import registry
    from attnviz.tokens import Tokenizer

    model, text = "default", "A sentence counted once on the Heads page of attnviz, short this time."
    if long:
        monkeypatch.setenv("ATTNVIZ_EAGER_MB", "1")  # SmolLM2's eager budget is then 31 tokens: this text is long
        model, text = "smollm2", " ".join(["A text counted once on the Heads page of attnviz, long this time."] * 4)
    counts = dict.fromkeys(("resolve", "encode", "lookup", "compute"), 0)

    def counted(name, real, *, only_text=False):
        def call(*args, **kwargs):
            if not only_text or text in args:
                counts[name] += 1
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(registry.Policy, "resolve", counted("resolve", registry.Policy.resolve))
    monkeypatch.setattr(Tokenizer, "encode", counted("encode", Tokenizer.encode, only_text=True))
    monkeypatch.setattr(service, "held", counted("lookup", service.held))
    monkeypatch.setattr(service, "attention", counted("compute", service.attention))
    for visit, expected in (("miss", (1, 1, 1, 1)), ("hit", (1, 0, 1, 0))):
        counts.update(dict.fromkeys(counts, 0))
        at = AppTest.from_file(APP, default_timeout=180)
        at.query_params["text"], at.query_params["model"] = text, model
        at.run()
        _ok(at)
        assert tuple(counts.values()) == expected, (visit, counts)
    held = api.prepare(model, "hf", text, server=True).held()
    assert held is not None and held.lazy == long  # the path the test meant to take


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_an_unknown_token_is_explained_where_it_appears():
    """An emoji became "[UNK]" on the maps with no word of why; a text without one gets no note."""
    at = _app(text="The cat 🐈 sat.")
    _ok(at)
    assert "[UNK]" in _tokens(_charts(at)[0]["data"][0]["x"])
    assert any(c.value.startswith("[UNK] stands for characters the model's vocabulary") for c in at.caption)
    at = _app()
    assert not any("stands for characters" in c.value for c in at.caption)


def test_a_rotary_heads_query_key_space_is_offered_without_the_turn(smollm2_hf):
    """SmolLM2's one-head view: the query/key space after the turn by default, the same tokens without it on a
    switch (its title says which), and the caption says that one text cannot tell how much position explains."""
    at = _app(model="smollm2", backend="hf", view="Head", layer="3", head="2")
    at.button(key="heads.qk.button").click().run()
    _ok(at)
    assert "PCA)" in _charts(at)[-1]["layout"]["title"]["text"]
    assert any("needs several texts" in c.value for c in at.caption)  # each position once: no share to report
    at.radio(key="heads.qk.turn").set_value(at.radio(key="heads.qk.turn").options[1]).run()
    _ok(at)
    assert "without the rotary turn" in _charts(at)[-1]["layout"]["title"]["text"]
    assert any("turned back by the model's own rotary table" in c.value for c in at.caption)


def weights(trace: dict) -> np.ndarray:
    """A map's weights: its colours on a linear scale, its hover's weights on a log one (layout.log_colours)."""
    if "customdata" not in trace:
        return array(trace["z"])
    data = array(trace["customdata"])
    return data if data.ndim == 2 else data[..., -1]


@pytest.mark.slow  # Gemma 3 on a 1,200-token text: about 20 s
def test_a_windowed_layer_s_long_maps_show_the_window_as_masked_not_as_zero(monkeypatch):
    """Gemma 3's layer 1 (a window of 512 tokens) on a long text: the pooled map's cells wholly beyond the window and
    an exact window 1,000 tokens back are blank (NaN: masked), and a caption says why; its full layer 6 is not. Query
    1,001's exact row starts at the first key its window reaches (it drew the 489 keys before as weights of 0), and
    the attention received says no token is seen by more than the window (it said early tokens are seen by more); the
    Overview names the layers a window masks."""
    from attnviz.engines import bundles

    if not bundles.GEMMA3.installed():
        pytest.skip(f"Gemma 3 is not installed: {bundles.GEMMA3.install}")
    bundles.GEMMA3.converted()  # an empty cache converts here (about 30 s alone), not inside the page's timeout
    monkeypatch.setenv("ATTNVIZ_EAGER_MB", "1")
    text = "Attention lets every token look back at the tokens before it, and a window keeps the nearest. " * 60
    shown, rows = {}, {}
    for layer in ("1", "6"):
        at = _app(model="gemma3", text=text, view="Head", layer=layer, head="1", zq="1001", zk="1", row="1001")
        _ok(at)
        row = next(c for c in _charts(at) if c["layout"]["title"]["text"].startswith("Where query 1001 "))
        keys = [c.value for c in at.caption if "keys" in c.value and c.value.startswith(("Query 1001", "Every key"))]
        rows[layer] = (*keys, *row["layout"]["xaxis"]["range"])  # what its caption says and its keys' positions
        charts = {c["layout"]["title"]["text"]: weights(c["data"][0]) for c in _charts(at) if "z" in c["data"][0]}
        pooled = next(z for t, z in charts.items() if t.startswith(f"Layer {layer}, head 1 — pooled"))
        exact = next(z for t, z in charts.items() if t.startswith(f"Layer {layer}, head 1: queries 1001–1064"))
        said = any("sliding window of 512 tokens" in c.value for c in at.caption)
        grid = _app(model="gemma3", text=text, view="Layer", layer=layer)  # every head, pooled: the same caption
        _ok(grid)
        said = (said, any("sliding window of 512 tokens" in c.value for c in grid.caption))
        said += (any("an early token has no head start" in c.value for c in grid.caption),)  # attention received
        shown[layer] = (pooled, exact, said)
    pooled, exact, said = shown["1"]
    assert np.isnan(pooled[-1, 0]) and not np.isnan(np.diag(pooled)).any() and said == (True, True, True)
    assert np.isnan(exact).all()  # queries 1,001-1,064 and keys 1-64: every pair further back than 512
    pooled, exact, said = shown["6"]
    assert not np.isnan(np.tril(pooled)).any() and not np.isnan(exact).any() and said == (False, False, False)
    assert np.isnan(pooled[0, -1])  # the future: masked (grey), as on every map, not weight 0
    assert exact.max() > 0
    assert rows["1"][1:] == (489.5, 1001.5) and rows["1"][0].startswith("Query 1001 sees the 512 keys 490–1001.")
    assert rows["6"] == ("Every key query 1001 sees: keys 1–1001.", 0.5, 1001.5)
    said = "Layers 1–5, 7–11, 13–17 use a sliding window of 512 tokens: grey down the left of their maps is keys"
    said += " further back, which the window masks; layers 6, 12, 18 see every earlier key."
    overview = _app(model="gemma3", text=text, view="Overview")  # every layer: which ones the window masks
    _ok(overview)
    assert [c.value for c in overview.caption if "sliding window" in c.value] == [said]


@pytest.mark.slow  # Gemma 3 on a 620-token text, every weight held
def test_a_windowed_layer_held_whole_marks_its_window_as_the_long_path_does():
    """Past 512 tokens but within the eager budget, Gemma 3's layer 1 drew the keys its window hides as weight 0 and
    said nothing; its cells wholly beyond the window are grey now, and a caption says why (layer 6, full: neither); the
    Overview names the layers a window masks."""
    from attnviz.engines import bundles

    if not bundles.GEMMA3.installed():
        pytest.skip(f"Gemma 3 is not installed: {bundles.GEMMA3.install}")
    bundles.GEMMA3.converted()
    text = "Attention lets every token look back at the tokens before it, and a window keeps the nearest. " * 30
    for layer, windowed in (("1", True), ("6", False)):
        at = _app(model="gemma3", text=text, view="Head", layer=layer, head="1")
        _ok(at)
        z = array(_charts(at)[0]["data"][0]["z"])
        assert z.shape[0] > 256 and np.isnan(z[-1, 0]) == windowed  # the last query's first key: beyond the window
        assert any("sliding window of 512 tokens" in c.value for c in at.caption) == windowed
        grid = _app(model="gemma3", text=text, view="Layer", layer=layer)  # every head of the layer
        _ok(grid)
        assert any("sliding window of 512 tokens" in c.value for c in grid.caption) == windowed
    said = "Layers 1–5, 7–11, 13–17 use a sliding window of 512 tokens: grey down the left of their maps is keys"
    said += " further back, which the window masks; layers 6, 12, 18 see every earlier key."
    overview = _app(model="gemma3", text=text, view="Overview")  # every layer: which ones the window masks
    _ok(overview)
    assert [c.value for c in overview.caption if "sliding window" in c.value] == [said]


@pytest.mark.parametrize(
    ("model", "backend", "shown", "said"),
    [
        ("gemma3", "scratch", "gemma3", "Gemma 3 270M on the backend ‘scratch’"),
        ("default", "nonsense", "default", "bundled BERT on the backend ‘nonsense’"),
    ],
)
def test_a_link_pairing_a_model_with_a_backend_it_is_not_offered_on_shows_that_model_with_a_notice(
    model, backend, shown, said
):
    """Gemma 3 on the scratch backend once opened the date model, silently (the hub box had no Gemma 3 and took its
    first entry): the model the link names is shown, on the backend it is offered on, and the page says so."""
    at = _app(model=model, backend=backend)
    _ok(at)
    assert at.sidebar.selectbox(key="sb.choice").value == shown
    assert at.query_params["model"] == model and at.query_params["backend"] == "hf"
    assert any(said in i.value.replace("\\", "") for i in at.info), [i.value for i in at.info]


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_link_to_a_folder_model_on_the_scratch_backend_says_it_is_shown_on_hf(tiny_llama_dir, monkeypatch):
    """The hub box opens every model on the hf backend: a link asking for the scratch one was shown there silently
    (the device line said "hf backend" with nothing on the page about the link's wish)."""
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(tiny_llama_dir.parent))
    at = _app(model=str(tiny_llama_dir), backend="scratch")
    _ok(at)
    assert at.sidebar.selectbox(key="sb.choice").value == "hub"
    assert at.query_params["backend"] == "hf"
    said = [i.value.replace("\\", "") for i in at.info]
    assert any("on the backend ‘scratch’" in s and "shown on the hf backend" in s for s in said), said
    at = _app(model="dates", backend="scratch")  # built on the scratch engine whichever backend: nothing to say
    _ok(at)
    assert not any("shown on the hf backend" in i.value for i in at.info)


def test_an_address_asking_for_what_the_page_does_not_offer_says_so_and_what_it_shows():
    """?layer=999&head=-3 opened layer 1, head 1 without a word; a view name in markup is shown escaped, not drawn."""
    at = _app(view="Head", layer="999", head="-3")
    _ok(at)
    said = [i.value for i in at.info]
    assert any("layer=999" in s and "it shows 1" in s for s in said), said
    assert any("head=\\-3" in s for s in said) and at.slider(key="heads.layer").value == 1
    at = _app(view="<b>Grid</b>")
    assert any("view=\\<b\\>Grid\\</b\\>" in i.value for i in at.info), [i.value for i in at.info]
    assert not _app(view="Head", layer="2").info  # what it offers: nothing to say
    at = _app(hide="maybe", sink="off", value="1")  # a switch: true/false, 1/0, yes/no, on/off; else said, and off
    said = [i.value for i in at.info]
    assert any("hide=maybe" in s and "it shows off" in s for s in said) and len(said) == 1, said
    assert at.toggle(key="heads.hide").value is False and at.toggle(key="heads.sink").value is False
    assert at.toggle(key="heads.value").value is True


@pytest.mark.parametrize("kernel", ["", "0"], ids=["the fused kernel", "the plain path"])
def test_a_long_text_says_when_the_fused_kernel_does_not_run(tiny_long_llama_dir, kernel, monkeypatch):
    """A server with no C compiler (a laptop without one, a slim image) analyses long texts by the plain path, up to
    2x slower: the page says so, and where to look; where the kernel runs it says nothing."""
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(tiny_long_llama_dir.parent))
    monkeypatch.setenv("ATTNVIZ_EAGER_MB", "1")  # the tiny Llama: texts past 181 tokens are long
    monkeypatch.setenv("ATTNVIZ_FUSED", kernel)
    at = _app(model=str(tiny_long_llama_dir), text="The animal didn't cross the street because it was tired. " * 30)
    _ok(at)
    assert any("A long text" in i.value for i in at.info)
    said = [c.value for c in at.caption if "plain PyTorch operations" in c.value]
    if kernel == "":
        assert not said
    else:
        assert len(said) == 1 and "`attnviz doctor` on the server says why" in said[0]


def test_a_long_text_s_maps_are_on_a_log_colour_scale_whose_hover_gives_each_weight(tiny_long_llama_dir, monkeypatch):
    """On a linear scale a long text's pooled maps were one dark colour (a query that sees hundreds of keys gives each
    a few thousandths, the map's top is the first rows'): by default they are coloured on a log scale, the hover still
    giving each cell's weight (the linear view's own colours), and log=false in the URL draws them linearly again."""
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(tiny_long_llama_dir.parent))
    monkeypatch.setenv("ATTNVIZ_EAGER_MB", "1")  # the tiny Llama: texts past 181 tokens are long
    view = {
        "model": str(tiny_long_llama_dir),
        "text": "The animal didn't cross the street because it was tired. " * 30,
        "view": "Head",
        "layer": "1",
        "head": "2",
    }
    log, linear = _app(**view), _app(**view, log="false")
    _ok(log)
    _ok(linear)
    assert log.toggle(key="heads.log").value is True and linear.toggle(key="heads.log").value is False
    maps = {}
    for name, at in (("log", log), ("linear", linear)):
        charts = {c["layout"]["title"]["text"]: c for c in _charts(at)}
        pooled = next(c for t, c in charts.items() if t.startswith("Layer 1, head 2 — pooled"))
        window = next(c for t, c in charts.items() if t.startswith("Layer 1, head 2: queries"))
        maps[name] = (pooled["data"][0], window)
    (pooled, window), (pooled_lin, window_lin) = maps["log"], maps["linear"]
    w = array(pooled_lin["z"])  # the weights, as the linear map colours them
    assert pooled["colorbar"]["title"]["text"] == "mean weight (log scale)"
    np.testing.assert_allclose(array(pooled["customdata"]), w, rtol=1e-6)  # the hover: each cell's own weight
    low, high = 10 ** pooled["zmin"], 10 ** pooled["zmax"]
    assert high == pytest.approx(np.nanmax(w), rel=1e-5) and 0 < low < high
    np.testing.assert_allclose(array(pooled["z"]), np.log10(np.maximum(w, low)), atol=1e-5)  # NaN (masked) kept
    marks = [float(t) for t in pooled["colorbar"]["ticktext"]]
    assert 2 <= len(marks) <= 6 and all(low * 0.99 <= v <= high * 1.01 for v in marks)
    assert np.allclose(pooled["colorbar"]["tickvals"], np.log10(marks), atol=0.02)  # each mark where its weight is
    # the reason: half the cells lie under a tenth of the linear scale, and the middle half of them takes a sliver of
    # its colours; on the log scale that middle half spans five times as much of the colours, or more
    seen = np.isfinite(w)
    assert np.median(w[seen]) / np.nanmax(w) < 0.1
    spread_linear = np.subtract(*np.percentile(w[seen], [75, 25])) / np.nanmax(w)
    logged = array(pooled["z"])[seen]
    spread_log = np.subtract(*np.percentile(logged, [75, 25])) / (pooled["zmax"] - pooled["zmin"])
    assert spread_log > 5 * spread_linear, (spread_log, spread_linear)
    hover = next(c for c in _charts(log) if c["layout"]["title"]["text"].startswith("Layer 1, head 2 — pooled"))
    said = [float(t.rsplit(" ", 1)[1]) for t in hover["data"][1]["text"] if "weight" in t]  # the markers' hover
    np.testing.assert_allclose(said, w[np.isfinite(w)], rtol=5e-3)  # 3 digits of each cell's weight, row by row
    exact = window["data"][0]  # the exact window: on the same kind of scale, its hover the weights
    np.testing.assert_allclose(array(exact["customdata"]), array(window_lin["data"][0]["z"]), rtol=1e-6)
    assert window["layout"]["coloraxis"]["colorbar"]["title"]["text"] == "weight (log scale)"


def test_a_link_s_values_wait_for_widgets_the_text_does_not_draw_yet(tiny_long_llama_dir, monkeypatch):
    """A link's log=false and window (long-text widgets) opened on a short text, then the long text pasted: the long
    view takes them (the short run's URL had dropped them, and the map came up on a log scale); and the short text's
    own option (hide=true) waits through the long text for the next short one. The log scale turned on on the long
    text, a short text, the long one again: still on."""
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(tiny_long_llama_dir.parent))
    monkeypatch.setenv("ATTNVIZ_EAGER_MB", "1")  # the tiny Llama: texts past 181 tokens are long
    long_text = "The animal didn't cross the street because it was tired. " * 30
    at = _app(model=str(tiny_long_llama_dir), text="A short text.", view="Head", log="false", zq="40", sink="true")
    _ok(at)
    assert at.query_params["log"] == "false" and at.query_params["zq"] == "40"
    at.sidebar.text_input(key="sb.text").set_value(long_text).run()
    _ok(at)
    assert at.toggle(key="heads.log").value is False and at.number_input(key="heads.zq").value == 40
    assert at.query_params["sink"] == "true"
    at.toggle(key="heads.log").set_value(True).run()
    at.sidebar.text_input(key="sb.text").set_value("Short again.").run()
    _ok(at)
    assert at.toggle(key="heads.sink").value is True and at.query_params["log"] == "true"
    at.sidebar.text_input(key="sb.text").set_value(long_text).run()
    _ok(at)
    assert at.toggle(key="heads.log").value is True


def test_the_head_view_s_head_comes_back_after_a_look_at_the_layer_view(bundled_hf):
    """Head 5, the Layer view (which draws no head slider, so Streamlit drops its value), the Head view again: head 5,
    not head 1; the Layer view's URL names no head (a class's student takes the teacher's URL whole), and a URL's own
    head still wins over the session's last one."""
    at = _app(view="Head")
    at.slider(key="heads.head").set_value(5).run()
    view = lambda: next(w for w in at.get("button_group") if w.key == "heads.view")  # noqa: E731
    view().set_value("Layer").run()
    _ok(at)
    assert at.query_params["view"] == "Layer" and "head" not in at.query_params
    view().set_value("Head").run()
    _ok(at)
    assert at.slider(key="heads.head").value == 5 and at.query_params["head"] == "5"
    assert _charts(at)[0]["layout"]["title"]["text"].startswith("Layer 1, head 5")
    view().set_value("Layer").run()
    at.query_params["head"] = "7"  # a link's head, as a teacher's URL gives a student
    view().set_value("Head").run()
    assert at.slider(key="heads.head").value == 7
