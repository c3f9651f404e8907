"""A job in storage: its manifest, chunk inputs, result parts and markers. Storage is the system of record.

    <output>/<job id>/_job.json                     the manifest: spec, artifact ids, chunk sizes
    <output>/<job id>/_head.json                    what a listing shows of it: name, team, created, sizes (small)
    <output>/<job id>/_inputs/chunks-00001.arrow    chunk inputs 16 to 31 (their documents: id, text, error, language),
                                                    one Arrow record batch each (``Job.input_files``: where each starts)
    <output>/<job id>/_inputs/ids.pq                every document's id and chunk (for a chunk lost later)
    <output>/<job id>/_glossary.tsv                 the spec's glossary, copied at submit (its suffix kept)
    <output>/<job id>/_ENQUEUED                     every chunk was enqueued once: the job is running
    <output>/<job id>/parts/part-00017.parquet      their results, one row per document, written once
    <output>/<job id>/_summaries/chunk-00017.json   what finalize needs of part 17: rows, sha256, its counts
    <output>/<job id>/_failures/chunk-00017.json    why chunk 17 could not be done (its part holds error rows)
    <output>/<job id>/_SUCCESS                      written once, when every part exists: the job's end, its counts
    <output>/<job id>/_parts.json                   each part's key, rows and sha256 (written before _SUCCESS)
    <output>/<job id>/_CANCELLED                    present while the job is cancelled
    <output>/<job id>/parts/compacted-00000.parquet after ``jobs compact``: the parts, merged in chunk order
    <output>/<job id>/_COMPACTED                    which chunks each compacted file holds

Everything but the parts starts with ``_``, which pyarrow, pandas and Spark skip when they read a folder,
and the job's own files end in ``.pq`` (its id list) or ``.arrow`` (chunk inputs), so a ``*.parquet`` glob (duckdb,
polars) of the job's folder matches the results only: ``<output>/<job id>``, ``<output>/<job id>/**/*.parquet`` and
``<output>/*/parts/*.parquet`` each read as one table. Chunk inputs are Arrow IPC files of up to ``FILE_CHUNKS``
chunk inputs (and about ``FILE_BYTES``) each, not one Parquet file per 64 documents: a submit of a million documents
writes 977 objects, not 15,625 (a small Parquet file takes four times an IPC file's time to write, and each object
on S3 is a request), and a worker reads one batch of one file. Jobs submitted earlier kept each chunk input in a
Parquet file of its own (``chunk-00017.pq``, and before that ``.parquet``); workers still read those
(``read_input``).

A job's state comes from these alone: ``submitting`` (no ``_ENQUEUED`` yet: enqueueing broke off,
``jobs resume`` completes it), ``running``, ``cancelled``, and at the end (``_SUCCESS``)
``succeeded`` (no error row), ``completed_with_errors`` or ``failed`` (every row an error).

A job with several target languages (``JobSpec.targets``) has one chunk per chunk input and target:
chunk ``c`` of a job with ``N`` chunk inputs reads input ``c mod N`` into target ``c div N``, so parts,
progress, failures and ``resume`` count (document, target) rows and need nothing else.

Chunk inputs are copied at submission, so a chunk is self-contained: the source files may move or
change afterwards, and ``resume`` needs nothing but this prefix.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath
from typing import Any

from contract import settings
from contract.parquet import read_parquet
from contract.rows import Row, encode_rows, read_rows
from contract.spec import JobSpec
from contract.storage import Storage, StorageError

JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MANIFEST = "_job.json"
HEAD = "_head.json"  # a listing's view of a job (``write_head``)
TRANSLATE_CHUNK = "fanyi.translate_chunk"  # the task of a chunk message; its args: output, job id, chunk
PARTS = "_parts.json"  # each part's key, rows and sha256, listed by finalize
SUMMARY_READERS = 16  # part summaries finalize reads at once (S3: one GET each)
FINALIZE_WAIT = 120.0  # seconds one finalizer holds the job's lock, and another waits for its _SUCCESS at most
SUMMARY_GROUP = 100  # parts whose summaries are summed into one file by the worker that writes the last of them
FILE_CHUNKS = 16  # chunk inputs a submit writes to one input file at most ...
FILE_BYTES = 8 << 20  # ... and about this many bytes of them (a chunk's task reads the whole file)
COMPACTED = "_COMPACTED"  # which chunks each compacted file holds (``jobs compact``)


def check_job_id(job_id: str) -> str:
    if not JOB_ID.fullmatch(job_id) or ".." in job_id:
        raise StorageError(f"invalid job id {job_id!r}: letters, digits, '.', '_' and '-' only")
    return job_id


@dataclass
class Job:
    id: str
    spec: JobSpec
    artifact_id: str  # the first target's
    chunks: list[int]  # documents per chunk: per chunk input, once per target
    created: float = field(default_factory=time.time)
    bad_rows: int = 0  # input rows that could not be read as documents: each is an error row in the output
    artifact_ids: dict[str, str] = field(default_factory=dict)  # each artifact's path -> its id
    glossary_sha256: str | None = None  # of the spec's glossary as submitted (its copy: ``glossary_key``)
    team: str | None = None  # who submitted it over HTTP (``jobs.server``); None from the CLI
    input_files: list[int] = field(default_factory=list)  # each input file's first chunk input (none: one per file)

    @property
    def input_chunks(self) -> int:
        """How many chunk inputs the job has: each is read by one chunk per target."""
        return len(self.chunks) // len(self.spec.targets)

    def input_chunk(self, chunk: int) -> int:
        """The chunk input that chunk ``chunk`` translates."""
        return chunk % self.input_chunks

    def input_file(self, number: int) -> tuple[str, int | None]:
        """Where chunk input ``number`` is: the file's key and its record batch there (None: the whole file, as in
        jobs submitted before input files held several)."""
        if not self.input_files:
            return input_key(self.id, number), None
        file = bisect.bisect_right(self.input_files, number) - 1
        return input_file_key(self.id, file), number - self.input_files[file]

    def target(self, chunk: int) -> str | None:
        """The language chunk ``chunk`` translates into (None: the one its model writes)."""
        return self.spec.targets[chunk // self.input_chunks]

    def artifact(self, chunk: int) -> tuple[str, str]:
        """The path and id of the artifact that translates chunk ``chunk``."""
        path = self.spec.artifact_for(self.target(chunk))
        return path, self.artifact_ids.get(path, self.artifact_id)

    @property
    def documents(self) -> int:
        return sum(self.chunks)

    @property
    def queue(self) -> str:
        """The queue of the workers of the job's device."""
        return settings.queue_for(self.spec.device)

    def chunk_message(self, output: str, chunk: int) -> dict[str, Any]:
        """What enqueues chunk ``chunk`` of this job under ``output``: ``app.send_task(TRANSLATE_CHUNK, **this)``."""
        return {"args": [output, self.id, chunk], "queue": self.queue, "priority": self.spec.priority}

    def key(self, name: str) -> str:
        return f"{check_job_id(self.id)}/{name}"


