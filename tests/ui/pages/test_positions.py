"""AppTest of the positions page: it runs on the bundled models and sends what the engines computed."""

import numpy as np
import pytest
from apptest import APP, _charts, _ok
from plotly_data import array
from streamlit.testing.v1 import AppTest


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_positions_page_draws_the_formula_and_reveals_relative_position():
    from attnviz.lessons import encodings

    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("app_pages/positions.py").run()
    _ok(at)
    pe = array(_charts(at)[0]["data"][0]["z"])
    assert np.abs(pe - encodings.sinusoidal(48, 64).numpy()).max() < 1e-6
    # the bar says what the colours are: dot products up to d/2 = 32, not attention weights
    dots = _charts(at)[1]["data"][0]
    assert dots["colorbar"]["title"]["text"] == "dot product" and np.nanmax(array(dots["z"])) > 31.9
    at.radio(key="pos.q1.guess").set_value("different").run()
    at.button(key="pos.q1.reveal").click().run()
    _ok(at)
    pairs = "PE(10)·PE(12) = 28.3039, PE(30)·PE(32) = 28.3039"  # the same number: relative position
    assert any("Not what you guessed: they are the same" in s.value and pairs in s.value for s in at.warning)
    assert not at.success  # a wrong guess's box is amber
    # the guess is locked once revealed: no button, its choice disabled, and a change sent anyway is put back
    assert at.radio(key="pos.q1.guess").disabled and not [b for b in at.button if b.key == "pos.q1.reveal"]
    assert any(c.value.startswith("Your guess is locked in") for c in at.caption)
    at.session_state["pos.q1.guess"] = "the same"  # as a script on the websocket could send (AppTest will not)
    at.run()
    assert at.radio(key="pos.q1.guess").value == "different" and not at.success
    assert any("Not what you guessed" in s.value for s in at.warning)
    at.slider(key="pos.n").set_value(8).run()  # fewer positions on the map than the question names
    assert any(pairs in s.value for s in at.warning)
    assert any("positional" in m.value.lower() or "Positional" in m.value for m in at.markdown)
    assert any("previous-token" in m.value for m in at.markdown)  # the bundled BERT has such heads
    assert any(c.value == "Drawn with SmolLM2's numbers: heads of 64 dimensions, θ 100,000." for c in at.caption)
    at.select_slider(key="pos.theta.64.100000").set_value(1000000.0).run()  # Gemma 3's full layers' θ
    _ok(at)
    rope = next(c for c in _charts(at) if c["layout"]["title"]["text"].startswith("cos(angle) of each pair"))
    n = len(rope["data"][0]["y"])
    assert np.allclose(array(rope["data"][0]["z"]), np.cos(encodings.rotary_angles(n, 64, 1e6).numpy()), atol=1e-6)


def test_a_positional_head_opens_on_the_heads_page_with_the_shared_url_state():
    """ "Open in Heads" goes to that head on the Heads page (widgets.open_head, shared with the Model overview and the
    Corpus page), keeping the model and the palette the URL had."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"palette": "Magma"})
    at.switch_page("app_pages/positions.py").run()
    _ok(at)
    first = next(m.value for m in at.markdown if m.value.startswith("Layer ") and "of its attention" in m.value)
    layer, head = (int(w.strip(":,")) for w in first.split()[1:4:2])
    share = first.split(", ")[-1].removesuffix(" of its attention")
    # BERT's previous-token head: "over 99.9%" of its attention (the page said "100%"), not all of it
    assert share == "over 99.9%" or 50 < float(share.rstrip("%")) < 100
    at.button(key="pos.open0").click().run()
    _ok(at)
    assert at.query_params["view"] == "Head"
    assert (at.query_params["layer"], at.query_params["head"]) == (str(layer), str(head))
    assert at.query_params["palette"] == "Magma"
    assert (at.slider(key="heads.layer").value, at.slider(key="heads.head").value) == (layer, head)  # the Heads page
