"""A job's corpus streamed into chunk inputs at submit, in memory bounded by a constant, not by the corpus.

Documents are read and checked as they are parsed (``jobs.inputs``), their tokens counted a batch at a time (the
counts cut the chunks: ``jobs.chunks``), and chunk inputs are written as they close, ``FILE_CHUNKS`` to an input
file, ``WRITERS`` files at once with at most ``WAITING`` more queued behind them. Every id goes to the job's id list
(a local Parquet file, stored once complete) and to ``UniqueIds`` (a hash and a position on disk). So a submit holds
a batch of documents and the files being written, whatever the corpus's size.

Nothing is enqueued before the whole corpus has been read: the manifest that the chunk messages need names
every chunk's size, and a job must not start that may still be refused. A job refused on the way (a bad row with
``on_bad_row: refuse``, an id seen twice, a file no row of which has the columns, a team's cap) has the chunk
inputs it wrote removed, so it leaves nothing behind. A submit that dies mid-way leaves chunk inputs without a
manifest: no job, and a submit with the same ``--job-id`` writes them again.
"""

from __future__ import annotations

import bisect
import itertools
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from contract.job import FILE_BYTES, FILE_CHUNKS, encode_inputs, ids_key, input_file_key
from contract.spec import JobSpec, SpecError
from contract.storage import Storage
from jobs.chunks import Chunker
from jobs.inputs import Corpus, UniqueIds

if TYPE_CHECKING:
    from worker.engine.tokenizer import Tokenizer

WRITERS = 8  # chunk inputs written at once (on S3 each is a PUT: a round trip)
WAITING = 8  # input files queued behind them: what bounds a submit's memory
COUNTED_AT_ONCE = 1024  # documents whose tokens are counted in one call
PROGRESS_EVERY = 2.0  # seconds between progress lines
ID_ROWS = 65_536  # ids per row group of the id list: the id at a position is read back from one


@dataclass
class Plan:
    """What a submit read: each chunk input's documents, in order, and what it found."""

    sizes: list[int] = field(default_factory=list)
    input_files: list[int] = field(default_factory=list)  # each input file's first chunk input
    documents: int = 0
    bad_rows: int = 0
    tokens: int = 0
    files: list[str] = field(default_factory=list)


def write_inputs(
    spec: JobSpec,
    tokenizer: Tokenizer,
    storage: Storage,
    job_id: str,
    say: Callable[[str], None],
    *,
    max_chars: int,
) -> Plan:
    """Stream the spec's corpus into the job's chunk inputs and id list; the plan. Documents over ``max_chars``
    are error rows. Whatever refuses the job removes what was written before it is raised (``remove_inputs``)."""
    corpus = Corpus(spec, max_chars)
    plan = Plan(files=corpus.files)
    progress = Progress(say, plan)
    with tempfile.TemporaryDirectory(prefix="fanyi-submit-") as folder:
        try:
            with ChunkWriter(storage, job_id) as writer:
                ids, unique = IdList(Path(folder) / "ids.pq"), UniqueIds(Path(folder))
                for closed in _chunks(corpus.tables(), tokenizer, spec, plan):
                    ids.add(len(plan.sizes), closed)
                    unique.add(closed.documents["id"].to_pylist())
                    for chunk in closed.chunks():
                        writer.write(len(plan.sizes), chunk)
                        plan.sizes.append(chunk.num_rows)
                    progress.tick(writer.written)
            plan.input_files = writer.files
            ids.close()
            if (repeat := unique.first_repeat(ids.id_at)) is not None:
                first, second = repeat
                raise SpecError(f"duplicate id {ids.id_at(second)!r} in {corpus.file_of(second)} "
                                f"(first in {corpus.file_of(first)}): ids must be unique")  # fmt: skip
            storage.put_file(ids_key(job_id), ids.path)
        except BaseException:
            remove_inputs(storage, job_id)
            raise
    progress.done()
    return plan


def _chunks(tables: Iterable[pa.Table], tokenizer: Tokenizer, spec: JobSpec, plan: Plan) -> Iterator[Closed]:
    """The corpus cut into chunks as it streams, the chunks a batch of documents closes at a time; ``plan`` counts
    documents, bad rows and tokens on the way."""
    chunker = Chunker(max_documents=spec.chunk_documents, max_tokens=spec.chunk_tokens)
    rest: pa.Table | None = None  # documents of the chunk still open
    for batch in _rebatched(tables):
        counts = tokenizer.count([text or "" for text in batch["text"].to_pylist()])
        plan.documents += batch.num_rows
        plan.bad_rows += batch.num_rows - batch["error"].null_count
        plan.tokens += sum(counts)
        table = batch if rest is None else pa.concat_tables([rest, batch])
        sizes = [closed for tokens in counts if (closed := chunker.add(tokens)) is not None]
        yield Closed(table.slice(0, sum(sizes)), sizes)
        rest = table.slice(sum(sizes))
    if (last := chunker.last()) is not None and rest is not None:
        yield Closed(rest, [last])


@dataclass
class Closed:
    """Chunks closed together: their documents, one after another, and each one's size."""

    documents: pa.Table
    sizes: list[int]

    def chunks(self) -> Iterator[pa.Table]:
        for start, size in zip(itertools.accumulate(self.sizes, initial=0), self.sizes):
            yield self.documents.slice(start, size)


