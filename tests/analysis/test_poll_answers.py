"""A class led live, without a browser: the command line, the poll answers, the figures, the snapshot, AppTest."""

import json
from collections import Counter

import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest

from attnviz.analysis import head_stats, poll_answers
from attnviz.cli import main
from attnviz.figures import class_charts as figures
from attnviz.figures import snapshot
from attnviz.liveclass.records import links
from attnviz.liveclass.store import Store

APP = str(ROOT / "app.py")
TEXT = "The animal didn't cross the street because it was too tired."


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_class_create_on_the_command_line(tmp_path, database, request):
    out = tmp_path / "class.json"
    db = str(tmp_path / "c.db") if database == "sqlite" else request.getfixturevalue("postgres").create()
    assert main(["class", "create", "--base-url", "http://room:8501/", "--db", str(db), "--json", str(out)]) == 0
    made = json.loads(out.read_text())
    assert set(made) == {"code", "teacher_url", "student_url", "expires"}
    assert made["student_url"] == f"http://room:8501/?class={made['code']}"
    secret = made["teacher_url"].split("teacher=")[1]
    assert Store(db).is_teacher(made["code"], secret)
    assert main(["class", "create", "--base-url", "ftp://x", "--db", str(db)]) == 2
    assert main(["class", "create", "--hours", "0", "--db", str(db)]) == 2


