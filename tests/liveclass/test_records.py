"""A class's records without a database: codes as typed, links, the answers' CSV a spreadsheet will not run."""

import csv
import io

import pytest

from attnviz.liveclass import records


def test_a_typed_code_is_cleaned_or_refused():
    assert records.clean_code(" abc-d2e ") == "ABCD2E"
    assert records.clean_code("ABCD0E") == ""  # 0 is not in the alphabet (read off a projector: O or 0?)
    assert records.clean_code(None) == "" and records.clean_code("ABCDE") == ""


def test_links_carry_the_code_and_only_the_teachers_carries_the_secret():
    assert records.links("http://10.0.0.5:8501/", "ABCDEF") == {"student_url": "http://10.0.0.5:8501/?class=ABCDEF"}
    both = records.links("https://room.example", "ABCDEF", "s3cret")
    assert both["teacher_url"] == "https://room.example/?class=ABCDEF&teacher=s3cret"
    with pytest.raises(ValueError, match="http"):
        records.links("javascript:alert(1)", "ABCDEF")


def test_the_answers_csv_never_hands_a_spreadsheet_a_formula():
    rows = [
        {"student": "a" * 16, "name": '=HYPERLINK("x")', "answer": "-2+3", "at": 0.0},
        {"student": "b" * 16, "name": "", "answer": "42", "at": 60.0},
        {"student": "c" * 16, "name": " @SUM(A1)", "answer": "＝1", "at": 120.0},
    ]
    got = list(csv.reader(io.StringIO(records.answers_csv(7, "How sure?", rows))))
    assert got[0] == ["poll", "question", "student", "answer", "answered_at_utc"]
    assert got[1] == ["7", "How sure?", '\'=HYPERLINK("x")', "'-2+3", "1970-01-01T00:00:00Z"]
    assert got[2] == ["7", "How sure?", "bbbbbbbb", "42", "1970-01-01T00:01:00Z"]  # no name: the id's start; a number
    plain = records.answers_csv(1, "q", [{"student": "d" * 16, "name": "", "answer": "+1", "at": 0.0}])
    assert plain.splitlines()[1].split(",")[3] == "+1"  # a plain number stays a number
    assert got[3][2:4] == ["' @SUM(A1)", "'＝1"]  # after spaces, and the full-width form, too
