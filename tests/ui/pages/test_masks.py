"""AppTest of the masks page: it runs on the bundled models and sends what the engines computed."""

import numpy as np
import pytest
from apptest import APP, _charts, _ok
from plotly_data import array
from streamlit.testing.v1 import AppTest


@pytest.mark.slow  # SmolLM2's queries and keys
def test_masks_page_reweighs_the_models_own_queries_and_keys():
    from attnviz.lessons import kernels

    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("app_pages/masks.py").run()
    _ok(at)
    mask_fig, own_fig, new_fig = _charts(at)[:3]
    n = len(mask_fig["data"][0]["y"])
    bars = [f["data"][0]["colorbar"]["title"]["text"] for f in (mask_fig, own_fig, new_fig)]
    assert bars == ["may attend", "weight", "weight"]  # a mask is not a weight
    assert np.array_equal(array(mask_fig["data"][0]["z"]), kernels.sliding_window(n, 4, causal=False).float().numpy())
    assert not np.isnan(array(own_fig["data"][0]["z"])).any()  # BERT masks nothing
    w = array(new_fig["data"][0]["z"])  # masked cells are gaps (NaN)
    allowed = kernels.sliding_window(n, 4, causal=False).numpy()
    assert np.isnan(w[~allowed]).all()
    assert np.allclose(np.nansum(w, axis=1), 1, atol=1e-4)
    at.radio(key="mk.kind").set_value("block-sparse").run()
    _ok(at)
    assert np.array_equal(
        array(_charts(at)[0]["data"][0]["z"]), kernels.block_sparse(n, 3, causal=False).float().numpy()
    )
    at.button(key="mk.measure").click().run()
    _ok(at)
    assert set(at.dataframe[0].value["method"]) == set(
        ("dense + mask", "sliding window (blocked)", "block-sparse (blocked)")
    )


@pytest.mark.slow  # SmolLM2's queries and keys
def test_on_a_decoder_the_mask_drawn_is_the_mask_applied_window_and_causal(smollm2_hf):
    from attnviz.lessons import kernels

    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["model"], at.query_params["backend"] = "smollm2", "hf"
    at.switch_page("app_pages/masks.py").run()
    _ok(at)
    mask_fig, own_fig, new_fig = _charts(at)[:3]
    drawn = array(mask_fig["data"][0]["z"]).astype(bool)
    n = drawn.shape[0]
    applied = kernels.sliding_window(n, 4, causal=True).numpy()
    assert np.array_equal(drawn, applied) and not drawn[0, 1:].any()  # no key after the query: not a symmetric band
    w = array(new_fig["data"][0]["z"])
    assert np.array_equal(np.isnan(w), ~applied)  # the third panel's gaps are exactly the mask's zeros
    own = array(own_fig["data"][0]["z"])  # the model's own weights: its causal future grey (NaN), as on Heads
    assert np.array_equal(np.isnan(own), np.triu(np.ones((n, n), dtype=bool), 1))
    assert np.allclose(np.nansum(own, axis=1), 1, atol=1e-4)
    assert not any("Ġ" in y for y in mask_fig["data"][0]["y"])  # tokens as text
