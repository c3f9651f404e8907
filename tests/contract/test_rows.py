"""Result rows: one type, one Arrow schema, names that flatten without a clash, and parts written in the
first row format still read."""

from __future__ import annotations

import pyarrow as pa

from contract.job import Tally
from contract.parquet import parquet_bytes, read_parquet
from contract.rows import FORMAT_KEY, ROW_FORMAT, Row, SentenceSpans, Timings, encode_rows, read_rows

ROW = Row(
    "job-1", "d", "Tom has 3 apples.", "汤姆有3个苹果。", "partial", None, ["cleaned", "numbers"],
    [SentenceSpans(0, 17, 0, 8, ["numbers"])], "marian-x", Timings(0.1, 0.2, 0.3), 1, 0, "en", "zh",
)  # fmt: skip


def _names(kind: pa.DataType | pa.Schema) -> list[str]:
    """Every field name, at every depth."""
    fields = list(kind) if isinstance(kind, pa.Schema | pa.StructType) else []
    if isinstance(kind, pa.ListType):
        return _names(kind.value_type)
    return [name for f in fields for name in (f.name, *_names(f.type))]


def test_a_row_reads_back_as_written_in_this_format() -> None:
    data = encode_rows([ROW, Row.failed("job-1", "marian-x", "e", "its input is gone")])
    assert read_parquet(data).schema.metadata[FORMAT_KEY] == str(ROW_FORMAT).encode()
    first, failed = read_rows(data)
    assert first == ROW.to_dict()
    assert failed["status"] == "error" and failed["sentences"] == [] and failed["timings"]["total"] == 0.0
    names = _names(read_parquet(data).schema)  # flattened, as polars' and duckdb's unnest name them
    assert len(names) == len(set(names)) == 24 and "flags" not in names


def test_a_part_of_the_first_row_format_is_read_with_the_names_of_this_one() -> None:
    old_sentence = pa.struct([(n, pa.int64()) for n in ("source_start", "source_end", "target_start", "target_end")])
    old_sentence = pa.struct([*old_sentence, ("flags", pa.list_(pa.string()))])
    old = pa.table(
        {"job_id": ["job-1"], "id": ["d"], "status": ["partial"], "flags": [["numbers"]],
         "sentences": pa.array([[{"source_start": 0, "source_end": 3, "target_start": 0, "target_end": 2,
                                   "flags": ["numbers"]}]], pa.list_(old_sentence))}
    )  # fmt: skip
    (row,) = read_rows(parquet_bytes(old))
    assert row["document_flags"] == ["numbers"] and row["sentences"][0]["sentence_flags"] == ["numbers"]
    assert "flags" not in row and row["windows"] is None  # a column it did not have yet: null
    assert row["source_language"] is None and row["target_language"] is None and row["terms"] is None
    tally = Tally().add([row])
    assert tally.sentence_flags == {"numbers": 1} and tally.statuses["partial"] == 1


def test_a_tally_counts_documents_per_language_and_per_route() -> None:
    rows = [
        Row("j", "a", "Hi.", "你好。", "ok", None, [], [], "m", source_language="en", target_language="zh"),
        Row("j", "b", "你好。", "你好。", "ok", None, ["already_target"], [], "m", source_language="zh"),
        Row("j", "c", "Salut.", "", "skipped", "written in French", [], [], "m", source_language="fr"),
        Row("j", "d", "42", "42", "ok", None, ["language_fallback"], [], "m", source_language="en"),
        Row("j", "e", "", "", "error", "bad row", [], [], "m"),  # no language: not counted in either
    ]
    summary = Tally().add([r.to_dict() for r in rows]).summary()
    assert summary["languages"] == {"en": 2, "zh": 1, "fr": 1}
    assert summary["routes"] == {"already_target": 1, "language_fallback": 1, "skipped": 1, "translated": 2}
    assert summary["statuses"] == {"ok": 3, "partial": 0, "error": 1, "skipped": 1}
