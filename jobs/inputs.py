"""Reading a spec's inputs: Parquet, JSON lines or text files, local or ``s3://bucket/prefix/*.ext`` globs.

Everything is read and checked before anything is written or enqueued. Two kinds of problem:

* **Structural** (a pattern that matches nothing, an unreadable or unparsable file, a column no row
  has, a text column that is not text, duplicate ids): the job is refused, naming the file and the fix.
* **One bad row** (a null or non-string text, a line that is not JSON or not UTF-8, a row without an
  id, an id or text with a lone surrogate (a JSON ``\\ud800`` escape without its pair: not text, and
  no tokenizer or Parquet file takes it), a document over the size limit): with
  ``on_bad_row: error_row`` (the default) the row becomes an error row in the output, its id kept (a
  line without one gets ``<file name>:<line>``), and the rest of the job runs; with
  ``on_bad_row: refuse`` the job is refused naming the row.

Text files hold one document per line; their ids are ``<file name>:<line number>``.
"""

from __future__ import annotations

import glob
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from contract.job import Document
from contract.parquet import read_parquet
from contract.spec import JobSpec, SpecError
from contract.storage import S3Storage, StorageError, glob_keys, split_s3
from worker.engine.tokenizer import unreadable

FORMATS = (".parquet", ".jsonl", ".txt")


def expand(pattern: str) -> list[str]:
    """The files a pattern names, sorted; a pattern that matches nothing is an error."""
    if pattern.startswith("s3://"):
        try:
            bucket, key_pattern = split_s3(pattern)
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


def read_bytes(uri: str) -> bytes:
    try:
        if uri.startswith("s3://"):
            bucket, key = split_s3(uri)
            return S3Storage(bucket).read(key)
        return Path(uri).read_bytes()
    except (OSError, StorageError) as err:
        raise SpecError(f"cannot read {uri}: {err}") from None
    except Exception as err:  # noqa: BLE001 - S3 errors of every kind
        raise SpecError(f"cannot read {uri}: {type(err).__name__}: {err}") from None


