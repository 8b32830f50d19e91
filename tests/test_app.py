"""AppTest of the frame (app.py): every page runs with each model, and says what it did to a long text."""

import re

import numpy as np
import pytest
from apptest import APP, PAGES_ALL, _charts, _ok, _tokens
from conftest import SENTENCE
from plotly_data import array
from streamlit.testing.v1 import AppTest

from attnviz.engines import registry
from attnviz.lessons.encodings import rotary_angles


def _labels(chart: dict) -> set[str]:
    """Every tick label and axis value a figure sent, as the tokens they name."""
    out = []
    for axis in ("xaxis", "yaxis"):
        out += chart.get("layout", {}).get(axis, {}).get("ticktext") or []
    for trace in chart.get("data", []):
        out += [v for k in ("x", "y") if isinstance(trace.get(k), list) for v in trace[k]]
    return set(_tokens([str(v) for v in out]))


@pytest.mark.slow  # every page, on a third model
@pytest.mark.parametrize("page", ["heads", "inside", "overview", "compare", "pronouns"])
def test_every_page_runs_with_the_date_model_typed_as_a_hub_id(page):
    """A link naming the bundled date model (which the menu does not list) opens it as "another model": its own
    character tokens and three kinds of attention where the page shows the model's attention, and a page that cannot
    use it says which model it shows instead. (It used to open BERT silently, and this test only checked that
    nothing raised.)"""
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["model"], at.query_params["text"] = "dates", "22/11/2026"
    at.switch_page(f"app_pages/{page}.py").run()
    _ok(at)
    assert at.sidebar.selectbox(key="sb.choice").value == "hub"
    offered = at.sidebar.selectbox(key="sb.hub")
    assert offered.value == "dates" and offered.label == "A model this server offers"  # a list: nothing to type
    assert "attnviz's date model (dates)" in offered.options  # a bundled one by what it is
    assert at.query_params["model"] == "dates"
    if page in ("heads", "overview"):
        labels = set().union(*map(_labels, _charts(at)))
        assert {"2", "/", "</s>"} <= labels and "[CLS]" not in labels  # characters, not BERT's word pieces
    if page == "heads":
        assert at.radio(key="heads.kind").options == ["self", "causal", "cross"]
    if page == "inside":
        assert any(
            "Our date model cannot be shown step by step" in i.value and "shows the bundled BERT" in i.value
            for i in at.info
        )


@pytest.mark.slow  # loads SmolLM2 (about 20 s the first time)
@pytest.mark.parametrize("backend", ["hf", "scratch"])
@pytest.mark.parametrize("page", PAGES_ALL)
def test_every_page_runs_with_smollm2(page, backend):
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["model"], at.query_params["backend"] = "smollm2", backend
    at.switch_page(f"app_pages/{page}.py").run()
    _ok(at)
    device = [c.value for c in at.sidebar.caption if c.value.startswith("Device:")]
    assert device == [f"Device: **cpu** · {backend} backend · up to 8192 tokens"]  # SmolLM2's, not BERT's 512
    if page != "compare":  # the Compare page's what-ifs are BERT's own, whatever the sidebar names
        assert not set().union(*map(_labels, _charts(at))) & {"[CLS]", "[SEP]"}  # no map of BERT's tokens
    if page == "overview":  # its last layer's rollout is all on "The": said, with the share measured, not left bare
        said = next(c.value for c in at.caption if c.value.startswith("On a decoder, rollout pools on the first token"))
        assert "after layer 30, over 99.9% of a token's rollout is on it" in said, said
        pick = at.selectbox(key="ov.token")  # the last token, which sees them all (the first sees only itself)
        assert pick.value == len(pick.options) > 1


