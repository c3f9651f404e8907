"""Reading a job's inputs: a row no tokenizer can read is an error row, its neighbours documents; Arrow's fast
reading of a block gives exactly what the line-by-line rules give; ids seen twice are found at the end."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contract.job import Document, decode_table
from jobs import inputs
from jobs.inputs import Reader, UniqueIds


def documents(reader: Reader) -> list[Document]:
    return [document for table in reader.tables() for document in decode_table(table)]


def test_a_lone_surrogate_in_a_json_line_makes_that_row_an_error_row(tmp_path) -> None:
    rows = [
        {"id": "good", "text": "Tom has 3 apples."},
        {"id": "bad", "text": "Tom \ud800 has"},  # json.dumps writes the escape \ud800, which json.loads gives back
        {"id": "bad-id-\udc00", "text": "Happy birthday!"},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="ascii")
    good, bad, bad_id = documents(Reader(str(path), "id", "text"))
    assert (good.id, good.text, good.error) == ("good", "Tom has 3 apples.", None)
    assert (bad.id, bad.text) == ("bad", None)
    assert bad.error is not None and bad.error.startswith("rows.jsonl line 2: 'text': character 5 (near")
    assert "U+D800, a lone surrogate" in bad.error
    assert (bad_id.id, bad_id.text) == ("rows.jsonl:3", None)  # the place stands for an id that cannot be stored
    assert bad_id.error is not None and "line 3: 'id': character 8" in bad_id.error


LINES = st.sampled_from([
    b'{"id": "a1", "text": "Tom has 3 apples.", "lang": "en"}',
    b'{"id": "a2", "text": "\\u00e9t\\u00e9 \\ud83d\\ude00", "extra": [1, 2]}',
    b'{"id": "a3", "text": "  spaced  ", "lang": "  "}',
    b'{"id": 17, "text": "a number for an id"}',
    b'{"id": "a4", "text": null}',
    b'{"id": "a5"}',
    b'{"text": "no id"}',
    b'{"id": "a6", "text": "x", "lang": 5}',
    b'{"id": "a7", "text": "one"} {"id": "a8", "text": "two on a line"}',
    b'{"id": "a9", "text": "bad \\ud800 surrogate"}',
    b'{"id": "a10", "text": NaN}',
    b'{"id": "a11", "text": "x", "id": "a12"}',
    b'[1, 2]',
    b'"just a string"',
    b'{not json',
    b'{"id": "a13", "text": "not utf-8 \xff"}',
    b'', b'   ', b'\t\r', b'\xe3\x80\x80',  # blank lines, and an ideographic space: blank to Python, not to JSON
])  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINES, max_size=30), block=st.sampled_from([64, 1 << 20]), ending=st.sampled_from([b"", b"\n"]))
def test_arrow_reads_a_block_as_the_line_rules_do(tmp_path_factory, monkeypatch, lines, block, ending) -> None:
    """Whatever the lines, and wherever blocks end, the documents (ids, texts, errors with line numbers, languages)
    are those of the line-by-line rules, and a file no row of which has the columns is refused all the same."""
    monkeypatch.setattr(inputs, "BLOCK_BYTES", block)
    path = tmp_path_factory.mktemp("in") / "rows.jsonl"
    data = b"\n".join(lines) + ending
    path.write_bytes(data)
    reader = Reader(str(path), "id", "text", "lang")
    expected = [document for document, _ in reader._json_lines(data.removesuffix(b"\n"), 1)]
    missing = [lacks for _, lacks in reader._json_lines(data.removesuffix(b"\n"), 1)]
    if expected and all(missing):
        with pytest.raises(inputs.SpecError, match="no row has both"):
            documents(reader)
        return
    assert documents(reader) == expected


def test_parquet_batches_with_odd_rows_go_row_by_row(tmp_path: Path) -> None:
    table = pa.table({"id": [1, 2, None], "text": ["Tom has 3 apples.", None, "x"], "lang": ["en", " ", None]})
    pq.write_table(table, tmp_path / "in.parquet")
    one, two, three = documents(Reader(str(tmp_path / "in.parquet"), "id", "text", "lang"))
    assert (one.id, one.text, one.language, one.error) == ("1", "Tom has 3 apples.", "en", None)
    assert (two.id, two.text) == ("2", None) and "row 2: 'text' is null" in str(two.error)
    assert three.id == "in.parquet:3" and "the id is null" in str(three.error)
    clean = pa.table({"id": ["a", "b"], "text": ["Hi.", "Bye."], "lang": ["en ", ""]})
    pq.write_table(clean, tmp_path / "clean.parquet")
    assert documents(Reader(str(tmp_path / "clean.parquet"), "id", "text", "lang")) == [
        Document("a", "Hi.", language="en"), Document("b", "Bye.")
    ]  # fmt: skip


def test_an_id_seen_twice_is_found_among_many_and_colliding_hashes_are_not_repeats(tmp_path: Path) -> None:
    ids = [f"doc-{n}" for n in range(150_000)]
    ids[140_000] = "doc-70000"  # far apart, past several spills
    unique = UniqueIds(tmp_path)
    for start in range(0, len(ids), 1000):
        unique.add(ids[start : start + 1000])
    assert unique.first_repeat(ids.__getitem__) == (70_000, 140_000)
    (tmp_path / "collide").mkdir()
    colliding = UniqueIds(tmp_path / "collide", hash_id=len)  # ids of two characters share one hash
    colliding.add(["ab", "cd", "xyz", "ef"])
    assert colliding.first_repeat(["ab", "cd", "xyz", "ef"].__getitem__) is None
    (tmp_path / "again").mkdir()
    repeated = UniqueIds(tmp_path / "again", hash_id=len)
    repeated.add(["ab", "cd", "ef", "cd", "ab"])
    assert repeated.first_repeat(["ab", "cd", "ef", "cd", "ab"].__getitem__) == (1, 3)