class Reader:
    """One file's documents, bad rows included as error rows."""

    def __init__(self, uri: str, id_column: str, text_column: str, language_column: str | None = None):
        self.uri, self.name = uri, uri.rsplit("/", 1)[-1]
        self.id_column, self.text_column, self.language_column = id_column, text_column, language_column

    def documents(self) -> list[Document]:
        data = read_bytes(self.uri)
        if self.uri.endswith(".txt"):
            return list(self._text_lines(data))
        if self.uri.endswith(".parquet"):
            return [self._row(n, row) for n, row in enumerate(self._parquet_rows(data), 1)]
        documents = list(self._json_lines(data))
        if documents and all(d.error and "no column" in d.error for d in documents):
            raise SpecError(
                f"{self.uri}: no row has both {self.id_column!r} and {self.text_column!r}: set id_column/text_column"
            )
        return documents

    def _bad(self, where: int, message: str, doc_id: str | None = None) -> Document:
        return Document(doc_id if doc_id is not None else f"{self.name}:{where}", None, f"{self.name} {message}")

    def _lines(self, data: bytes) -> Iterator[tuple[int, str | None]]:
        """Numbered non-blank lines; None for one that is not UTF-8."""
        for n, raw in enumerate(data.split(b"\n"), 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                yield n, None
                continue
            if line.strip():
                yield n, line

    def _text_lines(self, data: bytes) -> Iterator[Document]:
        for n, line in self._lines(data):
            if line is None:
                yield self._bad(n, f"line {n} is not UTF-8: re-encode the file")
            else:
                yield Document(f"{self.name}:{n}", line)

    def _json_lines(self, data: bytes) -> Iterator[Document]:
        for n, line in self._lines(data):
            if line is None:  # keep the id if the line still parses once the bad bytes are replaced
                raw = data.split(b"\n")[n - 1].decode("utf-8", errors="replace")
                doc_id = _id_of(raw, self.id_column)
                yield self._bad(n, f"line {n} is not UTF-8: re-encode the file", doc_id)
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                yield self._bad(n, f"line {n} is not JSON ({err.msg})")
                continue
            yield self._row(n, row) if isinstance(row, dict) else self._bad(n, f"line {n} is not a JSON object")

    def _parquet_rows(self, data: bytes) -> list[dict[str, Any]]:
        import pyarrow as pa

        try:
            table = read_parquet(data)
        except Exception as err:  # noqa: BLE001 - pyarrow raises several kinds
            raise SpecError(f"{self.uri} is not a readable Parquet file: {err}") from None
        missing = [c for c in (self.id_column, self.text_column) if c not in table.column_names]
        if missing:
            raise SpecError(
                f"{self.uri}: no column {missing[0]!r} (has {table.column_names}): set id_column/text_column"
            )
        text_type = table.schema.field(self.text_column).type
        if not (pa.types.is_string(text_type) or pa.types.is_large_string(text_type) or pa.types.is_null(text_type)):
            raise SpecError(f"{self.uri}: column {self.text_column!r} holds {text_type}, not text: set text_column")
        language = [self.language_column] if self.language_column in table.column_names else []
        return list(table.select([self.id_column, self.text_column, *language]).to_pylist())

    def _row(self, n: int, row: dict[str, Any]) -> Document:
        where = f"line {n}" if not self.uri.endswith(".parquet") else f"row {n}"
        if self.id_column not in row or self.text_column not in row:
            missing = self.id_column if self.id_column not in row else self.text_column
            return self._bad(n, f"{where}: no column {missing!r}", _string_id(row.get(self.id_column)))
        doc_id, text = _string_id(row[self.id_column]), row[self.text_column]
        if doc_id is None:
            return self._bad(n, f"{where}: the id is null")
        if not isinstance(text, str):
            kind = "null" if text is None else type(text).__name__
            return self._bad(n, f"{where}: {self.text_column!r} is {kind}, not text", doc_id)
        if (reason := unreadable(doc_id)) is not None:  # the row's place stands for an id that cannot be stored
            return self._bad(n, f"{where}: {self.id_column!r}: {reason}")
        if (reason := unreadable(text)) is not None:
            return self._bad(n, f"{where}: {self.text_column!r}: {reason}", doc_id)
        return Document(doc_id, text, language=self._language(row))

    def _language(self, row: dict[str, Any]) -> str | None:
        """The row's language where the spec's ``language_column`` gives one (a blank or missing one: found in
        the text); a value that is no language code reaches the worker, which skips the document naming it."""
        value = row.get(self.language_column) if self.language_column else None
        return (str(value).strip() or None) if value is not None else None


def _string_id(value: Any) -> str | None:
    return None if value is None else str(value)


def _id_of(line: str, id_column: str) -> str | None:
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return None
    return _string_id(row.get(id_column)) if isinstance(row, dict) else None


def collect(spec: JobSpec, max_chars: int) -> tuple[list[Document], list[str]]:
    """Every document of the spec, in input order, checked; and the files read.

    A bad row is an error-row ``Document`` (``on_bad_row: error_row``) or refuses the job (``refuse``)."""
    documents: list[Document] = []
    seen: dict[str, str] = {}
    files: list[str] = []
    for pattern in spec.inputs:
        for uri in expand(pattern):
            files.append(uri)
            for document in Reader(uri, spec.id_column, spec.text_column, spec.language_column).documents():
                document = _within_limit(document, max_chars)
                if document.error and spec.on_bad_row == "refuse":
                    raise SpecError(f"{document.error} (on_bad_row: refuse; use error_row to keep the job going)")
                if document.id in seen:
                    raise SpecError(
                        f"duplicate id {document.id!r} in {uri} (first in {seen[document.id]}): ids must be unique"
                    )
                seen[document.id] = uri
                documents.append(document)
    return documents, files


def _within_limit(document: Document, max_chars: int) -> Document:
    if document.text is None or len(document.text) <= max_chars:
        return document
    message = (
        f"document has {len(document.text):,} characters, more than {max_chars:,}: split it into smaller documents"
    )
    return Document(document.id, None, message)
