"""AppTest of the pronouns page: it runs on the bundled models and sends what the engines computed."""

import numpy as np
import pytest
import torch
from apptest import APP, _charts, _guess, _ok
from plotly_data import array
from streamlit.testing.v1 import AppTest


def test_pronoun_lesson_predict_reveal_and_minimal_pair(bundled_hf):
    from attnviz import service
    from attnviz.analysis import pronoun_cases

    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("app_pages/pronouns.py").run()
    _ok(at)
    assert not _charts(at)  # nothing is revealed before a guess
    _guess(at, "street", "pr.predict.")
    _ok(at)
    grid, bars, pair = _charts(at)
    res = service.pronoun_case(bundled_hf, pronoun_cases.LESSON[0], "vote")  # the lesson: what "it" looks at
    assert np.allclose(array(grid["data"][0]["z"]), res.scores[..., 0].numpy(), atol=1e-6)  # "it" -> "animal"
    votes = torch.bincount(res.scores.argmax(-1).flatten(), minlength=2)
    # the verdict's box: green for a right guess, amber for a wrong one, blue for a tie (nothing to guess right)
    kind = "info" if res.tie else "success" if res.predicted == "street" else "warning"
    boxes = {
        k: [b.value for b in getattr(at, k) if "pick **animal**" in b.value] for k in ("success", "warning", "info")
    }
    assert [k for k, said in boxes.items() if said] == [kind], boxes
    said = boxes[kind][0]
    assert f"{int(votes[0])} pick **animal**, {int(votes[1])} pick **street**" in said
    assert ("split evenly" in said) == (votes[0] == votes[1]) == res.tie
    assert "Most heads pick" not in said or votes.max() > votes.min()
    if not res.tie:  # the verdict names the guess once, not the heads' pick twice
        verdict = "You called it." if res.predicted == "street" else "Not what you guessed (street)."
        assert said.endswith(verdict) and said.count("Most heads") == 1
    assert array(pair["data"][0]["z"]).shape == (6, 12)
    # the heads that attend most to the answer, as picked on this sentence, and said to be (not "best heads" alone)
    from attnviz.analysis import pronoun_scores

    top = pronoun_scores.best_heads(res.scores[..., 0], 5)
    listed = next(m.value for m in at.markdown if m.value.startswith("The heads that attend most to **animal**"))
    assert ", ".join(f"layer {la + 1} head {h + 1} ({v:.2f})" for la, h, v in top) in listed
    assert "Picked on this sentence, so the best case, not a typical head" in listed


@pytest.mark.parametrize("method", ["mas", "vote"])
@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_pronoun_benchmark_tab_on_eight_cases(bundled_hf, method):
    from attnviz import service
    from attnviz.analysis import pronoun_cases

    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("app_pages/pronouns.py").run()
    at.number_input(key="pr.limit").set_value(8).run()
    at.radio(key="pr.method").set_value(method).run()
    at.button(key="pr.run").click().run()
    _ok(at)
    bench = service.pronoun_benchmark(bundled_hf, pronoun_cases.LESSON[:8], method)
    assert at.metric[0].label == {"mas": "Maximum Attention Score", "vote": "Head vote"}[method]
    assert at.metric[0].value == f"{bench.accuracy:.1%}" and at.metric[1].value == f"{bench.chance:.1%}"
    assert at.metric[2].value == f"{bench.held_out_best_head()[0]:.1%}"
    assert at.metric[3].value == f"{bench.permutation_best_head():.1%}"
    assert any("8 cases scored" in c.value and "picked on these very cases" in c.value for c in at.caption)
    assert not any("word for word like a twin" in i.value for i in at.info)  # BERT's pronoun reads both ways
    assert [b.proto.label for b in at.get("download_button")] == ["Every case (CSV)", "Each head's accuracy (CSV)"]
    rows = bench.rows()
    assert [r["predicted"] for r in rows] == [r.predicted for r in bench.results] and len(rows) == 8
    assert sum(r["correct"] is True for r in rows) / 8 == bench.accuracy


@pytest.mark.slow  # SmolLM2 on the pronoun page, 2.4 s
def test_the_pronoun_benchmark_on_a_causal_model_offers_the_head_vote_only():
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["model"], at.query_params["backend"] = "smollm2", "hf"
    at.switch_page("app_pages/pronouns.py").run()
    _ok(at)
    assert at.radio(key="pr.method").options == ["Head vote"]
    assert any("not defined here" in i.value for i in at.info)
    at.number_input(key="pr.limit").set_value(4).run()
    at.button(key="pr.run").click().run()
    _ok(at)
    assert any("4 of these 4 cases read word for word like a twin" in i.value for i in at.info)


@pytest.mark.slow  # SmolLM2 on both sentences of a pair
def test_a_decoders_minimal_pair_says_why_no_head_can_flip_and_offers_bert(bundled_hf):
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["model"], at.query_params["backend"] = "smollm2", "hf"
    at.switch_page("app_pages/pronouns.py").run()
    _guess(at, "street", "pr.predict.")
    _ok(at)
    assert len(_charts(at)) == 2  # the grid and the bars; no all-grey chart of picks that cannot move
    assert any("reads left to right" in i.value and "equal to 1e-5" in i.value for i in at.info)
    at.button(key="pr.pair.bert").click().run()
    _ok(at)
    assert at.query_params.get("model") in (None, ["default"], "default")
    _guess(at, "street", "pr.predict.")
    assert len(_charts(at)) == 3 and not any("reads left to right" in i.value for i in at.info)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_benchmark_keeps_its_result_apart_and_leaves_the_class_s_sentences_in_the_memo(bundled_hf):
    from attnviz import service
    from attnviz.analysis import pronoun_cases

    service.memo().clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("app_pages/pronouns.py").run()
    at.number_input(key="pr.limit").set_value(8).run()
    at.button(key="pr.run").click().run()
    _ok(at)
    for case in pronoun_cases.LESSON[2:8]:  # each case ran without the short memo (the Lesson tab shows 0, 1)
        assert not service.memo().peek(("attention", "default", "hf", case.text, None, None))[0]
    key = ("pronoun-benchmark", bundled_hf.name, "hf", tuple(pronoun_cases.LESSON[:8]), "mas")
    assert service.heavy_memo().peek(key)[0]  # the benchmark itself, kept apart: not scored again
    assert service.admission().status() == {"running": [], "waiting": 0, "used": 0}
