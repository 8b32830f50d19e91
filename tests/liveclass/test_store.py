"""The classroom store: classes, the teacher's secret, views, polls, one answer each, restarts, concurrency."""

import threading
import time

import pytest

from attnviz.liveclass import schema
from attnviz.liveclass.records import ClassNotFound, NotAdmitted, NotTeacher, clean_code
from attnviz.liveclass.store import Store


@pytest.fixture
def db(store_target):
    """A store on each database in turn (SQLite and a real PostgreSQL, tests/conftest.py)."""
    store = Store(store_target)
    yield store
    store.close()


def _pulse(db: Store, code: str):
    """(view version, newest poll, revealed): what a follower's heartbeat compares; None without a class."""
    now = db.moment(code)
    return None if now is None else now.pulse()


def _everything(db: Store) -> str:
    """Every value in every table, as text."""
    with db.engine.connect() as conn:
        return " ".join(
            str(value)
            for table in schema.metadata.sorted_tables
            for row in conn.execute(table.select())
            for value in row
        )


def test_a_class_has_a_code_a_secret_and_an_expiry(db):
    code, secret, expires = db.create_class(hours=2)
    assert clean_code(code) == code and len(code) == 6
    assert not set(code) & set("01OI")
    assert expires == pytest.approx(time.time() + 7200, abs=5)
    assert db.is_teacher(code, secret) and not db.is_teacher(code, secret + "x") and not db.is_teacher(code, None)
    assert db.get(code.lower()).code == code  # typed codes are forgiving
    assert clean_code("ab-c 12") == "" and clean_code(" abc-def ") == "ABCDEF"


def test_the_secret_is_stored_hashed(db):
    code, secret, _ = db.create_class()
    assert code in _everything(db) and secret not in _everything(db)
    if db.path is not None:  # SQLite: not in the file's bytes either
        raw = b"".join(f.read_bytes() for f in db.path.parent.glob(db.path.name + "*"))  # with its WAL, if any
        assert secret.encode() not in raw


def test_only_the_teacher_changes_the_view_and_starts_or_reveals_polls(db):
    code, secret, _ = db.create_class()
    assert db.set_view(code, secret, {"page": "", "params": {"layer": "3"}}) == 1
    assert db.set_view(code, secret, {"page": "", "params": {"layer": "3"}}) == 1  # unchanged: same version
    for wrong in (None, "", "guess", secret[:-1]):
        with pytest.raises(NotTeacher):
            db.set_view(code, wrong, {"page": "inside", "params": {}})
        with pytest.raises(NotTeacher):
            db.start_poll(code, wrong, "head type", "?", ["self"], {})
    assert db.get(code).view == {"page": "", "params": {"layer": "3"}} and db.get(code).version == 1
    poll = db.start_poll(code, secret, "head type", "What kind?", ["self", "broad"], {"layer": 0})
    with pytest.raises(NotTeacher):
        db.reveal(code, "nope", poll)
    assert not db.poll(poll).revealed
    db.reveal(code, secret, poll)
    assert db.poll(poll).revealed


def test_one_answer_per_student_per_poll_and_answers_are_checked(db):
    code, secret, _ = db.create_class()
    db.join(code, "s1")
    db.join(code, "s2")
    poll = db.start_poll(code, secret, "token", "Which word?", ["the ·1", "animal ·2"], {})
    assert db.answer(poll, "s1", "animal ·2") is True
    assert db.answer(poll, "s1", "the ·1") is False  # a second answer is refused
    assert db.answered(poll, "s1") == "animal ·2"
    with pytest.raises(ValueError, match="not one of"):
        db.answer(poll, "s2", "<script>")
    number = db.start_poll(code, secret, "number", "How much?", [], {})
    with pytest.raises(ValueError, match="not a number"):
        db.answer(number, "s2", "lots")
    for bad in ("nan", "inf", "-1", "100.5", "1e308"):
        with pytest.raises(ValueError, match="percentage"):
            db.answer(number, "s2", bad)
    assert db.answer(number, "s2", "42.50")
    assert db.answered(number, "s2") == "42.5"
    assert db.results(poll) == {"animal ·2": 1} and db.count(number) == 1
    assert db.current_poll(code).id == number


def test_students_follow_or_explore_and_names_are_kept_as_typed(db):
    code, _, _ = db.create_class()
    db.join(code, "s1", "<b>Ada</b>")
    db.join(code, "s2")
    db.set_following(code, "s2", False)
    assert db.students(code) == (2, 1)
    db.join(code, "s1")  # a rejoin without a name keeps the name
    assert db._value("SELECT name FROM students WHERE student = 's1'") == "<b>Ada</b>"