def input_file_key(job_id: str, file: int) -> str:
    """Where input file ``file`` of a job is (``Job.input_files``: the chunk inputs it holds)."""
    return f"{check_job_id(job_id)}/_inputs/chunks-{file:05d}.arrow"


def input_key(job_id: str, chunk: int) -> str:
    """Where a job submitted before input files held several chunk inputs kept chunk input ``chunk``."""
    return f"{check_job_id(job_id)}/_inputs/chunk-{chunk:05d}.pq"


def read_own(storage: Storage, key: str) -> bytes:
    """One of a job's own Parquet files (``input_key``, ``ids_key``), or its ``.parquet`` name in a job
    submitted before they ended in ``.pq``."""
    try:
        return storage.read(key)
    except FileNotFoundError:
        return storage.read(key.removesuffix(".pq") + ".parquet")


def glossary_key(job: Job) -> str:
    """Where a job keeps the copy of its spec's glossary (the file's suffix says its format)."""
    return job.key(f"_glossary{PurePosixPath(str(job.spec.glossary)).suffix or '.tsv'}")


def part_key(job_id: str, chunk: int) -> str:
    return f"{check_job_id(job_id)}/parts/part-{chunk:05d}.parquet"


def summary_key(job_id: str, chunk: int) -> str:
    return f"{check_job_id(job_id)}/_summaries/{chunk // SUMMARY_GROUP:05d}/chunk-{chunk:05d}.json"


def group_key(job_id: str, group: int) -> str:
    """Where the summaries of chunks ``group * SUMMARY_GROUP`` on are summed, once all are written."""
    return f"{check_job_id(job_id)}/_summaries/group-{group:05d}.json"