def test_a_database_setting_that_cannot_be_used_stops_the_server_at_start(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for value, says in [
        ("postgresql:db.school/attnviz", "is not a database attnviz can use"),
        ("mysql://u@h/x", "is not a database attnviz can use"),
        ("postgresql://postgres@127.0.0.1:1/attnviz", "Connection refused"),
    ]:
        monkeypatch.setenv("ATTNVIZ_DB", value)
        assert main(["serve", "--no-preload", "--port", "1"]) == 2
        err = capsys.readouterr().err
        assert "class database (ATTNVIZ_DB) cannot be used" in err and says in err and "Traceback" not in err
        assert main(["class", "create", "--base-url", "http://room/"]) == 2
        assert says in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no "postgresql:" folder, no SQLite file


def test_links_refuse_other_schemes():
    assert links("https://a.b/", "ABCDEF")["student_url"] == "https://a.b/?class=ABCDEF"
    with pytest.raises(ValueError):
        links("javascript:alert(1)", "ABCDEF")


def test_the_models_answers_are_its_weights_and_its_label(bundled_hf):
    result = bundled_hf.run(bundled_hf.encode(TEXT))["self"]
    view = {"layer": 2, "head": 3, "query": 11, "key": 3}
    row, word = poll_answers.model_answer(result, "token", view)
    assert row == pytest.approx(result.weights[2, 3, 11].tolist())
    assert word.startswith(result.source_tokens[int(result.weights[2, 3, 11].argmax())])
    share, text = poll_answers.model_answer(result, "number", view)
    assert share == pytest.approx(100 * float(result.weights[2, 3, 11, 3])) and text == f"{share:.1f}"
    label, same = poll_answers.model_answer(result, "head type", view)
    stats = head_stats.head_stats(result)
    assert label == same == head_stats.labels(stats, head_stats.uniform_entropy(result), result.kind)[2][3]


def test_poll_figures_count_the_class():
    fig = figures.poll_figure("head type", ["self", "broad"], Counter({"broad": 2, "self": 1}), "broad")
    assert list(fig.data[0].y) == [1, 2] and list(fig.data[1].y) == [0.0, 1.0]
    fig = figures.poll_figure("number", [], Counter({"10": 2, "55.5": 1}), 42.0)
    assert sorted(fig.data[0].x) == [10.0, 10.0, 55.5]
    fig = figures.poll_figure("token", ["<b>a</b> ·1", "b ·2"], Counter({"b ·2": 3}), [0.25, 0.75])
    assert list(fig.data[0].x)[0] == "&lt;b&gt;a&lt;/b&gt; ·1"  # labels escaped for plotly's HTML


def test_which_head_matters_most_is_the_largest_loss_increase_and_a_poll_takes_it(tmp_path, tiny_llama_dir):
    import torch

    from attnviz.engines import registry
    from attnviz.interventions import ablation

    grid = torch.tensor([[0.1, 0.5, -0.2], [0.3, 0.0, 0.05]])
    values, name = poll_answers.which_head(grid)
    assert name == "L1H2" and values == pytest.approx(grid.flatten().tolist())
    assert poll_answers.head_names(2, 3) == ["L1H1", "L1H2", "L1H3", "L2H1", "L2H2", "L2H3"]
    fig = figures.poll_figure("which head", poll_answers.head_names(2, 3), Counter({"L1H2": 2, "L2H1": 1}), values)
    assert list(fig.data[0].y) == [0, 2, 0, 1, 0, 0] and list(fig.data[1].y) == pytest.approx(values)
    # on a real decoder, the model's answer is the importance grid's largest
    engine = registry.load(str(tiny_llama_dir), "hf", "cpu")
    importance, _ = ablation.importance(engine, TEXT, "zero")
    _, right = poll_answers.which_head(importance)
    flat = int(importance.flatten().argmax())
    assert right == f"L{flat // 6 + 1}H{flat % 6 + 1}"
    store = Store(tmp_path / "classes.db")
    code, secret, _ = store.create_class()
    store.join(code, "s1")
    poll = store.start_poll(code, secret, "which head", "Which head matters most?", poll_answers.head_names(2, 6), {})
    assert store.answer(poll, "s1", right) and not store.answer(poll, "s1", "L1H1")  # one answer a student


def test_a_snapshot_escapes_what_people_typed():
    import plotly.graph_objects as go

    head, body = snapshot.parts(
        "<script>alert(1)</script>", {"text": "<img src=x onerror=alert(1)>"}, [go.Figure(go.Heatmap(z=[[1]]))]
    )
    page = snapshot.html_file(head, body)
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<title>&lt;script&gt;" in page
    assert snapshot.size(head, body) == len(page.encode())
    assert "cdn.plot.ly" not in body and "https://" not in head + body  # nothing to fetch


def _teacher_and_student(db):
    code, secret, _ = db.create_class()
    teacher = AppTest.from_file(APP, default_timeout=120)
    teacher.query_params.update({"class": code, "teacher": secret, "view": "Head", "layer": "3", "head": "5"})
    teacher.run()
    return code, secret, teacher


@pytest.mark.slow  # two sessions of a class, 2.4 s
def test_the_teachers_view_becomes_the_class_and_a_follower_takes_it():
    from attnviz.liveclass.database import default_path

    db = Store(default_path())
    code, secret, teacher = _teacher_and_student(db)
    assert not teacher.exception
    view = db.get(code).view
    assert view["page"] == "" and view["params"]["layer"] == "3" and view["params"]["head"] == "5"
    assert "teacher" not in view["params"] and "class" not in view["params"]
    student = AppTest.from_file(APP, default_timeout=120)
    student.query_params.update({"class": code, "layer": "1"})
    student.run()
    assert not student.exception
    assert student.query_params["layer"] == "3" and student.query_params["head"] == "5"
    assert student.slider(key="heads.head").value == 5
    assert student.toggle(key="class.follow_toggle").value is True
    # exploring alone: a new teacher view does not move this student
    student.toggle(key="class.follow_toggle").set_value(False).run()
    db.set_view(code, secret, {"page": "", "params": {**view["params"], "head": "7"}})
    student.run()
    assert student.slider(key="heads.head").value == 5
    student.toggle(key="class.follow_toggle").set_value(True).run()  # rejoin: the teacher's view at once
    assert student.query_params["head"] == "7"


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_bad_class_code_or_secret_is_a_message():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["class"] = "<b>nope</b>"
    at.run()
    assert not at.exception and any("is not a class code" in w.value for w in at.sidebar.warning)
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["class"] = "ZZZZZZ"
    at.run()
    assert not at.exception and any("No class has the code ZZZZZZ" in w.value for w in at.sidebar.warning)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_an_unwritable_class_database_is_a_message(monkeypatch, tmp_path):
    from attnviz.ui.room import seat

    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("ATTNVIZ_DB", str(blocker / "classes.db"))  # its folder is a file: cannot be made
    seat.store.cache_clear()
    _database_failure_is_a_message(seat, monkeypatch)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_an_unreachable_postgresql_is_a_message(monkeypatch):
    from attnviz.ui.room import seat

    monkeypatch.setenv("ATTNVIZ_DB", "postgresql://postgres@127.0.0.1:1/attnviz")  # nothing listens there
    seat.store.cache_clear()
    _database_failure_is_a_message(seat, monkeypatch)


def _database_failure_is_a_message(seat, monkeypatch) -> None:
    try:
        at = AppTest.from_file(APP, default_timeout=120)
        at.switch_page("app_pages/classroom.py").run()
        at.button(key="class.start").click().run()
        assert not at.exception
        assert any("could not be opened" in e.value and "ATTNVIZ_DB" in e.value for e in at.error)
        at = AppTest.from_file(APP, default_timeout=120)
        at.query_params["class"] = "ABCDEF"
        at.run()
        assert not at.exception and any("ATTNVIZ_DB" in w.value for w in at.sidebar.warning)
    finally:
        monkeypatch.undo()
        seat.store.cache_clear()
