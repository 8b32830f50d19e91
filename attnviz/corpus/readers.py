"""A corpus's documents, read from what a person names: a folder of .txt files, a .jsonl / .csv / .parquet file with
a text column, a .txt file, a list of strings, or the built-in corpus.

Each document is (source, text): where it came from ("essays/a.txt", "data.jsonl:12", "texts[2]") and its text. A
document that cannot be used (empty, not UTF-8, longer than MAX_CHARS, a line that is not JSON) is skipped with its
reason, and counted; a corpus that cannot be read at all (a path that does not exist, a binary file, a column that is
not there, no usable document) raises CorpusError with a message that says what to do.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

BUILTIN = "builtin"
MAX_CHARS = 2_000_000  # a longer document (a 10 MB single line) is skipped: split it into documents first
SUFFIXES = (".txt", ".jsonl", ".csv", ".parquet")
BUILTIN_SOURCE = (
    "Python's documentation topics as the running Python ships them (the standard library's pydoc_data.topics: "
    "{n} topics, {chars:,} characters of English prose with code; Python Software Foundation License), each "
    "topic's paragraphs (split at blank lines) as documents"
)


class CorpusError(ValueError):
    """A corpus that cannot be read: the message says what to do."""


@dataclass
class Corpus:
    """A corpus's usable documents, what it is, and what was skipped (reason -> count, and the first few sources)."""

    name: str
    documents: list[tuple[str, str]]
    described: str = ""
    skipped: dict[str, int] = field(default_factory=dict)
    skipped_examples: list[str] = field(default_factory=list)

    def skip(self, source: str, reason: str) -> None:
        """Count a document that cannot be used, and keep the first few for the manifest."""
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        if len(self.skipped_examples) < 10:
            self.skipped_examples.append(f"{source}: {reason}")

    def add(self, source: str, text: object) -> None:
        """Keep a document, or skip it with its reason (empty, too long, binary, not a string)."""
        if not isinstance(text, str):
            self.skip(source, "not a string" if text is not None else "no text")
        elif not text.strip():
            self.skip(source, "empty")
        elif len(text) > MAX_CHARS:
            self.skip(source, f"longer than {MAX_CHARS:,} characters (split it into documents)")
        elif "\x00" in text:
            self.skip(source, "binary (a NUL character)")
        else:
            self.documents.append((source, text))

    @property
    def characters(self) -> int:
        """The usable documents' characters."""
        return sum(len(t) for _, t in self.documents)


def builtin() -> Corpus:
    """The built-in corpus: Python's documentation topics (offline, PSF licence), a paragraph per document."""
    from pydoc_data.topics import topics

    corpus = Corpus(BUILTIN, [])
    for name in sorted(topics):
        for i, para in enumerate(p for p in topics[name].split("\n\n") if p.strip()):
            corpus.add(f"{name}:{i}", para.strip())
    chars = sum(len(v) for v in topics.values())
    corpus.described = BUILTIN_SOURCE.format(n=len(topics), chars=chars) + f" (Python {sys.version.split()[0]})"
    return corpus


def from_texts(texts: Iterable[str], name: str = "texts") -> Corpus:
    """A corpus of texts a caller has (a list of strings), each named by where it stood in the list: "texts[2]" (a
    bare "2" read, beside the Corpus page's 1-based positions, as the second text)."""
    corpus = Corpus(name, [], "texts passed in")
    for i, text in enumerate(texts):
        corpus.add(f"texts[{i}]", text)
    return _usable(corpus)


def read(path: str | Path, text_column: str = "text") -> Corpus:
    """The documents at `path` (see the module's docstring); "builtin" is the built-in corpus."""
    if str(path) == BUILTIN:
        return builtin()
    p = Path(path).expanduser()
    if not p.exists():
        raise CorpusError(
            f"no file or folder at {str(path)[:200]!r}: name a folder of .txt files, a "
            f".jsonl, .csv, .parquet or .txt file, or 'builtin'"
        )
    if p.is_dir():
        corpus = _folder(p)
    elif p.suffix.lower() == ".txt":
        corpus = Corpus(p.name, [], f"the text file {p.name}")
        _text_file(corpus, p, p.name)
    elif p.suffix.lower() == ".jsonl":
        corpus = _jsonl(p, text_column)
    elif p.suffix.lower() == ".csv":
        corpus = _csv(p, text_column)
    elif p.suffix.lower() == ".parquet":
        corpus = _parquet(p, text_column)
    else:
        raise CorpusError(
            f"{p.name[:100]!r} is not a corpus attnviz reads: name a folder of .txt files or a file "
            f"ending in {', '.join(SUFFIXES)}"
        )
    return _usable(corpus)