def _flat_summary_key(job_id: str, chunk: int) -> str:
    """Where a part's summary was kept by workers before summaries were grouped."""
    return f"{check_job_id(job_id)}/_summaries/chunk-{chunk:05d}.json"


def failure_key(job_id: str, chunk: int) -> str:
    return f"{check_job_id(job_id)}/_failures/chunk-{chunk:05d}.json"


def ids_key(job_id: str) -> str:
    return f"{check_job_id(job_id)}/_inputs/ids.pq"


TERMINAL = ("succeeded", "completed_with_errors", "failed", "cancelled")


def job_state(summary: dict[str, Any] | None, marked: Callable[[str], bool]) -> str:
    """The job's state from storage: ``summary`` is its ``_SUCCESS`` when written, ``marked(name)`` whether its
    folder holds that marker."""
    if summary is not None:
        return str(summary.get("state", "succeeded"))
    if marked("_CANCELLED"):
        return "cancelled"
    return "running" if marked("_ENQUEUED") else "submitting"


def failures(storage: Storage, job: Job) -> dict[int, str]:
    """Chunk -> why it could not be done (files of chunks the job does not have are ignored)."""
    found = {}
    for key in storage.list(f"{job.id}/_failures"):
        chunk = _chunk_number(key.rsplit("/", 1)[1], "chunk-", ".json", job)
        if chunk is not None:
            found[chunk] = json.loads(storage.read(key))["reason"]
    return found


_NUMBERED = re.compile(r"(\d{5,9})")


def _chunk_number(name: str, prefix: str, suffix: str, job: Job) -> int | None:
    """The chunk a part or failure file is named for, None unless it is one of the job's chunks: a stray
    file (``part-09999`` of a 40-chunk job, ``part--0001``, written by a rogue message before workers
    checked the chunk number) must not count as done nor make the readers index past ``job.chunks``."""
    if not (name.startswith(prefix) and name.endswith(suffix)):
        return None
    match = _NUMBERED.fullmatch(name[len(prefix) : len(name) - len(suffix)])
    return int(match[1]) if match and int(match[1]) < len(job.chunks) else None


def chunk_ids(storage: Storage, job: Job, chunk: int) -> list[str]:
    """The ids of a chunk's documents, from the job's id list; positions when even that is gone."""
    try:
        table = read_parquet(read_own(storage, ids_key(job.id)))
        own = job.input_chunk(chunk)
        return [i for c, i in zip(table.column("chunk").to_pylist(), table.column("id").to_pylist()) if c == own]
    except Exception:  # noqa: BLE001 - the ids are a convenience for error rows; positions still count them
        return [f"{job.id}/chunk-{chunk:05d}/document-{k}" for k in range(job.chunks[chunk])]


