"""AppTest of the Induction heads page: predict, reveal, and the grid is the package's scores."""

import math

import pytest
from apptest import APP, _charts, _guess, _ok
from plotly_data import array
from streamlit.testing.v1 import AppTest

from attnviz.interventions import induction_scores
from attnviz.ui.pages import induction


def _page(**params):
    at = AppTest.from_file(APP, default_timeout=180)
    for k, v in params.items():
        at.query_params[k] = v
    return at.switch_page("app_pages/induction.py").run()


@pytest.mark.slow  # induction on SmolLM2
def test_the_page_reveals_the_loss_and_every_head_s_induction_score(smollm2_hf):
    at = _page(model="smollm2", backend="hf", length="20", seed="3")
    _ok(at)
    assert not _charts(at)  # nothing before the guess
    _guess(at, "go down", "ind.q.")
    _ok(at)
    charts = _charts(at)
    expected = induction_scores.run(smollm2_hf, 20, 3)
    loss = charts[0]["data"]
    assert [d["name"] for d in loss] == ["first copy", "second copy"]
    assert abs(sum(loss[1]["y"]) / len(loss[1]["y"]) - expected.second_copy_loss) < 1e-4
    # loss index i predicts token i + 1 (0-based): x is that token's 1-based position, i + 2, as on Knock out
    assert loss[0]["x"][0] == 2 and loss[1]["x"][-1] == len(expected.ids)
    assert charts[0]["layout"]["xaxis"]["title"]["text"] == "position of the token predicted (1-based)"
    assert expected.batch == induction_scores.BATCH
    best = expected.best(2)
    sd = expected.spread("induction")
    listed = next(m.value for m in at.markdown if m.value.startswith("By mean induction score"))
    assert f"layer {best[0][0] + 1}, head {best[0][1] + 1}: {best[0][2]:.2f} ± {float(sd[best[0][:2]]):.2f}" in listed
    grid = array(charts[1]["data"][0]["z"])
    assert abs(grid - expected.induction.numpy()).max() < 1e-5
    said = at.success[0].value  # "go down" guessed, and the loss went down: the green box
    assert "it went down, so the model copies. You called it." in said, said
    assert expected.second_copy_loss < expected.first_copy_loss - 0.5
    caption = next(c.value for c in at.caption if c.value.startswith("Each token's loss"))
    uniform = math.log(len(smollm2_hf.tokenizer.hf))
    assert (f"The first copy's mean, {expected.first_copy_loss:.1f}, is above" in caption) == (
        expected.first_copy_loss > uniform
    ), caption


def test_a_first_copy_worse_than_a_uniform_guess_is_said_to_be_and_no_other():
    """Gemma 3's first copy averaged 16.3 nats against a uniform guess's 12.5 (2026-12-02), with no word why."""
    assert induction.worse_than_uniform(16.33, 12.48).startswith(" The first copy's mean, 16.3, is above that")
    assert induction.worse_than_uniform(9.0, 10.8) == "" and induction.worse_than_uniform(10.8, 10.8) == ""


def test_bert_is_told_the_page_needs_a_decoder():
    at = _page()
    _ok(at)
    assert "decoder" in at.info[0].value and not _charts(at)
