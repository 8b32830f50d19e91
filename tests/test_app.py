"""AppTest: every page runs on the bundled model; the Heads page sends what the engine computed."""

import html
import json

import numpy as np
import pytest
import torch
from conftest import ROOT, SENTENCE
from plotly_data import array
from streamlit.testing.v1 import AppTest

APP = str(ROOT / "app.py")


def _app(**params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = v
    return at.run()


def _charts(at):
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def _tokens(labels):
    return [html.unescape(x.rsplit(" ·", 1)[0]) for x in labels]


def _ok(at):
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def test_heads_page_sends_one_heatmap_per_head_equal_to_the_engine(bundled_hf):
    at = _app()
    _ok(at)
    r = bundled_hf.run(SENTENCE)["self"]
    maps = [d for d in _charts(at)[0]["data"] if d["type"] == "heatmap"]
    assert len(maps) == 12
    for h, d in enumerate(maps):
        assert np.allclose(array(d["z"]), r.weights[0, h].numpy(), atol=1e-6)
        assert _tokens(d["x"]) == _tokens(d["y"]) == list(r.target_tokens)


def test_layer_slider_changes_the_layer(bundled_hf):
    at = _app()
    at.slider(key="heads.layer").set_value(4).run()
    _ok(at)
    z = array(_charts(at)[0]["data"][7]["z"])
    assert np.allclose(z, bundled_hf.run(SENTENCE)["self"].weights[3, 7].numpy(), atol=1e-6)
    assert at.query_params["layer"] == "4"  # the shareable URL follows the slider


def test_hiding_specials_drops_them_and_renormalises():
    at = _app()
    at.toggle(key="heads.hide").set_value(True).run()
    _ok(at)
    d = _charts(at)[0]["data"][0]
    assert "[CLS]" not in _tokens(d["x"]) and "[SEP]" not in _tokens(d["x"]) and len(d["x"]) == 14
    assert np.allclose(array(d["z"]).sum(-1), 1.0, atol=1e-5)


def test_merging_word_pieces_gives_words():
    at = _app(text="The playwright was unbelievably tired.")
    at.toggle(key="heads.merge").set_value(True).run()
    _ok(at)
    toks = _tokens(_charts(at)[0]["data"][0]["x"])
    assert toks == ["[CLS]", "The", "playwright", "was", "unbelievably", "tired", ".", "[SEP]"]


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


def test_nonsense_url_values_fall_back_to_defaults():
    at = _app(layer="99", view="nope", palette="x")
    _ok(at)
    assert at.slider(key="heads.layer").value == 1


def test_overview_is_one_tiled_heatmap():
    at = _app(view="Overview")
    _ok(at)
    data = _charts(at)[0]["data"]
    assert len(data) == 1 and data[0]["type"] == "heatmap"
    assert len(at.get("download_button")) == 4  # PNG, SVG, CSV, JSON of the overview


def test_scratch_engine_from_the_sidebar(bundled_hf):
    at = _app(model="scratch")
    _ok(at)
    z = array(_charts(at)[0]["data"][2]["z"])
    assert np.allclose(z, bundled_hf.run(SENTENCE)["self"].weights[0, 2].numpy(), atol=1e-5)


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


def test_an_unknown_model_typed_on_a_server_that_downloads_is_a_message(monkeypatch):
    monkeypatch.setenv("ATTNVIZ_ALLOW_DOWNLOADS", "1")  # HF_HUB_OFFLINE=1 still keeps the test offline
    at = _app(model="no-such-owner/no-such-model-xyz")
    assert not at.exception
    assert at.error and '"default"' in at.error[0].value


def test_inside_page_runs_and_shows_the_shapes():
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("app_pages/inside.py").run()
    _ok(at)
    code = at.code[0].value
    assert "(1, 16, 384)" in code and "(1, 12, 16, 32)" in code
    assert len(_charts(at)) >= 10
    at.select_slider(key="inside.d_model").set_value(64).run()
    at.select_slider(key="inside.heads").set_value(4).run()
    _ok(at)
    assert any("64 / 4 = **16**" in m.value for m in at.markdown)
    assert any("O(N²·d + N·d²)" in m.value for m in at.markdown)
    assert not any("never trained with a causal mask" in c.value for c in at.caption)
    at.toggle(key="inside.causal").set_value(True).run()
    assert any("never trained with a causal mask" in c.value for c in at.caption)


def _compare(**params):
    """Open the Compare page directly, as a shared link to it does."""
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = v
    return at.switch_page("app_pages/compare.py").run()


def test_compare_page_with_the_date_model():
    at = _compare()
    _ok(at)
    assert any("→ **2026\\-11\\-22**" in m.value for m in at.markdown)  # escaped: the model's output is text
    data = _charts(at)[0]["data"]
    assert [d["type"] for d in data] == ["heatmap"] * 3
    causal = array(data[1]["z"])
    assert np.isnan(causal[np.triu_indices(causal.shape[0], 1)]).all()  # the mask is drawn as masked
    cross = array(data[2]["z"])
    assert cross.shape[0] != cross.shape[1] and np.allclose(cross.sum(-1), 1.0, atol=1e-5)
    assert len(at.get("download_button")) == 4


def test_compare_page_with_bert_what_ifs():
    at = _compare()
    at.radio(key="cmp.source").set_value("bert").run()
    _ok(at)
    notes = [w.value for w in at.warning]
    assert any("never trained with a causal mask" in n and "from layer 2 on" in n for n in notes)
    assert any("never trained as a decoder that reads another sentence" in n for n in notes)
    charts = _charts(at)
    bi, ca, diff = (array(d["z"]) for d in charts[0]["data"])
    assert np.isnan(ca[0, 1])  # the causal panel draws its mask as masked
    assert np.allclose(diff, np.nan_to_num(ca) - bi, atol=1e-5)  # masked cells count as 0 in the difference
    assert np.allclose(np.nansum(ca, -1), 1.0, atol=1e-5)
    cross = array(charts[1]["data"][0]["z"])
    assert cross.shape[0] != cross.shape[1]


def test_compare_page_with_a_hub_encoder_decoder(tiny_marian_dir, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(tiny_marian_dir.parent))
    at = _compare(source="hub", hub=str(tiny_marian_dir), target="die katze")
    _ok(at)
    data = _charts(at)[0]["data"]
    cross = array(data[2]["z"])
    assert len(data) == 3 and cross.shape == (5, 16)  # [PAD] + "die katze" pieces x the sidebar text's 16 tokens
    assert _tokens(data[2]["x"])[:3] == ["[CLS]", "the", "animal"]


def _overview(**params):
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = v
    return at.switch_page("app_pages/overview.py").run()


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


def test_overview_corpus_average_equals_the_mean_over_the_corpus(bundled_hf):
    from attnviz.analysis import head_stats

    at = _overview(corpus="true", stat="entropy")
    _ok(at)
    per_text = [head_stats.head_stats(bundled_hf.run(text)["self"]) for text in head_stats.CORPUS]
    expected = head_stats.average(per_text)["entropy"].numpy()
    assert np.allclose(array(_charts(at)[0]["data"][0]["z"]), expected, atol=1e-5)


def test_pronoun_lesson_predict_reveal_and_minimal_pair(bundled_hf):
    from attnviz.analysis import pronouns

    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("app_pages/pronouns.py").run()
    _ok(at)
    assert not _charts(at)  # nothing is revealed before a guess
    at.radio(key="pr.predict.guess").set_value("street").run()
    at.button(key="pr.predict.reveal").click().run()
    _ok(at)
    grid, bars, pair = _charts(at)
    res = pronouns.score_case(bundled_hf, pronouns.LESSON[0], "vote")  # the lesson: what "it" looks at
    assert np.allclose(array(grid["data"][0]["z"]), res.scores[..., 0].numpy(), atol=1e-6)  # "it" -> "animal"
    votes = torch.bincount(res.scores.argmax(-1).flatten(), minlength=2)
    assert at.success and f"{int(votes[0])} pick **animal**, {int(votes[1])} pick **street**" in at.success[0].value
    assert ("split evenly" in at.success[0].value) == (votes[0] == votes[1]) == res.tie
    assert "Most heads pick" not in at.success[0].value or votes.max() > votes.min()
    assert array(pair["data"][0]["z"]).shape == (6, 12)


@pytest.mark.parametrize("method", ["mas", "vote"])
def test_pronoun_benchmark_tab_on_eight_cases(bundled_hf, method):
    from attnviz.analysis import pronouns

    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("app_pages/pronouns.py").run()
    at.number_input(key="pr.limit").set_value(8).run()
    at.radio(key="pr.method").set_value(method).run()
    at.button(key="pr.run").click().run()
    _ok(at)
    bench = pronouns.evaluate(bundled_hf, pronouns.LESSON[:8], method)
    assert at.metric[0].label == {"mas": "Maximum Attention Score", "vote": "Head vote"}[method]
    assert at.metric[0].value == f"{bench.accuracy:.1%}" and at.metric[1].value == f"{bench.chance:.1%}"
    assert at.metric[2].value == f"{bench.held_out_best_head()[0]:.1%}"
    assert at.metric[3].value == f"{bench.permutation_best_head():.1%}"
    assert any("8 cases scored" in c.value and "picked on these very cases" in c.value for c in at.caption)


def test_overview_computes_flow_only_when_asked():
    at = _overview()
    _ok(at)
    assert [d["type"] for d in _charts(at)[1]["data"]] == ["heatmap"] * 2  # raw and rollout


@pytest.mark.parametrize("page", ["heads", "inside", "overview", "compare", "pronouns"])
def test_every_page_runs_with_the_date_model_typed_as_a_hub_id(page):
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["model"], at.query_params["text"] = "dates", "22/11/2026"
    at.switch_page(f"app_pages/{page}.py").run()
    _ok(at)


PAGES_ALL = ["heads", "inside", "compare", "generate", "overview", "pronouns", "positions", "head_count", "masks"]


@pytest.mark.parametrize("backend", ["hf", "scratch"])
@pytest.mark.parametrize("page", PAGES_ALL)
def test_every_page_runs_with_smollm2(page, backend):
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["model"], at.query_params["backend"] = "smollm2", backend
    at.switch_page(f"app_pages/{page}.py").run()
    _ok(at)


def test_smollm2_heads_are_its_real_causal_attention(smollm2_hf):
    at = _app(model="smollm2", backend="hf")
    _ok(at)
    maps = [d for d in _charts(at)[0]["data"] if d["type"] == "heatmap"]
    r = smollm2_hf.run(SENTENCE)["causal"]
    assert len(maps) == 9 and np.allclose(array(maps[4]["z"]), r.weights[0, 4].numpy(), atol=1e-6)


def test_the_compare_page_s_masked_panel_is_smollm2_s(smollm2_hf, bundled_hf):
    at = _compare(model="smollm2", backend="hf")
    _ok(at)
    assert at.radio(key="cmp.source").value == "llm"  # the default when the sidebar shows SmolLM2
    bert, llm = (array(d["z"]) for d in _charts(at)[0]["data"])
    r = smollm2_hf.run(SENTENCE)["causal"]
    assert np.isnan(llm[np.triu_indices(llm.shape[0], 1)]).all()  # the mask drawn as masked
    assert np.allclose(np.nan_to_num(llm), r.weights[-1, 0].numpy(), atol=1e-6)  # last layer, head 1
    assert np.allclose(bert, bundled_hf.run(SENTENCE)["self"].weights[-1, 0].numpy(), atol=1e-6)


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
    assert array(heads["data"][0]["z"]).shape == (30 * 9, gen.prompt_tokens)  # step 1 across every head


def test_a_model_that_cannot_write_hands_the_generate_page_to_smollm2():
    at = AppTest.from_file(APP, default_timeout=180).run()
    at.switch_page("app_pages/generate.py").run()
    _ok(at)
    assert at.info and "does not write text" in at.info[0].value


def test_value_weighted_view_shows_the_raw_map_beside_alpha_f_x(smollm2_scratch):
    at = _app(model="smollm2", backend="hf", view="Head", layer="2", head="3", value="true")
    _ok(at)
    raw, norms = (array(d["z"]) for d in _charts(at)[0]["data"])
    r = smollm2_scratch.run(SENTENCE)["causal"]
    expected = (r.weights[1, 2] * r.value_norms[1, 2][None, :]).numpy()
    assert np.allclose(np.nan_to_num(raw), r.weights[1, 2].numpy(), atol=1e-5)
    assert np.allclose(np.nan_to_num(norms), expected, rtol=1e-4, atol=1e-6)


def test_setting_the_first_token_aside_renormalises_the_rest(smollm2_hf):
    at = _app(model="smollm2", backend="hf", sink="true")
    _ok(at)
    d = [d for d in _charts(at)[0]["data"] if d["type"] == "heatmap"][0]
    assert len(d["x"]) == 12 and _tokens(d["x"])[0] == "Ġanimal"
    r = smollm2_hf.run(SENTENCE)["causal"].weights[0, 0, 1:, 1:]
    assert np.allclose(array(d["z"]), (r / r.sum(-1, keepdim=True)).numpy(), atol=1e-6)
    assert "first token set aside" in _charts(at)[0]["layout"]["title"]["text"]


def test_the_pronoun_benchmark_on_a_causal_model_offers_the_head_vote_only():
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["model"], at.query_params["backend"] = "smollm2", "hf"
    at.switch_page("app_pages/pronouns.py").run()
    _ok(at)
    assert at.radio(key="pr.method").options == ["Head vote"]
    assert any("not defined here" in i.value for i in at.info)


@pytest.mark.parametrize("page", ["app_pages/heads.py", "app_pages/overview.py"])
def test_a_text_longer_than_the_model_takes_says_how_many_tokens_were_read_and_dropped(bundled_hf, page):
    text = "The animal didn't cross the street because it was too tired. " * 60
    dropped = bundled_hf.encode(text).truncated
    assert dropped > 0
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["text"] = text
    at = at.switch_page(page).run()
    _ok(at)
    notes = [i.value for i in at.info if "cut to fit the model" in i.value]
    assert notes == [f"The text was cut to fit the model: it reads 512 tokens; {dropped:,} at the end were dropped."]


def test_positions_page_draws_the_formula_and_reveals_relative_position():
    from attnviz.analysis import positions

    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("app_pages/positions.py").run()
    _ok(at)
    pe = array(_charts(at)[0]["data"][0]["z"])
    assert np.abs(pe - positions.sinusoidal(48, 64).numpy()).max() < 1e-6
    at.radio(key="pos.q1.guess").set_value("different").run()
    at.button(key="pos.q1.reveal").click().run()
    _ok(at)
    pairs = "PE(10)·PE(12) = 28.3039, PE(30)·PE(32) = 28.3039"  # the same number: relative position
    assert any("They are the same" in s.value and pairs in s.value for s in at.success)
    at.slider(key="pos.n").set_value(8).run()  # fewer positions on the map than the question names
    assert any(pairs in s.value for s in at.success)
    assert any("positional" in m.value.lower() or "Positional" in m.value for m in at.markdown)
    assert any("previous-token" in m.value for m in at.markdown)  # the bundled BERT has such heads


def test_head_count_page_reveals_the_shipped_accuracies_and_checks_typed_digits():
    from attnviz.train import heads

    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("app_pages/head_count.py").run()
    _ok(at)
    assert not at.dataframe  # nothing revealed before a guess
    at.radio(key="hc.predict.mirror-sum.guess").set_value("8 head(s)").run()
    at.button(key="hc.predict.mirror-sum.reveal").click().run()
    _ok(at)
    table = at.dataframe[0].value
    stated = {m["heads"]: m["accuracy"] for m in heads.shipped("mirror-sum")["models"]}
    assert [float(v.rstrip("%")) / 100 for v in table["digit accuracy"]] == [
        pytest.approx(stated[h], abs=1e-4) for h in table["heads"]
    ]
    assert any("2 head(s)" in s.value for s in at.success)
    at.text_input(key="hc.digits").set_value("12ab").run()
    assert any("digits 0-9" in w.value.replace("\\", "") for w in at.warning)  # shown escaped
    at.text_input(key="hc.digits").set_value("123456789012").run()
    _ok(at)
    assert any("`210987654321`" not in m.value and "The right answer" in m.value for m in at.markdown)


def test_head_count_cost_measures_every_plan():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["n"] = "128"
    at.switch_page("app_pages/head_count.py").run()
    at.button(key="hc.measure").click().run()
    _ok(at)
    table = at.dataframe[-1].value
    assert list(table["query heads"]) == [1, 1, 8, 8, 16, 16, 16, 16]
    assert list(table["K/V heads"]) == [1, 1, 8, 8, 16, 16, 4, 1]
    assert (table["ms"] > 0).all()
    assert any("Measured just now on this CPU" in c.value for c in at.caption)


def test_masks_page_reweighs_the_models_own_queries_and_keys():
    from attnviz.analysis import masks

    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("app_pages/masks.py").run()
    _ok(at)
    mask_fig, own_fig, new_fig = _charts(at)[:3]
    n = len(mask_fig["data"][0]["y"])
    assert np.array_equal(array(mask_fig["data"][0]["z"]), masks.sliding_window(n, 4, causal=False).float().numpy())
    w = array(new_fig["data"][0]["z"])  # masked cells are gaps (NaN)
    allowed = masks.sliding_window(n, 4, causal=False).numpy()
    assert np.isnan(w[~allowed]).all()
    assert np.allclose(np.nansum(w, axis=1), 1, atol=1e-4)
    at.radio(key="mk.kind").set_value("block-sparse").run()
    _ok(at)
    assert np.array_equal(array(_charts(at)[0]["data"][0]["z"]), masks.block_sparse(n, 3, causal=False).float().numpy())
    at.button(key="mk.measure").click().run()
    _ok(at)
    assert set(at.dataframe[0].value["method"]) == set(("dense + mask", "sliding window (blocked)",
                                                        "block-sparse (blocked)"))  # fmt: skip


def test_inside_page_traces_any_engines_whole_pass():
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("app_pages/inside.py").run()
    _ok(at)
    trace = next(c.value for c in at.code if "[BertSelfAttention]" in c.value)
    assert "(1, 12, 16, 16)" in trace and "encoder.layer.0.intermediate.dense [Linear]" in trace
    assert any("encoder.layer.1 … encoder.layer.5 repeat" in c.value.replace("\\", "") for c in at.caption)