def test_csv_results_name_students_and_defuse_formulas(db):
    code, secret, _ = db.create_class()
    names = ("@Bob", " =1+1", "\n=2", "＝HYPERLINK()", "\t-3", "Ada", "-5")
    for i, name in enumerate(names):
        db.join(code, f"s{i}", name)
    poll = db.start_poll(code, secret, "head type", "Kind?", ["=cmd|' /C calc'!A0", "self"], {})
    for i in range(len(names)):
        db.answer(poll, f"s{i}", "=cmd|' /C calc'!A0" if i == 0 else "self")
    import csv
    import io

    rows = list(csv.reader(io.StringIO(db.results_csv(code, secret, poll))))
    assert rows[0] == ["poll", "question", "student", "answer", "answered_at_utc"]
    assert [r[2] for r in rows[1:]] == ["'@Bob", "' =1+1", "'\n=2", "'＝HYPERLINK()", "'\t-3", "Ada", "-5"]
    assert rows[1][3].startswith("'=cmd")
    with pytest.raises(NotTeacher):  # the answers with names are the teacher's
        db.results_csv(code, None, poll)


def test_an_expired_class_is_gone(db):
    code, secret, _ = db.create_class(hours=1 / 3600 / 10)  # a tenth of a second
    time.sleep(0.2)
    with pytest.raises(ClassNotFound):
        db.get(code)
    with pytest.raises(ClassNotFound):
        db.set_view(code, secret, {})


def test_everything_survives_a_new_store_on_the_same_database(store_target):
    path = store_target
    first = Store(path)
    code, secret, _ = first.create_class()
    first.set_view(code, secret, {"page": "inside", "params": {"head": "5"}})
    first.join(code, "s1")
    poll = first.start_poll(code, secret, "head type", "Kind?", ["self", "broad"], {})
    first.answer(poll, "s1", "self")
    first.close()
    again = Store(path)  # a restarted server
    assert again.get(code).view["params"] == {"head": "5"}
    assert again.is_teacher(code, secret)
    assert again.results(poll) == {"self": 1}
    again.close()


