"""Reading a spec's inputs: Parquet, JSON lines or text files, local or ``s3://bucket/prefix/*.ext`` globs.

Everything is checked before anything is written or enqueued: each pattern matches a file, each
file parses and has the id and text columns, ids are unique across the job, texts are strings
within the size limit. A problem is a ``SpecError`` naming the file, row and fix.

Text files hold one document per line; their ids are ``<file name>:<line number>``.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

from jobs.spec import JobSpec, SpecError
from worker.job import read_parquet
from worker.storage import S3Storage, StorageError, glob_keys

FORMATS = (".parquet", ".jsonl", ".txt")


def expand(pattern: str) -> list[str]:
    """The files a pattern names, sorted; a pattern that matches nothing is an error."""
    if pattern.startswith("s3://"):
        bucket, _, key_pattern = pattern[5:].partition("/")
        try:
            found = [f"s3://{bucket}/{k}" for k in glob_keys(S3Storage(bucket), key_pattern)]
        except StorageError as err:
            raise SpecError(str(err)) from None
        except Exception as err:  # noqa: BLE001 - credentials, network, missing bucket
            raise SpecError(f"cannot list {pattern}: {type(err).__name__}: {err}") from None
    elif "://" in pattern:
        raise SpecError(f"input {pattern!r}: use a local path or s3://bucket/prefix")
    else:
        found = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern] if Path(pattern).is_file() else []
    if not found:
        raise SpecError(f"input {pattern!r} matches no file: check the path or glob")
    bad = [f for f in found if not f.endswith(FORMATS)]
    if bad:
        raise SpecError(f"{bad[0]}: unsupported format; inputs are {', '.join(FORMATS)} files")
    return found


def _read_bytes(uri: str) -> bytes:
    try:
        if uri.startswith("s3://"):
            bucket, _, key = uri[5:].partition("/")
            return S3Storage(bucket).read(key)
        return Path(uri).read_bytes()
    except (OSError, StorageError) as err:
        raise SpecError(f"cannot read {uri}: {err}") from None
    except Exception as err:  # noqa: BLE001 - S3 errors of every kind
        raise SpecError(f"cannot read {uri}: {type(err).__name__}: {err}") from None


def read_file(uri: str, id_column: str, text_column: str) -> list[tuple[str, str]]:
    data = _read_bytes(uri)
    if uri.endswith(".txt"):
        name = uri.rsplit("/", 1)[-1]
        lines = _decode(uri, data).split("\n")
        return [(f"{name}:{n}", line) for n, line in enumerate(lines, 1) if line.strip()]
    rows = _parquet_rows(uri, data, [id_column, text_column]) if uri.endswith(".parquet") else _jsonl_rows(uri, data)
    documents = []
    for n, row in enumerate(rows, 1):
        missing = [c for c in (id_column, text_column) if c not in row]
        if missing:
            raise SpecError(f"{uri} row {n}: no column {missing[0]!r} (has {sorted(row)}): set id_column/text_column")
        if not isinstance(row[text_column], str):
            raise SpecError(f"{uri} row {n}: {text_column!r} is {type(row[text_column]).__name__}, not text")
        documents.append((str(row[id_column]), row[text_column]))
    return documents


def _decode(uri: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SpecError(f"{uri} is not UTF-8 (byte {err.start}): re-encode it") from None


def _jsonl_rows(uri: str, data: bytes) -> list[dict]:
    rows = []
    for n, line in enumerate(_decode(uri, data).split("\n"), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise SpecError(f"{uri} line {n}: not JSON ({err.msg})") from None
        if not isinstance(row, dict):
            raise SpecError(f"{uri} line {n}: expected a JSON object")
        rows.append(row)
    return rows


def _parquet_rows(uri: str, data: bytes, columns: list[str]) -> list[dict]:
    try:
        table = read_parquet(data)
    except Exception as err:  # noqa: BLE001 - pyarrow raises several kinds
        raise SpecError(f"{uri} is not a readable Parquet file: {err}") from None
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise SpecError(f"{uri}: no column {missing[0]!r} (has {table.column_names}): set id_column/text_column")
    return table.select(columns).to_pylist()


def collect(spec: JobSpec, max_chars: int) -> list[tuple[str, str]]:
    """Every document of the spec, in input order, checked."""
    documents: list[tuple[str, str]] = []
    seen: dict[str, str] = {}
    for pattern in spec.inputs:
        for uri in expand(pattern):
            for doc_id, text in read_file(uri, spec.id_column, spec.text_column):
                if doc_id in seen:
                    raise SpecError(f"duplicate id {doc_id!r} in {uri} (first in {seen[doc_id]}): ids must be unique")
                if len(text) > max_chars:
                    raise SpecError(
                        f"document {doc_id!r} in {uri} has {len(text):,} characters, more than {max_chars:,}: "
                        "split it into smaller documents"
                    )
                seen[doc_id] = uri
                documents.append((doc_id, text))
    if not documents:
        raise SpecError("the inputs hold no documents")
    return documents
