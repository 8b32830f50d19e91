"""The pronoun case files: the Winograd XML and JSON lines read into cases, and every malformed case named."""

import json

import pytest
from conftest import ROOT

from attnviz.analysis import pronoun_cases
from attnviz.analysis.pronoun_cases import PronounCase
from attnviz.corpus import pronoun_files

TEXT = "The cat chased the mouse because it was hungry."
CASE = PronounCase(TEXT, "it", ("cat", "mouse"), "cat")
WSC = ROOT.parent / "shared/data/winograd/WSCollection.xml"  # shared/ sits beside the checkout, not in it


def test_the_xml_reader_keeps_the_annotated_pronoun():
    xml = (
        b"<collection><schema><text><txt1>John saw Bill when he ran .</txt1><pron> He </pron>"
        b"<txt2>was glad.</txt2></text><answers><answer>John</answer><answer>Bill</answer></answers>"
        b"<correctAnswer>A</correctAnswer></schema></collection>"
    )
    (case,) = pronoun_files.read_winograd_xml(xml)
    assert case.text == "John saw Bill when he ran. He was glad."
    assert (
        case.text[case.pronoun_at :].startswith("He was") and pronoun_cases.locate(case).pronoun[0] == case.pronoun_at
    )


def test_winograd_xml_reader_on_a_fixture():
    cases = pronoun_files.read_winograd_xml(ROOT / "tests/data/winograd_fixture.xml")
    assert cases[0] == PronounCase(
        "The lamp lit the desk because it was switched on.", "it", ("The lamp", "the desk"), "The lamp", 30
    )
    assert cases[1].answer == "the tree" and cases[1].text == "The kite hit the tree because it was tall."


def test_jsonl_reader(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"text": TEXT, "pronoun": "it", "candidates": ["cat", "mouse"], "answer": "cat"}) + "\n\n")
    assert pronoun_files.read_cases(p) == [CASE]
    p.write_text(json.dumps({"text": TEXT, "pronoun": "it"}) + "\n")
    with pytest.raises(ValueError, match="line 1"):
        pronoun_files.read_cases(p)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("[1, 2, 3]", "line 2 is not a JSON object"),
        ('{"text": "a b c", "pronoun": "b", "candidates": 7, "answer": "a"}', "line 2: the candidates must be"),
        ('{"text": "a b c", "pronoun": 5, "candidates": ["a", "c"], "answer": "a"}', "line 2: the pronoun must be"),
        ("[" * 100_000, "line 2 nests too deeply"),
        ("{not json", "line 2 is not valid JSON"),
    ],
)
def test_malformed_jsonl_lines_are_named(line, message):
    good = json.dumps({"text": TEXT, "pronoun": "it", "candidates": ["cat", "mouse"], "answer": "cat"})
    with pytest.raises(ValueError, match=message):
        pronoun_files.read_jsonl([good, line])


@pytest.mark.parametrize(
    ("xml", "message"),
    [
        (b"<collection><schema><answers/></schema></collection>", "schema 1 has no <text>"),
        (b"<collection><schema><text><pron>it</pron></text></schema></collection>", "schema 1 has no <answers>"),
        (b"<collection><schema>", "malformed"),
        (b'<!DOCTYPE x [<!ENTITY a "aaaa">]><collection/>', "DOCTYPE"),
        (
            '<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE x [<!ENTITY a "aa"><!ENTITY b "&a;&a;">]>'
            "<collection><schema>&b;</schema></collection>".encode("utf-16"),
            "DOCTYPE",
        ),  # no byte says DOCTYPE
        (
            '<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE x [<!ENTITY a "aa"><!ENTITY b "&a;&a;">]>'
            "<collection><schema>&b;</schema></collection>".encode("utf-16-le"),
            "DOCTYPE",
        ),  # not even a BOM
    ],
)
def test_malformed_xml_is_named(xml, message):
    with pytest.raises(ValueError, match=message):
        pronoun_files.read_winograd_xml(xml)


def test_the_whole_winograd_collection_parses():
    if not WSC.exists():
        pytest.skip(f"the Winograd collection is not at {WSC}")
    cases = pronoun_files.read_winograd_xml(WSC)
    assert len(cases) == 285 and all(c.answer in c.candidates for c in cases)
    assert all(c.text[c.pronoun_at :].lower().startswith(c.pronoun.lower()) for c in cases)