@pytest.mark.slow  # loads Gemma 3 270M (about 30 s the first time on this machine, 7 s after)
@pytest.mark.parametrize("page", PAGES_ALL)
def test_every_page_runs_with_gemma3(page):
    """The bundled Gemma 3 (sliding windows, one key/value head, a <bos> sink) on every page: no exception, no
    error, its own tokens and its own context length."""
    from attnviz.engines import bundles

    bundles.GEMMA3.converted()  # an empty cache converts here (about 30 s alone), not inside the page's timeout
    at = AppTest.from_file(APP, default_timeout=240)
    at.query_params["model"] = "gemma3"
    at.switch_page(f"app_pages/{page}.py").run()
    _ok(at)
    device = [c.value for c in at.sidebar.caption if c.value.startswith("Device:")]
    assert device == ["Device: **cpu** · hf backend · up to 32768 tokens"]
    assert not any("this view shows the bundled BERT" in i.value for i in at.info)  # Gemma 3's own layers, stepped
    if page == "inside":  # what its layer adds to the textbook's, said from the steps
        said = next(m.value for m in at.markdown if m.value.startswith("A Gemma 3 layer adds"))
        assert "**one key/value head** that all 4 query heads share" in said and "**sliding window**" in said
        assert "**RMSNorm of their own**" in said
        assert any(re.search(r"K split into heads +\(1, 1, \d+, 256\)", c.value) for c in at.code)
        assert "The whole forward pass of Gemma 3 270M (hf), module by module" in [e.label for e in at.expander]
    if page != "compare":  # the Compare page's what-ifs are BERT's own
        assert not set().union(*map(_labels, _charts(at))) & {"[CLS]", "[SEP]"}
    else:  # it opens on BERT beside the sidebar's bundled decoder (it showed SmolLM2 whatever the sidebar said)
        assert at.radio(key="cmp.source").value == "llm"
        chart = _charts(at)[0]
        titles = " ".join(a["text"].replace("<br>", " ") for a in chart["layout"]["annotations"])
        assert "Gemma 3 270M masked self-attention" in titles and "SmolLM2" not in titles
        eng = registry.load("gemma3", "hf", "cpu")
        r = eng.run(eng.encode(SENTENCE))["causal"]
        gemma = array(chart["data"][1]["z"])
        assert np.array_equal(np.isnan(gemma), np.triu(np.ones(gemma.shape, dtype=bool), 1))
        assert np.allclose(np.nan_to_num(gemma), r.weights[-1, 0].numpy(), atol=1e-6)
        assert any("Gemma 3 270M to see only what came before" in m.value for m in at.markdown)
    if page == "positions":  # a rotary model has no table of learned positions: the page shows the bundled BERT's
        # (it showed "gemma3 has no learned position table" instead, where SmolLM2 showed BERT's)
        assert not any("no learned position table" in i.value for i in at.info)
        learned = next(c for c in _charts(at) if "learned positions" in c["layout"]["title"]["text"])
        assert (
            learned["layout"]["title"]["text"]
            .replace("<br>", " ")
            .startswith("bundled BERT: learned positions (64 × 384)")
        )
        # the rotary lesson at Gemma 3's own head size and its windowed layers' θ (it drew SmolLM2's 64 at 100,000)
        said = "Drawn with Gemma 3 270M's numbers: heads of 256 dimensions, θ 1,000,000 on its 3 full layers; θ 10,000"
        assert any(c.value.startswith(said) and "its 15 windowed layers" in c.value for c in at.caption)
        assert at.select_slider(key="pos.theta.256.10000").value == 10000.0
        rope = next(c for c in _charts(at) if "cos(angle) of each pair" in c["layout"]["title"]["text"])
        assert "head size 256" in rope["layout"]["title"]["text"].replace("<br>", " ")
        z = array(rope["data"][0]["z"])
        assert z.shape == (64, 128) and np.allclose(z, np.cos(rotary_angles(64, 256, 1e4).numpy()), atol=1e-6)
        assert any(c.value.startswith("Pair 1 turns one radian per position; pair 128 turns") for c in at.caption)
    if page == "masks":  # Gemma 3's own window too, twice 512 positions, against a full layer; the last query cell
        # (positions 960-1023) sees keys 449-1023 on a windowed layer, every one on a full layer
        maps = {c["layout"]["title"]["text"]: array(c["data"][0]["z"]) for c in _charts(at)}
        assert "Gemma 3 270M's own sliding window" in [h.value for h in at.subheader]  # as the menu names it
        window, full = maps["a windowed layer (layer 1): w = 512"], maps["a full layer (layer 6)"]
        assert window[15, :7].max() == 0 and 0 < window[15, 7] < 1 and window[15, 8:15].min() == 1
        assert full[15, :15].min() == 1 and full[0, 1:].max() == 0


@pytest.mark.parametrize("page", ["app_pages/heads.py", "app_pages/overview.py"])
@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
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
