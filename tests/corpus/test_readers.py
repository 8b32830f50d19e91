"""The corpus readers: every format, every bad input a clear CorpusError, skipped documents counted with reasons."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from attnviz.corpus import readers
from attnviz.corpus.readers import CorpusError


def test_the_builtin_corpus_is_offline_prose_of_at_least_200k_characters_with_its_licence():
    c = readers.read("builtin")
    assert c.characters >= 200_000 and len(c.documents) > 1_000
    assert "Python Software Foundation License" in c.described
    assert all(t.strip() == t and t for _, t in c.documents)


def test_a_folder_reads_every_txt_file_in_order_and_skips_what_is_not_text(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "a.txt").write_text("first document")
    (tmp_path / "b" / "c.txt").write_text("second document")
    (tmp_path / "b" / "d.txt").write_bytes(b"\x00\x01binary")
    (tmp_path / "e.txt").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "f.md").write_text("not read")
    c = readers.read(tmp_path)
    assert c.documents == [("a.txt", "first document"), ("b/c.txt", "second document")]
    assert c.skipped == {"binary (a NUL byte): not a text file": 1, "not UTF-8 text": 1}


def test_jsonl_csv_and_parquet_read_the_named_column(tmp_path):
    rows = [{"text": "one", "id": 1}, {"text": "", "id": 2}, {"body": "three"}]
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    c = readers.read(tmp_path / "d.jsonl")
    assert c.documents == [("d.jsonl:1", "one")]
    assert c.skipped == {"empty": 1, "no text": 1, "not a JSON line": 1}
    assert readers.read(tmp_path / "d.jsonl", "body").documents == [("d.jsonl:3", "three")]
    (tmp_path / "d.csv").write_text('title,body\nA,"a, b"\nB,second\n')
    assert [t for _, t in readers.read(tmp_path / "d.csv", "body").documents] == ["a, b", "second"]
    pq.write_table(pa.table({"sentence": ["x y", None, "z"]}), tmp_path / "d.parquet")
    assert [t for _, t in readers.read(tmp_path / "d.parquet", "sentence").documents] == ["x y", "z"]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "nothing-here", "no file or folder"),
        (lambda p: (p / "empty").mkdir() or p / "empty", "holds no .txt files"),
        (lambda p: (p / "x.bin").write_bytes(b"\x00" * 10) and p / "x.bin", "is not a corpus attnviz reads"),
        (lambda p: (p / "x.jsonl").write_bytes(b"\x00" * 10) and p / "x.jsonl", "is binary"),
        (lambda p: (p / "x.jsonl").write_text('{"body": "a"}\n') and p / "x.jsonl", "field 'text'; its fields: body"),
        (lambda p: (p / "x.csv").write_text("a,b\n1,2\n") and p / "x.csv", "no column 'text'; its columns: a, b"),
        (lambda p: (p / "x.parquet").write_text("not parquet") and p / "x.parquet", "is not a Parquet file"),
        (lambda p: (p / "x.txt").write_text("   \n\n ") and p / "x.txt", "no usable text (1 empty)"),
        (lambda p: (p / "x.txt").write_text("w" * (readers.MAX_CHARS + 1)) and p / "x.txt", "longer than 2,000,000"),
    ],
)
def test_bad_input_is_one_clear_error(tmp_path, make, message):
    with pytest.raises(CorpusError, match=message.replace("(", r"\(").replace(")", r"\)")):
        readers.read(make(tmp_path))


def test_a_list_of_texts_is_a_corpus_and_a_list_of_nothing_is_refused():
    assert readers.from_texts(["a b", " ", "c"]).documents == [("texts[0]", "a b"), ("texts[2]", "c")]
    with pytest.raises(CorpusError, match="no usable text"):
        readers.from_texts(["", "  "])
