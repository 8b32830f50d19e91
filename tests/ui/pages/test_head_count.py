"""AppTest of the head_count page: it runs on the bundled models and sends what the engines computed."""

import re

import pytest
from apptest import APP, _ok
from streamlit.testing.v1 import AppTest


@pytest.mark.slow  # the four head models, scored
def test_head_count_page_reveals_the_shipped_accuracies_and_checks_typed_digits():
    from attnviz.lessons import head_models

    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("app_pages/head_count.py").run()
    _ok(at)
    assert not at.dataframe  # nothing revealed before a guess
    # nor any model's score on the typed digits: "12/12 digits right" below the question answered it
    scored = [m.value for m in at.markdown if re.match(r"\*\*\d heads?\*\*", m.value)]
    assert len(scored) == 4 and not any("digits right" in m for m in scored), scored
    assert all("Where the heads look: head 1:" in m for m in scored)  # the maps and their shares stay
    at.radio(key="hc.predict.mirror-sum.guess").set_value("8 heads").run()
    at.button(key="hc.predict.mirror-sum.reveal").click().run()
    _ok(at)
    table = at.dataframe[0].value
    stated = {m["heads"]: m["accuracy"] for m in head_models.shipped("mirror-sum")["models"]}
    assert [float(v.rstrip("%")) / 100 for v in table["digit accuracy"]] == [
        pytest.approx(stated[h], abs=1e-4) for h in table["heads"]
    ]
    # a wrong guess gets the amber box, not the green one a right guess gets
    assert any("You guessed 8 heads. Highest held-out accuracy: 2 heads," in s.value for s in at.warning)
    assert not any("You guessed" in s.value for s in at.success)
    assert (
        sum("digits right" in m.value for m in at.markdown if re.match(r"\*\*\d heads?\*\*", m.value)) == 4
    )  # revealed: scored
    at.text_input(key="hc.digits").set_value("12ab").run()
    assert any("digits 0-9" in w.value.replace("\\", "") for w in at.warning)  # shown escaped
    at.text_input(key="hc.digits").set_value("123456789012").run()
    _ok(at)
    assert any("`210987654321`" not in m.value and "The right answer" in m.value for m in at.markdown)


@pytest.mark.slow  # a live measurement
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


def test_a_tie_for_the_best_accuracy_is_said_to_be_one():
    from attnviz.lessons import head_models
    from attnviz.ui.pages.head_count import best_text

    reversal = head_models.shipped("reversal")["models"]  # 1, 2, 4 and 8 heads: all 100% on held-out reversal
    top = max(m["accuracy"] for m in reversal)
    tied = [m["heads"] for m in reversal if m["accuracy"] == top]
    assert len(tied) > 1 and best_text(reversal).startswith("A tie: ") and f"{tied[-1]} heads" in best_text(reversal)
    models = [{"heads": 1, "accuracy": 0.5}, {"heads": 2, "accuracy": 0.9}]
    assert best_text(models) == "Highest held-out accuracy: 2 heads, 90.00% of digits right."


def test_the_tasks_text_counts_positions_from_1_as_the_maps_labels_do_and_says_what_the_models_answer():
    """The maps label "3:2" the 3rd digit; the task's text counted from 0 ("11 − i"). Its formulas, read 1-based,
    are checked here against the answer the models are trained on (head_models.answer)."""
    import torch

    from attnviz.lessons import head_models
    from attnviz.ui.pages.head_count import TASK_TEXT

    assert "position 13 − i (positions 1 to 12)" in TASK_TEXT["reversal"]
    assert "(x[i−1] + x[13−i]) mod 10 (positions 1 to 12; x[0] = 0)" in TASK_TEXT["mirror-sum"]
    x = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8]])
    digit = {i: x[0, i - 1].item() for i in range(1, 13)} | {0: 0}  # 1-based, x[0] = 0
    assert head_models.answer(x, "reversal")[0].tolist() == [digit[13 - i] for i in range(1, 13)]
    mirror_sum = [(digit[i - 1] + digit[13 - i]) % 10 for i in range(1, 13)]
    assert head_models.answer(x, "mirror-sum")[0].tolist() == mirror_sum
