"""Reading a spec's inputs: Parquet, JSON lines or text files, local or ``s3://bucket/prefix/*.ext`` globs.

Everything is read and checked as it streams, before anything is enqueued (``jobs.planning``). Two kinds of
problem:

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

import bisect
import glob
import json
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from contract.job import Document, decode_table, documents_schema, documents_table
from contract.spec import JobSpec, SpecError
from contract.storage import S3Storage, StorageError, glob_keys, split_s3
from worker.engine.tokenizer import unreadable

FORMATS = (".parquet", ".jsonl", ".txt")
PARQUET_BATCH = 65_536  # rows of a Parquet input decoded at once
BLOCK_BYTES = 4 << 20  # bytes of a text or JSON-lines input parsed at once
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # a block with one is read line by line (a lone one is an error)
BLANK_INNER_LINE = re.compile(rb"\n[ \t\r]*(?=\n)")  # a blank line between two others


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
    with _reading(uri):
        if uri.startswith("s3://"):
            bucket, key = split_s3(uri)
            return S3Storage(bucket).read(key)
        return Path(uri).read_bytes()


@contextmanager
def local_file(uri: str) -> Iterator[Path]:
    """The input at ``uri`` as a local file: itself, or an S3 object fetched into a temporary file (in parallel
    parts) that is removed afterwards. Inputs are read from disk as they are parsed, never held whole."""
    if not uri.startswith("s3://"):
        yield Path(uri)
        return
    with tempfile.TemporaryDirectory(prefix="fanyi-input-") as folder:
        path = Path(folder) / "input"
        with _reading(uri):
            bucket, key = split_s3(uri)
            S3Storage(bucket).get_file(key, path)
        yield path


@contextmanager
def _reading(uri: str) -> Iterator[None]:
    """Reading ``uri``: whatever fails is a ``SpecError`` naming it, in one line."""
    try:
        yield
    except (OSError, StorageError) as err:
        raise SpecError(f"cannot read {uri}: {err}") from None
    except Exception as err:  # noqa: BLE001 - S3 errors of every kind
        raise SpecError(f"cannot read {uri}: {type(err).__name__}: {err}") from None


class Reader:
    """One file's documents as tables (``documents_schema``; bad rows are error rows), a block at a time.

    A block of JSON lines is parsed by Arrow when it can be taken whole (every line one object whose id and text
    are strings, no surrogate escape, as many rows as lines), which is nearly always; any other block goes line by
    line through the exact rules above. Parquet batches likewise."""

    def __init__(self, uri: str, id_column: str, text_column: str, language_column: str | None = None):
        self.uri, self.name = uri, uri.rsplit("/", 1)[-1]
        self.id_column, self.text_column, self.language_column = id_column, text_column, language_column
        self._columns = [id_column, text_column, *([language_column] if language_column else [])]

    def tables(self) -> Iterator[pa.Table]:
        with local_file(self.uri) as path:
            if self.uri.endswith(".parquet"):
                yield from self._parquet_tables(path)
                return
            try:
                with open(path, "rb") as file:
                    yield from self._text_tables(file) if self.uri.endswith(".txt") else self._json_tables(file)
            except OSError as err:
                raise SpecError(f"cannot read {self.uri}: {err}") from None

    def _bad(self, where: int, message: str, doc_id: str | None = None) -> Document:
        return Document(doc_id if doc_id is not None else f"{self.name}:{where}", None, f"{self.name} {message}")

    def _lines(self, block: bytes, first: int) -> Iterator[tuple[int, str | bytes]]:
        """A block's numbered non-blank lines (``first``: the number of its first); the raw bytes of one that is
        not UTF-8."""
        for n, raw in enumerate(block.split(b"\n"), first):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                yield n, raw
                continue
            if line.strip():
                yield n, line

    def _text_tables(self, file: BinaryIO) -> Iterator[pa.Table]:
        for first, block in _blocks(file):
            yield documents_table(self._text_lines(block, first))

    def _text_lines(self, block: bytes, first: int) -> Iterator[Document]:
        for n, line in self._lines(block, first):
            if isinstance(line, bytes):
                yield self._bad(n, f"line {n} is not UTF-8: re-encode the file")
            else:
                yield Document(f"{self.name}:{n}", line)

    def _json_tables(self, file: BinaryIO) -> Iterator[pa.Table]:
        """Each block's documents; a structural fault (no row has the columns) once the file is read."""
        rows = without_columns = 0
        for first, block in _blocks(file):
            table = self._arrow_json(block)
            if table is None:
                lines = list(self._json_lines(block, first))
                without_columns += sum(missing for _, missing in lines)
                table = documents_table(document for document, _ in lines)
            rows += table.num_rows
            yield table
        if rows and without_columns == rows:
            raise SpecError(
                f"{self.uri}: no row has both {self.id_column!r} and {self.text_column!r}: set id_column/text_column"
            )

    def _arrow_json(self, block: bytes) -> pa.Table | None:
        """The block's documents parsed by Arrow, None unless it can be taken whole (then the line rules apply)."""
        if SURROGATE_ESCAPE.search(block):
            return None
        options = pj.ParseOptions(explicit_schema=pa.schema([(c, pa.string()) for c in self._columns]),
                                  unexpected_field_behavior="ignore")  # fmt: skip
        try:
            read = pj.ReadOptions(use_threads=False, block_size=len(block) + 1)
            table = pj.read_json(pa.py_buffer(block), read_options=read, parse_options=options)
            table.validate(full=True)  # its strings' UTF-8 too, which the JSON reader takes unchecked
        except (pa.ArrowInvalid, UnicodeDecodeError):
            return None
        lines = block.count(b"\n") + 1 - _blank_lines(block)
        whole = table[self.id_column].null_count == 0 and table[self.text_column].null_count == 0
        return self._documents(table) if whole and table.num_rows == lines else None

    def _documents(self, table: pa.Table) -> pa.Table:
        """Rows with a string id and text as ``documents_schema()`` (the language trimmed, a blank one null)."""
        language = pa.nulls(table.num_rows, pa.string())
        if self.language_column in table.column_names:
            trimmed = pc.utf8_trim_whitespace(table[self.language_column])
            language = pc.if_else(pc.equal(trimmed, ""), pa.scalar(None, pa.string()), trimmed)
        columns = [table[self.id_column], table[self.text_column], pa.nulls(table.num_rows, pa.string()), language]
        return pa.table(columns, schema=documents_schema())

    def _json_lines(self, block: bytes, first: int) -> Iterator[tuple[Document, bool]]:
        """Each line's document, and whether it lacks the id or the text column."""
        for n, line in self._lines(block, first):
            if isinstance(line, bytes):  # keep the id if the line still parses once the bad bytes are replaced
                doc_id = _id_of(line.decode("utf-8", errors="replace"), self.id_column)
                yield self._bad(n, f"line {n} is not UTF-8: re-encode the file", doc_id), False
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                yield self._bad(n, f"line {n} is not JSON ({err.msg})"), False
                continue
            if not isinstance(row, dict):
                yield self._bad(n, f"line {n} is not a JSON object"), False
                continue
            yield self._row(n, row), self.id_column not in row or self.text_column not in row

    def _parquet_tables(self, path: Path) -> Iterator[pa.Table]:
        """The file's documents a record batch at a time: Arrow's own when the id and text are strings with no
        null (then the language column too, if any), else row by row."""
        try:
            parquet = pq.ParquetFile(path, pre_buffer=False)
            schema = parquet.schema_arrow
        except Exception as err:  # noqa: BLE001 - pyarrow raises several kinds
            raise SpecError(f"{self.uri} is not a readable Parquet file: {err}") from None
        with parquet:
            missing = [c for c in (self.id_column, self.text_column) if c not in schema.names]
            if missing:
                raise SpecError(f"{self.uri}: no column {missing[0]!r} (has {schema.names}): set id_column/text_column")
            if not _is_text(text_type := schema.field(self.text_column).type) and not pa.types.is_null(text_type):
                raise SpecError(f"{self.uri}: column {self.text_column!r} holds {text_type}, not text: set text_column")
            columns = [c for c in self._columns if c in schema.names]
            strings = all(_is_text(schema.field(c).type) for c in columns)
            first = 1
            try:
                for batch in parquet.iter_batches(PARQUET_BATCH, columns=columns, use_threads=False):
                    table = pa.Table.from_batches([batch])
                    table.validate(full=True)  # text that is not UTF-8: the file is refused below
                    if strings and table[self.id_column].null_count == 0 and table[self.text_column].null_count == 0:
                        yield self._documents(table.cast(pa.schema([(c, pa.string()) for c in columns])))
                    else:
                        yield documents_table(self._row(n, row) for n, row in enumerate(table.to_pylist(), first))
                    first += table.num_rows
            except (OSError, pa.ArrowException) as err:
                raise SpecError(f"{self.uri} is not a readable Parquet file: {err}") from None

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


