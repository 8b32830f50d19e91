"""AppTest of the Start here page: a first lesson's seven steps, each drawn from the model's own numbers."""

import numpy as np
import pytest
import torch
from apptest import APP, _charts, _ok
from plotly_data import array
from streamlit.testing.v1 import AppTest

from attnviz.analysis import pronoun_cases, pronoun_scores
from attnviz.result import percent
from attnviz.ui.pages import start


def _page(**params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = v
    return at.switch_page("app_pages/start.py").run()


def test_the_head_shown_is_the_one_whose_pronoun_moves_most_with_the_word():
    tired = torch.tensor([[[0.6, 0.1], [0.2, 0.3]]])  # (1, 2, 2): head 1 follows "tired"
    wide = torch.tensor([[[0.1, 0.7], [0.3, 0.2]]])  # and "wide": (0.5) + (0.6) against (-0.1) + (-0.1)
    assert start.moving_head(tired, wide) == (0, 0)
    assert start.moving_head(tired[..., [1, 0]], wide[..., [1, 0]]) == (0, 1)  # nouns swapped: the other head


@pytest.mark.slow  # seven steps of one page, each an app run
def test_seven_steps_from_the_sentence_to_a_question_read_off_a_map(bundled_hf):
    tired = bundled_hf.run(bundled_hf.encode(start.TIRED.text)).main
    wide = bundled_hf.run(bundled_hf.encode(start.WIDE.text)).main
    s_tired = pronoun_scores.scores(tired, start.TIRED, "vote")
    layer, head = start.moving_head(s_tired, pronoun_scores.scores(wide, start.WIDE, "vote"))
    it = pronoun_cases.pronoun_piece(tired.source, pronoun_cases.locate(start.TIRED).pronoun)

    at = _page()
    _ok(at)
    assert at.segmented_control(key="start.step").value == 1 and not _charts(at)
    at.radio(key="start.guess").set_value("the animal").run()
    assert at.success and "an animal gets tired" in at.success[0].value

    at.button(key="start.next").click().run()  # 2: one head, its pronoun's row outlined
    _ok(at)
    (fig,) = _charts(at)
    assert np.allclose(array(fig["data"][0]["z"]), tired.weights[layer, head].numpy(), atol=1e-6)
    (outline,) = fig["layout"]["shapes"]
    assert outline["y0"] == it - 0.5 and outline["y1"] == it + 0.5  # the row of "it"
    assert any(f"Layer {layer + 1}, head {head + 1} is the head" in c.value for c in at.caption)

    at.button(key="start.next").click().run()  # 3: the row as bars, its shares said
    (bars,) = _charts(at)
    assert np.allclose(array(bars["data"][0]["y"]), tired.weights[layer, head, it].numpy(), atol=1e-6)
    animal, street = s_tired[layer, head].tolist()
    assert any(f"**{percent(animal)}** of its attention to *animal*" in m.value for m in at.markdown)

    at.button(key="start.next").click().run()  # 4: the same head on "too wide"
    (bars,) = _charts(at)
    assert np.allclose(array(bars["data"][0]["y"]), wide.weights[layer, head, it].numpy(), atol=1e-6)

    at.button(key="start.next").click().run()  # 5: every head of the layer
    (grid,) = _charts(at)
    assert sum(1 for t in grid["data"] if t["type"] == "heatmap") == tired.n_heads

    at.button(key="start.next").click().run()  # 6: a question on the next head, answered right and wrong
    _ok(at)
    other = (head + 1) % tired.n_heads
    quiz = at.radio(key=f"start.quiz.{layer}.{other}")
    row = tired.weights[layer, other, it]
    right = int(torch.argmax(row))
    heaviest = sorted(torch.argsort(row, descending=True)[:4].tolist())  # offered in the sentence's order
    assert quiz.options == [f"{tired.source_tokens[i]} (token {i + 1})" for i in heaviest]
    quiz.set_value(next(i for i in heaviest if i != right)).run()
    assert at.warning and "Not quite" in at.warning[0].value
    at.radio(key=f"start.quiz.{layer}.{other}").set_value(right).run()
    assert at.success and f"{percent(float(row[right]))} of the row" in at.success[0].value

    at.button(key="start.next").click().run()  # 7: where next
    _ok(at)
    assert at.button(key="start.next").disabled
    assert at.query_params["step"] == ["7"] or at.query_params["step"] == "7"


def test_a_link_opens_its_step_and_a_bad_step_opens_the_first():
    at = _page(step="5")
    _ok(at)
    assert at.segmented_control(key="start.step").value == 5
    at = _page(step="99")
    assert at.segmented_control(key="start.step").value == 1


@pytest.mark.slow  # SmolLM2 on both sentences
def test_on_a_decoder_the_lesson_says_its_it_cannot_move_and_shows_bert(bundled_hf):
    """On SmolLM2 the lesson picked 'the head whose it moves most' among heads that all moved 0 (its "it" comes
    before "tired"/"wide"), and step 4 said the same shares twice as a change."""
    at = _page(model="smollm2", step="4")
    _ok(at)
    assert any("reads left to right" in i.value and "SmolLM2" in i.value for i in at.info)
    wide = bundled_hf.run(bundled_hf.encode(start.WIDE.text)).main
    s_tired = pronoun_scores.scores(bundled_hf.run(bundled_hf.encode(start.TIRED.text)).main, start.TIRED, "vote")
    layer, head = start.moving_head(s_tired, pronoun_scores.scores(wide, start.WIDE, "vote"))
    it = pronoun_cases.pronoun_piece(wide.source, pronoun_cases.locate(start.WIDE).pronoun)
    (bars,) = _charts(at)
    assert np.allclose(array(bars["data"][0]["y"]), wide.weights[layer, head, it].numpy(), atol=1e-6)  # BERT's