def _rebatched(tables: Iterable[pa.Table]) -> Iterator[pa.Table]:
    """The tables cut into batches of at most ``COUNTED_AT_ONCE`` documents."""
    for table in tables:
        for start in range(0, table.num_rows, COUNTED_AT_ONCE):
            yield table.slice(start, COUNTED_AT_ONCE)


class ChunkWriter:
    """Chunk inputs gathered into input files of ``FILE_CHUNKS`` (or about ``FILE_BYTES``), each written on one of
    ``WRITERS`` threads; ``write`` waits while ``WAITING`` files are queued. The first write that failed is raised
    by the next ``write`` or on leaving the block. ``files``: each file's first chunk input (``Job.input_files``)."""

    def __init__(self, storage: Storage, job_id: str):
        self.storage, self.job_id, self.written = storage, job_id, 0
        self.files: list[int] = []
        self._pool = ThreadPoolExecutor(WRITERS, thread_name_prefix="chunk-input")
        self._room = threading.BoundedSemaphore(WRITERS + WAITING)
        self._pending: deque[tuple[Future[None], int]] = deque()
        self._gathered: list[pa.Table] = []

    def __enter__(self) -> ChunkWriter:
        return self

    def __exit__(self, *failed: Any) -> None:
        if failed[0] is None and self._gathered:
            self._send()
        self._pool.shutdown(wait=True, cancel_futures=failed[0] is not None)
        if failed[0] is None:
            self._settle(all_of_them=True)

    def write(self, number: int, documents: pa.Table) -> None:
        """Chunk input ``number`` (the one after the last)."""
        if not self._gathered:
            self.files.append(number)
        self._gathered.append(documents)
        if len(self._gathered) >= FILE_CHUNKS or sum(t.nbytes for t in self._gathered) >= FILE_BYTES:
            self._send()

    def _send(self) -> None:
        self._settle()
        self._room.acquire()
        key = input_file_key(self.job_id, len(self.files) - 1)
        future = self._pool.submit(self.storage.put, key, encode_inputs(self._gathered))
        future.add_done_callback(lambda _: self._room.release())
        self._pending.append((future, len(self._gathered)))
        self._gathered = []

    def _settle(self, all_of_them: bool = False) -> None:
        while self._pending and (all_of_them or self._pending[0][0].done()):
            future, chunks = self._pending.popleft()
            future.result()  # raises the write's error
            self.written += chunks


class IdList:
    """The job's id list (``contract.job.ids_key``: each document's chunk and id) written to a local Parquet file
    as chunks close, in row groups of about ``ID_ROWS``; ``id_at`` reads back the id at a position."""

    def __init__(self, path: Path):
        self.path = path
        self._schema = pa.schema([("chunk", pa.int32()), ("id", pa.string())])
        self._writer = pq.ParquetWriter(path, self._schema, compression="zstd")
        self._waiting: list[pa.Table] = []
        self._rows = 0
        self._starts: list[int] = []  # each row group's first position, once the file is complete
        self._group: tuple[int, list[str]] | None = None  # the row group read last

    def add(self, first: int, closed: Closed) -> None:
        """The ids of chunks ``first``, ``first + 1``, ... (``closed``)."""
        numbers = np.repeat(np.arange(first, first + len(closed.sizes), dtype=np.int32), closed.sizes)
        self._waiting.append(pa.table([pa.array(numbers), closed.documents["id"]], schema=self._schema))
        self._rows += closed.documents.num_rows
        if self._rows >= ID_ROWS:
            self._flush()

    def close(self) -> None:
        self._flush()
        self._writer.close()
        metadata = pq.read_metadata(self.path)
        sizes = [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)]
        self._starts = list(itertools.accumulate(sizes, initial=0))[:-1]

    def _flush(self) -> None:
        if self._waiting:
            self._writer.write_table(pa.concat_tables(self._waiting).combine_chunks(), row_group_size=ID_ROWS * 2)
        self._waiting, self._rows = [], 0

    def id_at(self, position: int) -> str:
        group = bisect.bisect_right(self._starts, position) - 1
        if self._group is None or self._group[0] != group:
            with pq.ParquetFile(self.path) as parquet:
                self._group = group, parquet.read_row_group(group, columns=["id"]).column(0).to_pylist()
        return self._group[1][position - self._starts[group]]


class Progress:
    """A line every ``PROGRESS_EVERY`` seconds while the corpus is read, and one at the end."""

    def __init__(self, say: Callable[[str], None], plan: Plan):
        self.say, self.plan, self._next = say, plan, time.monotonic() + PROGRESS_EVERY

    def tick(self, written: int) -> None:
        if time.monotonic() >= self._next:
            self._next = time.monotonic() + PROGRESS_EVERY
            self.say(f"{self.plan.documents:,} documents read, {written:,} chunk inputs written")

    def done(self) -> None:
        plan = self.plan
        bad = f"; {plan.bad_rows:,} bad rows kept as error rows" if plan.bad_rows else ""
        self.say(f"{plan.documents:,} documents, {plan.tokens:,} source tokens checked{bad}; "
                 f"{len(plan.sizes):,} chunk inputs written")  # fmt: skip


def remove_inputs(storage: Storage, job_id: str) -> None:
    """What a refused submit wrote (its chunk inputs and id list), so that it leaves nothing behind."""
    try:
        keys = storage.list(f"{job_id}/_inputs/")
        with ThreadPoolExecutor(WRITERS) as pool:
            list(pool.map(storage.delete, keys))
    except Exception:  # noqa: BLE001 - storage failing is what the caller raises; the refusal is what counts
        pass