def test_thirty_students_answering_in_the_same_second_lose_nothing(db):
    code, secret, _ = db.create_class()
    for i in range(30):
        db.join(code, f"s{i}")
    poll = db.start_poll(code, secret, "head type", "Kind?", ["self", "broad", "other"], {})
    start = threading.Barrier(30)
    kept = []

    def student(i: int) -> None:
        start.wait()
        kept.append(db.answer(poll, f"s{i}", ("self", "broad", "other")[i % 3]))
        kept.append(db.answer(poll, f"s{i}", "self"))  # and a second try each, refused

    threads = [threading.Thread(target=student, args=(i,)) for i in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert kept.count(True) == 30 and kept.count(False) == 30
    assert db.results(poll) == {"self": 10, "broad": 10, "other": 10}


def test_a_moment_is_the_class_and_its_newest_poll_in_one_read(db):
    code, secret, _ = db.create_class()
    assert _pulse(db, code) == (0, None, False)
    db.set_view(code, secret, {"page": "inside", "params": {}})
    first = db.start_poll(code, secret, "number", "?", [], {})
    second = db.start_poll(code, secret, "number", "?", [], {})
    assert _pulse(db, code) == (1, second, False) and first < second
    db.reveal(code, secret, second)
    assert _pulse(db, code) == (1, second, True)
    assert _pulse(db, "ZZZZZZ") is None


def test_a_poll_takes_answers_only_from_the_students_following_when_it_was_asked(db):
    code, secret, _ = db.create_class()
    db.join(code, "early")
    db.join(code, "wandering")
    db.set_following(code, "wandering", False)
    poll = db.start_poll(code, secret, "head type", "Kind?", ["self", "broad"], {})
    db.join(code, "late")  # a page opened after the question
    assert db.voters(poll) == 1 and db.may_answer(poll, "early") and not db.may_answer(poll, "late")
    for who in ("late", "wandering", "never-joined"):
        with pytest.raises(ValueError, match="asked before this page joined"):
            db.answer(poll, who, "self")
    assert db.answer(poll, "early", "self") and db.results(poll) == {"self": 1}


def test_a_revealed_poll_takes_no_answer(db):
    code, secret, _ = db.create_class()
    db.join(code, "s1")
    db.join(code, "s2")
    poll = db.start_poll(code, secret, "head type", "Kind?", ["self", "broad"], {})
    db.answer(poll, "s1", "self")
    db.reveal(code, secret, poll)
    with pytest.raises(ValueError, match="revealed"):
        db.answer(poll, "s2", "broad")
    assert db.results(poll) == {"self": 1} and not db.may_answer(poll, "s2")


def test_the_teacher_closes_the_class_and_removes_a_student(db):
    code, secret, _ = db.create_class()
    db.join(code, "in")
    db.join(code, "stuffer")
    poll = db.start_poll(code, secret, "head type", "Kind?", ["self", "broad"], {})
    db.answer(poll, "stuffer", "broad")
    with pytest.raises(NotTeacher):
        db.lock(code, "guess", True)
    db.lock(code, secret, True)
    assert db.locked(code)
    with pytest.raises(NotAdmitted, match="closed"):
        db.join(code, "new")
    db.join(code, "in", "Ada")  # those already in stay
    with pytest.raises(NotTeacher):
        db.remove(code, None, "stuffer")
    assert db.moment(code).removed == frozenset()
    db.remove(code, secret, "stuffer")
    assert db.results(poll) == {} and db.voters(poll) == 1  # their answer to the open poll is gone
    assert db.moment(code).removed == {"stuffer"}  # what a follower's run checks, in the read it makes anyway
    with pytest.raises(NotAdmitted, match="removed"):
        db.join(code, "stuffer")
    assert [s["student"] for s in db.roster(code, secret)] == ["in"] and db.students(code) == (1, 1)
    db.lock(code, secret, False)
    db.join(code, "new")
    assert db.students(code) == (2, 2)


def test_two_servers_share_one_class(store_target):
    """Replicas: a teacher's store and a student's store on the same database see one class."""
    teacher, student = Store(store_target), Store(store_target)
    code, secret, _ = teacher.create_class()
    student.join(code, "s1")
    teacher.set_view(code, secret, {"page": "inside", "params": {"head": "2"}})
    assert student.get(code).view["params"] == {"head": "2"} and _pulse(student, code) == (1, None, False)
    poll = teacher.start_poll(code, secret, "head type", "Kind?", ["self", "broad"], {})
    assert student.answer(poll, "s1", "broad") and not student.answer(poll, "s1", "self")
    teacher.reveal(code, secret, poll)
    assert _pulse(student, code) == (1, poll, True) and teacher.results(poll) == {"broad": 1}
    teacher.close()
    student.close()


def test_no_answer_is_kept_after_the_reveal_even_when_they_race(db):
    """Answers sent while the teacher reveals: each is kept before the reveal or refused after it, never kept after."""
    code, secret, _ = db.create_class()
    for i in range(40):
        db.join(code, f"s{i}")
    poll = db.start_poll(code, secret, "head type", "Kind?", ["self", "broad"], {})
    start, at_reveal, outcomes = threading.Barrier(41), [], []

    def student(i: int) -> None:
        start.wait()
        try:
            outcomes.append(db.answer(poll, f"s{i}", "self"))
        except ValueError as err:
            outcomes.append(str(err))

    def teacher() -> None:
        start.wait()
        time.sleep(0.005)
        db.reveal(code, secret, poll)
        at_reveal.append(db.count(poll))

    threads = [threading.Thread(target=student, args=(i,)) for i in range(40)] + [threading.Thread(target=teacher)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    kept = outcomes.count(True)
    refused = [o for o in outcomes if isinstance(o, str)]
    assert kept + len(refused) == 40 and all("revealed" in o for o in refused)
    assert db.count(poll) == kept == at_reveal[0]  # nothing arrived after the reveal


def test_a_postgresql_database_in_sql_ascii_works_and_keeps_text_that_is_not_ascii(postgres):
    """A cluster made without a UTF-8 locale (initdb in a bare container: seen in the compose check's stand-in) has
    SQL_ASCII databases; psycopg hands back bytes there, and SQLAlchemy's start failed on the server's version."""
    import psycopg

    name = "attnviz_sql_ascii"
    with psycopg.connect(postgres.url(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
    store = Store(postgres.url(name))
    try:
        code, secret, _ = store.create_class()
        view = {"page": "", "params": {"text": "Le café 🐍 <b>n'a</b> pas traversé"}}
        store.set_view(code, secret, view)
        again = Store(postgres.url(name))  # a second server reads it back
        assert again.get(code).view == view and again.moment(code).info.view == view
        again.close()
    finally:
        store.close()
