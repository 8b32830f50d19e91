"""Pronoun cases read from files: the Winograd Schema Challenge's XML (WSCollection.xml, PDPChallenge2016.xml) and
JSON lines ({"text", "pronoun", "candidates", "answer"}, "pronoun_at" optional). A malformed case is a ValueError
that names it; a file of more than MAX_CASES cases, or XML that declares a DOCTYPE or entities, is refused.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import NoReturn
from xml.parsers import expat

from attnviz.analysis.pronoun_cases import LESSON, PronounCase


def _clean(s: str | None) -> str:
    """Whitespace collapsed to single spaces."""
    return " ".join((s or "").split())


def _tidy(text: str) -> str:
    """No space before punctuation ("because ." -> "because.")."""
    return re.sub(r"\s+([.,;:!?])", r"\1", text)


MAX_CASES = 100_000  # a file with more cases than this is refused before it is read further


def _schema_case(schema: ET.Element, n: int) -> PronounCase:
    """One <schema> of a Winograd XML file as a case; a ValueError naming the schema if it is malformed."""
    text = schema.find("text")
    answers_el = schema.find("answers")
    if text is None or answers_el is None:
        missing = "<text>" if text is None else "<answers>"
        raise ValueError(f"schema {n} has no {missing}")
    before, pronoun, after = (_clean(text.findtext(tag)) for tag in ("txt1", "pron", "txt2"))
    if not pronoun:
        raise ValueError(f"schema {n} has no <pron>")
    answers = [_clean(a.text).rstrip(".,;:") for a in answers_el.iter("answer")]
    letter = _clean(schema.findtext("correctAnswer")).strip(" .").upper()
    index = ord(letter[0]) - ord("A") if letter else -1
    if not 0 <= index < len(answers):
        raise ValueError(f"schema {n}: its correct answer {letter!r} is not one of its {len(answers)} answers")
    before = _tidy(before)
    at = len(before) + 1 if before else 0  # the annotated pronoun starts where the text before it ends
    body = _tidy(f"{before} {pronoun} {after}".strip())
    try:
        return PronounCase(body, pronoun, tuple(answers), answers[index], at)
    except ValueError as err:
        raise ValueError(f"schema {n}: {err}") from err


NO_DTD = "the XML declares a DOCTYPE or entities; a Winograd file needs neither"


def _parse_without_dtd(raw: bytes) -> ET.Element:
    """The XML's root, refused (ValueError) at the first DOCTYPE or entity declaration. The parser itself
    refuses them, after decoding the file in whatever encoding it declares (UTF-16 included), so no byte
    pattern can hide one; nothing is expanded before the refusal."""

    def refuse(*_args) -> NoReturn:
        raise ValueError(NO_DTD)

    check = expat.ParserCreate()  # a first pass that builds nothing: it stops at the DOCTYPE's first byte
    check.StartDoctypeDeclHandler = refuse
    check.EntityDeclHandler = refuse
    check.UnparsedEntityDeclHandler = refuse
    check.ExternalEntityRefHandler = refuse
    try:
        check.Parse(raw, True)
    except expat.ExpatError as err:
        raise ET.ParseError(str(err)) from err
    return ET.fromstring(raw)


def read_winograd_xml(source: str | bytes | Path) -> list[PronounCase]:
    """Cases from the Winograd Schema Challenge XML (WSCollection.xml, PDPChallenge2016.xml)."""
    data = Path(source).read_bytes() if isinstance(source, Path) else source
    raw = data.encode() if isinstance(data, str) else data
    try:
        root = _parse_without_dtd(raw)
    except ET.ParseError as err:
        raise ValueError(f"the XML is malformed ({err})") from err
    schemas = list(root.iter("schema"))
    if len(schemas) > MAX_CASES:
        raise ValueError(f"the file has {len(schemas):,} schemas; at most {MAX_CASES:,} are read")
    return [_schema_case(schema, n) for n, schema in enumerate(schemas, 1)]


def _json_case(d: object, n: int) -> PronounCase:
    """One JSON object as a case; a ValueError naming the line if it is malformed."""
    if not isinstance(d, dict):
        raise ValueError(f"line {n} is not a JSON object with text, pronoun, candidates and answer")
    try:
        return PronounCase(d["text"], d["pronoun"], d["candidates"], d["answer"], d.get("pronoun_at"))
    except KeyError as err:
        raise ValueError(f"line {n} has no {err.args[0]!r}") from err
    except (ValueError, TypeError) as err:
        raise ValueError(f"line {n}: {err}") from err


def read_jsonl(lines: Iterable[str]) -> list[PronounCase]:
    """Cases from JSON lines: {"text", "pronoun", "candidates", "answer"} each, "pronoun_at" optional."""
    cases = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"line {n} is not valid JSON ({err.msg})") from err
        except RecursionError as err:
            raise ValueError(f"line {n} nests too deeply to be a case") from err
        cases.append(_json_case(d, n))
        if len(cases) > MAX_CASES:
            raise ValueError(f"the file has more than {MAX_CASES:,} cases")
    return cases


def read_cases(path: Path) -> list[PronounCase]:
    """A .jsonl file, a Winograd .xml file, or "lesson" for the built-in minimal pairs."""
    if str(path) == "lesson":
        return list(LESSON)
    if path.suffix.lower() == ".xml":
        return read_winograd_xml(path)
    if path.suffix.lower() in (".jsonl", ".json"):
        return read_jsonl(path.read_text(encoding="utf-8").splitlines())
    raise ValueError(f"{path.name}: give a .jsonl file or a Winograd .xml file")