def write_part(storage: Storage, job: Job, chunk: int, rows: Sequence[Row]) -> bool:
    """Create chunk ``chunk``'s part (once: False if one exists), then its summary beside it, so that finalize
    sums summaries and never reads the parts (a summary lost in between is made again from the part); the
    writer of a group's last summary sums the group (``group_key``), so finalize reads one file per 100 parts."""
    data = encode_rows(rows)
    if not storage.create(part_key(job.id, chunk), data):
        return False
    storage.put(summary_key(job.id, chunk), json.dumps(_part_summary(data)).encode())
    _sum_group(storage, job, chunk // SUMMARY_GROUP)
    return True


def _sum_group(storage: Storage, job: Job, group: int) -> None:
    """Sum a group's summaries into its file once every one is written (two writers may both do it, alike)."""
    chunks = _group_chunks(job, group)
    if len(storage.list(f"{job.id}/_summaries/{group:05d}/")) < len(chunks):
        return
    with ThreadPoolExecutor(SUMMARY_READERS) as pool:
        summaries = list(pool.map(lambda chunk: json.loads(storage.read(summary_key(job.id, chunk))), chunks))
    storage.put(group_key(job.id, group), json.dumps(_sum(summaries)).encode())


def _group_chunks(job: Job, group: int) -> range:
    first = group * SUMMARY_GROUP
    return range(first, min(first + SUMMARY_GROUP, len(job.chunks)))


def _sum(summaries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Part summaries summed: each one's rows and sha256, in order, and their counts merged."""
    tally = Tally()
    for summary in summaries:
        tally.merge(Tally.from_dict(summary["tally"]))
    return {"parts": [{"rows": s["rows"], "sha256": s["sha256"]} for s in summaries], "tally": tally.as_dict()}


def forget_summaries(storage: Storage, job: Job, chunk: int) -> None:
    """Remove chunk ``chunk``'s summary and its group's sum (its part is about to be written again)."""
    group = group_key(job.id, chunk // SUMMARY_GROUP)
    for key in (summary_key(job.id, chunk), _flat_summary_key(job.id, chunk), group):
        storage.delete(key)


def _part_summary(data: bytes) -> dict[str, Any]:
    rows = read_rows(data)
    return {"rows": len(rows), "sha256": hashlib.sha256(data).hexdigest(), "tally": Tally().add(rows).as_dict()}


def write_failed_chunk(storage: Storage, job: Job, chunk: int, reason: str) -> list[Row]:
    """The chunk's documents as error rows with ``reason``, created once like any part, and then why it
    failed, for ``jobs status``: only by the call that created the part, so a good part that exists is
    never listed as failed. Returns the rows (empty if a part already existed)."""
    artifact_id, target = job.artifact(chunk)[1], job.target(chunk)
    ids = chunk_ids(storage, job, chunk)
    rows = [Row.failed(job.id, artifact_id, doc_id, reason, ["chunk_failed"], target) for doc_id in ids]
    if not write_part(storage, job, chunk, rows):
        return []
    storage.put(failure_key(job.id, chunk), json.dumps({"reason": reason, "time": time.time()}).encode())
    return rows


def write_job(storage: Storage, job: Job) -> None:
    manifest = {**asdict(job), "spec": job.spec.to_dict()}
    if not storage.create(job.key(MANIFEST), json.dumps(manifest, indent=1).encode()):
        raise StorageError(f"job {job.id} already exists under {storage.uri}")


def write_head(storage: Storage, job: Job) -> None:
    """The few facts a listing of jobs shows, in a file of its own: the manifest grows with the job's chunks."""
    storage.put(job.key(HEAD), json.dumps(_head(job)).encode())


def read_head(storage: Storage, job_id: str, *, written: bool = True) -> dict[str, Any]:
    """A job's head (``write_head``); made from its manifest for a job submitted before heads, or not ``written``."""
    if written:
        try:
            head: dict[str, Any] = json.loads(storage.read(f"{check_job_id(job_id)}/{HEAD}"))
            return head
        except FileNotFoundError:
            pass
    return _head(read_job(storage, job_id))


def _head(job: Job) -> dict[str, Any]:
    return {"name": job.spec.name, "team": job.team, "created": job.created, "documents": job.documents,
            "chunks": len(job.chunks)}  # fmt: skip


def read_job(storage: Storage, job_id: str) -> Job:
    try:
        manifest = json.loads(storage.read(f"{check_job_id(job_id)}/{MANIFEST}"))
    except FileNotFoundError:
        raise FileNotFoundError(f"no job {job_id!r} under {storage.uri} (is the output prefix right?)") from None
    return Job(**{**manifest, "spec": JobSpec.from_dict(manifest["spec"], source=f"the manifest of job {job_id}")})


def list_jobs(storage: Storage) -> list[str]:
    """The jobs under ``storage``: its folders that hold a manifest (a delimiter listing and one look per folder,
    not a listing of every input and part of every job)."""
    return [f for f in storage.folders() if JOB_ID.fullmatch(f) and storage.exists(f"{f}/{MANIFEST}")]


def done_chunks(storage: Storage, job: Job, parts: Iterable[str] | None = None) -> set[int]:
    """Chunks whose part exists (or was compacted): from storage alone, so it survives Redis losing everything.
    Parts named for a chunk the job does not have are ignored (``_chunk_number``). ``parts``: the keys under the
    job's ``parts`` folder, when the caller has listed them."""
    keys = storage.list(f"{job.id}/parts") if parts is None else parts
    numbers = (_chunk_number(k.rsplit("/", 1)[1], "part-", ".parquet", job) for k in keys)
    return {n for n in numbers if n is not None} | set(compacted_chunks(storage, job))


def compacted_chunks(storage: Storage, job: Job) -> dict[int, str]:
    """Chunk -> the compacted file that holds its rows (``jobs compact``); empty for a job not compacted."""
    if not storage.exists(job.key(COMPACTED)):
        return {}
    files = json.loads(storage.read(job.key(COMPACTED)))["files"]
    return {chunk: entry["key"] for entry in files for chunk in entry["chunks"]}


def result_keys(storage: Storage, job: Job) -> list[str]:
    """The files holding the job's rows, each row in exactly one: compacted files, then parts not compacted."""
    compacted = compacted_chunks(storage, job)
    parts = [part_key(job.id, c) for c in sorted(done_chunks(storage, job) - set(compacted))]
    return sorted(set(compacted.values())) + parts


@dataclass(frozen=True)
class Document:
    """One input row of a job: its id and text, or why it cannot be translated (it becomes an error row); its
    language when the input gives it (a spec's ``language_column``)."""

    id: str
    text: str | None
    error: str | None = None
    language: str | None = None


@functools.cache
def documents_schema() -> Any:
    """A chunk input's columns (pyarrow is imported on first use)."""
    import pyarrow as pa

    return pa.schema([(name, pa.string()) for name in ("id", "text", "error", "language")])


def documents_table(documents: Iterable[Document]) -> Any:
    """Documents as a table of ``documents_schema``."""
    import pyarrow as pa

    rows = list(documents)
    columns = ([d.id for d in rows], [d.text for d in rows], [d.error for d in rows], [d.language for d in rows])
    return pa.table([pa.array(c, pa.string()) for c in columns], schema=documents_schema())


def encode_inputs(chunks: Sequence[Any]) -> bytes:
    """An input file: chunk inputs (tables of ``documents_schema``) as an Arrow IPC file, one record batch each."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, documents_schema()) as writer:
        for chunk in chunks:
            writer.write_batch(chunk.combine_chunks().to_batches()[0])
    return bytes(sink.getvalue())


def read_input(storage: Storage, job: Job, number: int) -> tuple[bytes, int | None]:
    """The input file that holds chunk input ``number``, and its record batch there (None: the file is that chunk
    input alone, in Parquet, as jobs submitted before input files kept them); ``decode_input`` reads its documents."""
    key, batch = job.input_file(number)
    return (storage.read(key) if batch is not None else read_own(storage, key)), batch


def decode_input(data: bytes, batch: int | None) -> list[Document]:
    import pyarrow as pa

    if batch is None:
        return decode_table(read_parquet(data))
    return decode_table(pa.Table.from_batches([pa.ipc.open_file(pa.BufferReader(data)).get_batch(batch)]))


def decode_table(table: Any) -> list[Document]:
    """A chunk input's table as documents (a column an older input lacks is None)."""
    column = lambda name: table.column(name).to_pylist() if name in table.column_names else [None] * table.num_rows
    return [Document(*row) for row in zip(column("id"), column("text"), column("error"), column("language"))]


STATUSES = ("ok", "partial", "error", "skipped")  # skipped: in a language the artifact cannot read


COUNTED = ("statuses", "sentence_flags", "languages", "routes", "targets", "terms")  # Tally's counters


@dataclass
class Tally:
    """Documents per status, sentences per flag, and windows (all, and those the memory gave), over result rows."""

    statuses: Counter[str] = field(default_factory=Counter)
    sentence_flags: Counter[str] = field(default_factory=Counter)
    sentences: int = 0
    windows: int = 0
    reused_windows: int = 0
    languages: Counter[str] = field(default_factory=Counter)  # documents per source language (found, or the job's)
    routes: Counter[str] = field(default_factory=Counter)  # documents per routing outcome
    targets: Counter[tuple[str, str]] = field(default_factory=Counter)  # rows per (target language, status)
    terms: Counter[str] = field(default_factory=Counter)  # glossary terms: "terms" put in, "terms_missed"

    def add(self, rows: Sequence[dict[str, Any]]) -> Tally:
        for row in rows:
            self.statuses[row["status"]] += 1
            self.windows += row.get("windows") or 0  # parts written before the memory have no such column
            self.reused_windows += row.get("reused_windows") or 0
            self.sentences += len(row["sentences"] or [])
            self.sentence_flags.update(flag for s in row["sentences"] or [] for flag in s["sentence_flags"])
            if row.get("source_language"):  # parts of row format 3 on
                self.languages[row["source_language"]] += 1
                self.routes.update(_routes(row))
            if row.get("target_language"):
                self.targets[row["target_language"], row["status"]] += 1
            self.terms.update({key: row.get(key) or 0 for key in ("terms", "terms_missed")})  # format 4 on
        return self

    def merge(self, other: Tally) -> Tally:
        for name in COUNTED:
            getattr(self, name).update(getattr(other, name))
        self.sentences += other.sentences
        self.windows += other.windows
        self.reused_windows += other.reused_windows
        return self

    def as_dict(self) -> dict[str, Any]:
        """Everything it counted, as JSON (a part's summary); ``from_dict`` reads it back."""
        counts = {name: dict(getattr(self, name)) for name in COUNTED if name != "targets"}
        totals = {"sentences": self.sentences, "windows": self.windows, "reused_windows": self.reused_windows}
        return counts | totals | {"targets": [[code, status, n] for (code, status), n in self.targets.items()]}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Tally:
        tally = cls(sentences=raw["sentences"], windows=raw["windows"], reused_windows=raw["reused_windows"])
        for name in COUNTED:
            if name != "targets":
                getattr(tally, name).update(raw[name])
        tally.targets.update({(code, status): n for code, status, n in raw["targets"]})
        return tally

    def counters(self) -> dict[str, int]:
        """The named counts a job's progress cache keeps beside its totals: ``flag:<flag>``,
        ``language:<code>``, ``route:<route>``, ``target:<code>:<status>``, ``terms``, ``terms_missed``
        (``contract.cache``)."""
        named = {f"flag:{flag}": n for flag, n in self.sentence_flags.items()}
        named |= {f"language:{code}": n for code, n in self.languages.items()}
        named |= {f"route:{route}": n for route, n in self.routes.items()}
        named |= {f"target:{code}:{status}": n for (code, status), n in self.targets.items()}
        return named | {key: n for key, n in self.terms.items() if n}

    def summary(self) -> dict[str, Any]:
        statuses = {s: self.statuses.get(s, 0) for s in STATUSES}
        return {
            "statuses": statuses,
            "sentences": self.sentences,
            "sentence_flags": dict(sorted(self.sentence_flags.items())),
            "memory": {"windows": self.windows, "reused_windows": self.reused_windows, "reuse_rate": self.reuse_rate},
            "languages": dict(self.languages.most_common()),
            "routes": dict(sorted(self.routes.items())),
            "targets": _per_target(self.targets),
            "terms": term_counts(self.terms),
        }

    @property
    def reuse_rate(self) -> float:
        return round(self.reused_windows / self.windows, 4) if self.windows else 0.0


def _routes(row: dict[str, Any]) -> list[str]:
    """What became of a routed document: ``translated``, ``already_target`` or ``skipped`` (or ``error``), and
    ``language_fallback`` beside it when its language could not be told."""
    flags = row.get("document_flags") or []
    route = "already_target" if "already_target" in flags else _ROUTE_OF_STATUS.get(row["status"], row["status"])
    return [route, *(["language_fallback"] if "language_fallback" in flags else [])]


_ROUTE_OF_STATUS = {"ok": "translated", "partial": "translated"}


def term_counts(counts: Mapping[str, int]) -> dict[str, Any]:
    """Glossary terms put in and missed, and the share put in (None with no term met)."""
    put, missed = counts.get("terms", 0), counts.get("terms_missed", 0)
    return {"applied": put, "missed": missed, "hit_rate": round(put / (put + missed), 4) if put + missed else None}


def _per_target(counts: Mapping[tuple[str, str], int]) -> dict[str, dict[str, int]]:
    """Rows per target language and status, each target with every status."""
    targets = sorted({target for target, _ in counts})
    return {target: {s: counts.get((target, s), 0) for s in STATUSES} for target in targets}


def finalize(storage: Storage, job: Job) -> dict[str, Any] | None:
    """Write ``_SUCCESS`` (counts, state, failed chunks) once every part exists; None while some are missing.

    It sums the parts' summaries (``write_part``), read in parallel, never the parts themselves; each part's key,
    rows and checksum go to ``_parts.json`` first, so ``_SUCCESS`` stays small whatever the job's size. Any number
    of callers may race here (the tasks that finish last, ``jobs wait``): one sums at a time (a Redis lock, while
    Redis answers) and the others wait for its ``_SUCCESS``; it is created at most once, and every caller returns
    the same one."""
    if storage.exists(job.key("_SUCCESS")):
        return json.loads(storage.read(job.key("_SUCCESS")))
    if len(done_chunks(storage, job)) < len(job.chunks):
        return None
    with _finalizing(job) as mine:
        if not mine and (written := _success_within(storage, job, FINALIZE_WAIT)) is not None:
            return written
        return _write_success(storage, job)


@contextmanager
def _finalizing(job: Job) -> Iterator[bool]:
    """Whether this caller is the job's one finalizer (True also when Redis cannot say)."""
    from redis.exceptions import RedisError

    from contract import cache

    key = cache.FINALIZE_LOCK.format(job=job.id)
    try:
        mine = bool(cache.cache().set(key, "1", nx=True, px=int(FINALIZE_WAIT * 1000)))
    except (RedisError, OSError):  # no Redis: callers race, and _SUCCESS is still created once
        mine, key = True, ""
    try:
        yield mine
    finally:
        if mine and key:
            cache.best_effort("finalize lock not released", lambda: cache.cache().delete(key), 0)


def _success_within(storage: Storage, job: Job, seconds: float) -> dict[str, Any] | None:
    """The job's ``_SUCCESS`` once another caller wrote it, or None after ``seconds`` (it died meanwhile)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if storage.exists(job.key("_SUCCESS")):
            found: dict[str, Any] = json.loads(storage.read(job.key("_SUCCESS")))
            return found
        time.sleep(0.2)
    return None


def _write_success(storage: Storage, job: Job) -> dict[str, Any]:
    tally, parts = _summed(storage, job)
    storage.put(job.key(PARTS), json.dumps(parts).encode())
    counts = tally.summary()
    failed_chunks = failures(storage, job)
    error_rows, documents = counts["statuses"]["error"], sum(p["rows"] for p in parts)
    state = (
        "failed" if documents and error_rows == documents else "completed_with_errors" if error_rows else "succeeded"
    )
    summary = {
        "job": job.id,
        "state": state,
        "documents": documents,
        **counts,
        "failed_chunks": {str(c): reason for c, reason in sorted(failed_chunks.items())},
        "parts": {"count": len(parts), "listed_in": PARTS},
        "finished": time.time(),
    }
    storage.create(job.key("_SUCCESS"), json.dumps(summary, indent=1).encode())
    written: dict[str, Any] = json.loads(storage.read(job.key("_SUCCESS")))
    return written


def _summed(storage: Storage, job: Job) -> tuple[Tally, list[dict[str, Any]]]:
    """The job's counts and each part's key, rows and sha256, in chunk order: from each group's sum where it was
    written, else from the group's part summaries (``_summary``)."""
    groups = range(0, -(-len(job.chunks) // SUMMARY_GROUP))
    with ThreadPoolExecutor(SUMMARY_READERS) as pool:
        written = list(pool.map(lambda group: _group_sum(storage, job, group), groups))
        each = lambda group: list(pool.map(lambda c: _summary(storage, job, c), _group_chunks(job, group)))
        sums = [found if found is not None else _sum(each(group)) for group, found in zip(groups, written)]
    tally, parts = Tally(), []
    for group, found in zip(groups, sums):
        tally.merge(Tally.from_dict(found["tally"]))
        parts += [{"key": part_key(job.id, group * SUMMARY_GROUP + n), "rows": p["rows"], "sha256": p["sha256"]}
                  for n, p in enumerate(found["parts"])]  # fmt: skip
    return tally, parts


def _group_sum(storage: Storage, job: Job, group: int) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = json.loads(storage.read(group_key(job.id, group)))
        return found
    except (FileNotFoundError, ValueError):
        return None


def _summary(storage: Storage, job: Job, chunk: int) -> dict[str, Any]:
    """A part's summary: read where written (or where it was written before groups), else made from the part
    (and kept)."""
    for key in (summary_key(job.id, chunk), _flat_summary_key(job.id, chunk)):
        try:
            found: dict[str, Any] = json.loads(storage.read(key))
            return found
        except (FileNotFoundError, ValueError):
            continue
    made = _part_summary(storage.read(part_key(job.id, chunk)))
    storage.put(summary_key(job.id, chunk), json.dumps(made).encode())
    return made