def _blocks(file: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """A file in blocks of whole lines of about ``BLOCK_BYTES``, each with the number of its first line."""
    line, rest = 1, b""
    while data := file.read(BLOCK_BYTES):
        data = rest + data
        end = data.rfind(b"\n") + 1
        block, rest = data[:end], data[end:]
        if block:
            yield line, block[:-1]
            line += block.count(b"\n")
    if rest:
        yield line, rest


def _blank_lines(block: bytes) -> int:
    """How many lines of ``block`` (lines joined by newlines) hold nothing but JSON's whitespace."""
    first, last = block.find(b"\n"), block.rfind(b"\n")
    if first == -1:
        return int(not block.strip(b" \t\r"))
    ends = int(not block[:first].strip(b" \t\r")) + int(not block[last + 1 :].strip(b" \t\r"))
    return ends + len(BLANK_INNER_LINE.findall(block))


def _is_text(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


class Corpus:
    """A spec's documents in input order, each checked as it is read (nothing is held: a corpus of any size streams).

    A bad row is an error row (``on_bad_row: error_row``) or refuses the job (``refuse``); a document over
    ``max_chars`` is an error row; ids seen twice are found by ``UniqueIds`` once every document is in."""

    def __init__(self, spec: JobSpec, max_chars: int):
        self.spec, self.max_chars = spec, max_chars
        self.files = [uri for pattern in spec.inputs for uri in expand(pattern)]
        self._starts: list[int] = []  # the position of each file's first document

    def tables(self) -> Iterator[pa.Table]:
        """The documents as tables of ``documents_schema()``, in input order."""
        position, spec = 0, self.spec
        for uri in self.files:
            self._starts.append(position)
            for table in Reader(uri, spec.id_column, spec.text_column, spec.language_column).tables():
                if (pc.max(pc.utf8_length(table["text"])).as_py() or 0) > self.max_chars:
                    table = documents_table(_within_limit(d, self.max_chars) for d in decode_table(table))
                if spec.on_bad_row == "refuse" and table["error"].null_count < table.num_rows:
                    error = pc.drop_null(table["error"])[0].as_py()
                    raise SpecError(f"{error} (on_bad_row: refuse; use error_row to keep the job going)")
                position += table.num_rows
                yield table

    def file_of(self, position: int) -> str:
        """The file that holds the document at ``position``."""
        return self.files[bisect.bisect_right(self._starts, position) - 1]


class UniqueIds:
    """Every id of a corpus as a 64-bit hash and its position, kept in files under ``folder`` by the hash's low
    bits, so memory stays flat whatever the corpus's size; ``first_repeat`` finds an id seen twice at the end."""

    PARTITIONS = 64
    SPILL = 65_536  # hashes kept in memory before they go to the files
    RECORD = np.dtype([("hash", "<i8"), ("position", "<i8")])

    def __init__(self, folder: Path, hash_id: Callable[[str], int] = hash):
        self.folder, self.count, self.hash_id = folder, 0, hash_id
        self._files = [open(folder / f"ids-{k:02d}.bin", "wb") for k in range(self.PARTITIONS)]
        self._hashes: list[int] = []

    def add(self, ids: Iterable[str]) -> None:
        self._hashes += map(self.hash_id, ids)  # by default Python's: compared only within this process
        if len(self._hashes) >= self.SPILL:
            self._spill()

    def _spill(self) -> None:
        records = np.empty(len(self._hashes), self.RECORD)
        records["hash"] = self._hashes
        records["position"] = np.arange(self.count, self.count + len(self._hashes))
        self.count += len(self._hashes)
        self._hashes = []
        partition = records["hash"] & (self.PARTITIONS - 1)
        records = records[np.argsort(partition, kind="stable")]
        bounds = np.searchsorted(np.sort(partition), np.arange(self.PARTITIONS + 1))
        for k in range(self.PARTITIONS):
            self._files[k].write(records[bounds[k] : bounds[k + 1]].tobytes())

    def first_repeat(self, id_at: Callable[[int], str]) -> tuple[int, int] | None:
        """The positions of an id's first occurrence and of its repeat, for the repeat first in input order (None
        if every id is unique); ``id_at(position)`` tells ids that repeat from hashes that collide."""
        self._spill()
        for file in self._files:
            file.close()
        groups: list[list[int]] = []  # positions that share a hash, in order
        for k in range(self.PARTITIONS):
            records = np.fromfile(self.folder / f"ids-{k:02d}.bin", self.RECORD)  # in position order
            records = records[np.argsort(records["hash"], kind="stable")]
            hashes = records["hash"]
            shared = np.zeros(len(records), bool)
            shared[1:] |= hashes[1:] == hashes[:-1]
            shared[:-1] |= hashes[:-1] == hashes[1:]
            for value, position in zip(hashes[shared].tolist(), records["position"][shared].tolist()):
                if groups and groups[-1][0] == value:
                    groups[-1].append(position)
                else:
                    groups.append([value, position])
        for group in sorted((g[1:] for g in groups), key=lambda positions: positions[1]):
            first: dict[str, int] = {}
            for position in group:
                if (found := first.setdefault(id_at(position), position)) != position:
                    return found, position
        return None


def _within_limit(document: Document, max_chars: int) -> Document:
    if document.text is None or len(document.text) <= max_chars:
        return document
    message = (
        f"document has {len(document.text):,} characters, more than {max_chars:,}: split it into smaller documents"
    )
    return Document(document.id, None, message)
