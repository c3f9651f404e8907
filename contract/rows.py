"""A job's result rows: one per document, in its parts' Parquet files (``parts/part-NNNNN.parquet``).

    job_id, id, source, translation    the document and its translation (markup and layout kept)
    status, error                      ok | partial (a sentence still shows a symptom) | error, and why
    document_flags                     the document's own flags and its sentences' ("cleaned", "length_limit")
    sentences                          per source sentence: source_start, source_end, target_start,
                                       target_end (character spans), sentence_flags
    artifact_id, timings               the artifact that translated it; prepare, translate and total seconds
    windows, reused_windows            engine inputs it was cut into, and of them those the memory gave
    source_language, target_language  ISO codes: the language found in the document (``source_language: auto``)
                                       or the job's, and the one it was translated into (null where unknown)
    terms, terms_missed                glossary terms put into the translation, and those that could not be
                                       (null when the job has no glossary)

Every column name is distinct at every depth, so a reader can flatten a part without a clash: pandas'
``df.flags`` (its own attribute), polars' ``explode("sentences").unnest("sentences")`` and duckdb's
recursive ``unnest`` all read it as it is. ``ROW_FORMAT`` 1 (before this naming: ``flags`` at the top
and in ``sentences``) is still read (``read_table``); each part says its format in its Parquet metadata.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from contract.parquet import parquet_bytes, read_parquet

ROW_FORMAT = 4  # 3 -> 4: terms and terms_missed; 2 -> 3: source_language, target_language (null in older parts)
FORMAT_KEY = b"fanyi.row_format"  # in each part's Parquet key-value metadata
_RENAMED = {"flags": "document_flags"}  # format 1 -> 2, top level; in ``sentences``: flags -> sentence_flags


@dataclass(frozen=True)
class SentenceSpans:
    """One source sentence: its span in the source, its translation's span in the translation, its flags."""

    source_start: int
    source_end: int
    target_start: int
    target_end: int
    sentence_flags: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Timings:
    """Seconds: ``prepare`` (segmenting, planning), ``translate`` (its share of the engine's time), ``total``."""

    prepare: float = 0.0
    translate: float = 0.0
    total: float = 0.0


@dataclass(frozen=True)
class Row:
    job_id: str
    id: str
    source: str
    translation: str
    status: str
    error: str | None
    document_flags: list[str]
    sentences: list[SentenceSpans]
    artifact_id: str
    timings: Timings = Timings()
    windows: int | None = None
    reused_windows: int | None = None
    source_language: str | None = None
    target_language: str | None = None
    terms: int | None = None
    terms_missed: int | None = None

    @classmethod
    def failed(
        cls,
        job_id: str,
        artifact_id: str,
        doc_id: str,
        reason: str,
        flags: Sequence[str] = (),
        target: str | None = None,
    ) -> Row:
        """A document that was not translated (into ``target``), and why."""
        return cls(job_id, doc_id, "", "", "error", reason, list(flags), [], artifact_id, target_language=target)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def schema() -> Any:
    """The parts' Arrow schema, from ``Row``'s fields, its format in the metadata."""
    import pyarrow as pa

    return pa.schema([(n, _arrow(k)) for n, k in _types(Row)], metadata={FORMAT_KEY: str(ROW_FORMAT).encode()})


def encode_rows(rows: Sequence[Row]) -> bytes:
    """One part: a Parquet table, one row per document."""
    import pyarrow as pa

    return parquet_bytes(pa.Table.from_pylist([row.to_dict() for row in rows], schema=schema()))


def read_table(data: bytes) -> Any:
    """A part's rows as an Arrow table in this ``ROW_FORMAT`` (a part of format 1 renamed as it is read)."""
    import pyarrow as pa

    table = read_parquet(data)
    if (table.schema.metadata or {}).get(FORMAT_KEY) == str(ROW_FORMAT).encode():
        return table
    return pa.Table.from_pylist([_renamed(row) for row in table.to_pylist()], schema=schema())


def read_rows(data: bytes) -> list[dict[str, Any]]:
    """A part's rows, each a dict of its columns (as ``to_pylist`` gives them)."""
    return list(read_table(data).to_pylist())


def _renamed(row: dict[str, Any]) -> dict[str, Any]:
    row = {_RENAMED.get(k, k): v for k, v in row.items()}
    sentences = row.get("sentences") or []
    row["sentences"] = [{("sentence_flags" if k == "flags" else k): v for k, v in s.items()} for s in sentences]
    return row


def _types(cls: type) -> list[tuple[str, Any]]:
    hints = typing.get_type_hints(cls)
    return [(f.name, hints[f.name]) for f in dataclasses.fields(cls)]


def _arrow(kind: Any) -> Any:
    import pyarrow as pa

    if isinstance(kind, types.UnionType):  # ``X | None``: every Arrow field takes nulls
        kind = next(k for k in typing.get_args(kind) if k is not type(None))
    if typing.get_origin(kind) is list:
        return pa.list_(_arrow(typing.get_args(kind)[0]))
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return pa.struct([(n, _arrow(k)) for n, k in _types(kind)])
    return {str: pa.string(), int: pa.int64(), float: pa.float64()}[kind]