def _usable(corpus: Corpus) -> Corpus:
    if not corpus.documents:
        why = "; ".join(f"{n} {reason}" for reason, n in corpus.skipped.items()) or "nothing in it"
        raise CorpusError(f"the corpus {corpus.name[:100]!r} has no usable text ({why})")
    return corpus


def _text_file(corpus: Corpus, p: Path, source: str) -> None:
    data = p.read_bytes()
    if b"\x00" in data[:8192]:
        corpus.skip(source, "binary (a NUL byte): not a text file")
        return
    try:
        corpus.add(source, data.decode("utf-8"))
    except UnicodeDecodeError:
        corpus.skip(source, "not UTF-8 text")


def _folder(p: Path) -> Corpus:
    files = sorted(f for f in p.rglob("*.txt") if f.is_file())
    corpus = Corpus(p.name or str(p), [], f"the .txt files under {p.name}")
    if not files:
        raise CorpusError(f"the folder {p.name[:100]!r} holds no .txt files (attnviz reads every .txt file under it)")
    for f in files:
        _text_file(corpus, f, str(f.relative_to(p)))
    return corpus


def _binary(p: Path) -> bool:
    with p.open("rb") as f:
        return b"\x00" in f.read(8192)


def _jsonl(p: Path, column: str) -> Corpus:
    if _binary(p):
        raise CorpusError(f"{p.name[:100]!r} is binary, not JSON lines")
    corpus, fields = Corpus(p.name, [], f"the field {column!r} of {p.name}"), set()
    with p.open(encoding="utf-8", errors="replace") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                corpus.skip(f"{p.name}:{i}", "not a JSON line")
                continue
            if not isinstance(row, dict):
                corpus.skip(f"{p.name}:{i}", "not a JSON object")
                continue
            fields.update(list(row)[:50])
            corpus.add(f"{p.name}:{i}", row.get(column))
    if not corpus.documents and fields and column not in fields:
        raise CorpusError(
            f"no line of {p.name[:100]!r} has a field {column[:50]!r}; its fields: "
            f"{', '.join(sorted(fields)[:20])} (choose one with --text-column)"
        )
    return corpus


def _csv(p: Path, column: str) -> Corpus:
    if _binary(p):
        raise CorpusError(f"{p.name[:100]!r} is binary, not CSV")
    corpus = Corpus(p.name, [], f"the column {column!r} of {p.name}")
    csv.field_size_limit(MAX_CHARS * 4)
    with p.open(encoding="utf-8", errors="replace", newline="") as f:
        reader = csv.DictReader(f)
        if column not in (reader.fieldnames or []):
            raise CorpusError(
                f"{p.name[:100]!r} has no column {column[:50]!r}; its columns: "
                f"{', '.join((reader.fieldnames or [])[:20]) or 'none'} (choose one with --text-column)"
            )
        for i, row in enumerate(reader, 2):
            corpus.add(f"{p.name}:{i}", row.get(column))
    return corpus


def _parquet(p: Path, column: str) -> Corpus:
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(p)
    except Exception as err:  # pyarrow raises its own types for a file that is not Parquet
        raise CorpusError(f"{p.name[:100]!r} is not a Parquet file ({str(err)[:200]})") from err
    if column not in schema.names:
        raise CorpusError(
            f"{p.name[:100]!r} has no column {column[:50]!r}; its columns: "
            f"{', '.join(schema.names[:20])} (choose one with --text-column)"
        )
    corpus = Corpus(p.name, [], f"the column {column!r} of {p.name}")
    for i, text in enumerate(pq.read_table(p, columns=[column]).column(column).to_pylist()):
        corpus.add(f"{p.name}:{i}", text)
    return corpus
