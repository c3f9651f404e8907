"""The chunk task: read a chunk's documents, translate them, write their part once.

Delivery is at-least-once, so the task is idempotent: the part's key is fixed by (job, chunk), it is
created only if absent (a duplicate or redelivered chunk finds it and stops, or loses the race and
discards its copy), and metrics and progress count only the delivery that created it. The fault policy
around it (retries, environment faults, error rows, the soft time limit) is ``ChunkTask``'s
(``worker.runtime.chunk_task``).

Poison documents: a chunk is first translated in one engine call. After a delivery of it died
(``worker.runtime.deliveries``), the next ones translate document by document, recording which document
they are on; a document that was in progress in two deliveries that died alone (their worker still
beating) is written as an error row. After ``FANYI_MAX_DEATHS`` deaths the remaining documents become
error rows rather than loop forever.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import fields

from celery.exceptions import SoftTimeLimitExceeded

from contract import settings
from contract.glossary import Glossary
from contract.job import (
    TRANSLATE_CHUNK,
    Document,
    Job,
    compacted_chunks,
    decode_input,
    finalize,
    glossary_key,
    part_key,
    read_input,
    write_part,
)
from contract.messages import InvalidChunk
from contract.rows import Row, SentenceSpans, Timings
from contract.storage import Storage, open_storage
from worker.documents.languages import Routing
from worker.documents.translator import DocumentResult, DocumentTranslator
from worker.engine.artifact import ArtifactChanged
from worker.engine.memory import Memory
from worker.engine.search import DecodingOptions
from worker.monitoring import metrics
from worker.runtime.app import app
from worker.runtime.chunk_task import ChunkTask, job_manifest
from worker.runtime.deliveries import Deliveries
from worker.runtime.engines import job_translator
from worker.runtime.faults import ChunkFault, JobGone
from worker.runtime.memory import forget_job_memory, job_memory

log = logging.getLogger(__name__)
TIMINGS = {f.name for f in fields(Timings)}


@app.task(base=ChunkTask, name=TRANSLATE_CHUNK, bind=True)
def translate_chunk(task: ChunkTask, output: str, job_id: str, chunk: int, deliveries: Deliveries) -> str:
    """Translate chunk ``chunk`` of job ``job_id`` under ``output``: ``written``, or why not."""
    return run_chunk(output, job_id, chunk, deliveries)


def run_chunk(output: str, job_id: str, chunk: int, deliveries: Deliveries) -> str:
    storage = open_storage(output)
    try:
        job = job_manifest(output, job_id)
    except (FileNotFoundError, NotADirectoryError) as err:
        raise JobGone(f"the job's manifest is gone ({err})") from None
    if not 0 <= chunk < len(job.chunks):  # not the chunk's fault: there is no such chunk to write a part for
        raise InvalidChunk(f"job {job_id} has {len(job.chunks)} chunks, not a chunk {chunk}")
    key = part_key(job_id, chunk)
    if storage.exists(key) or chunk in compacted_chunks(storage, job):  # done, and maybe compacted since
        finalize(storage, job)
        return "exists"
    if storage.exists(job.key("_CANCELLED")):
        return "cancelled"
    documents = _documents(storage, job, job.input_chunk(chunk))
    memory = job_memory(output, job_id, job.spec)
    glossary = job_glossary(storage, job) if job.glossary_sha256 else None
    results = translate_documents(job, chunk, documents, deliveries, memory, glossary)
    artifact_id, counted = job.artifact(chunk)[1], job.glossary_sha256 is not None
    rows = [_row(r, document.text or "", job.id, artifact_id, counted) for document, r in zip(documents, results)]
    if not write_part(storage, job, chunk, rows):
        return "duplicate"  # another delivery wrote this part first; its content stands
    tokens, reused = sum(r.tokens for r in results), sum(r.reused_tokens for r in results)
    if metrics.record_part(job_id, rows, tokens, reused) and finalize(storage, job) is not None:  # storage decides
        forget_job_memory(output, job_id, job.spec)
    return "written"


def _documents(storage: Storage, job: Job, number: int) -> list[Document]:
    """Chunk input ``number``; a missing or unreadable one is the chunk's own fault."""
    try:
        data, batch = read_input(storage, job, number)
    except FileNotFoundError as err:
        raise ChunkFault(f"its input is gone ({err})") from None
    try:
        return decode_input(data, batch)
    except Exception as err:  # noqa: BLE001 - pyarrow raises several kinds for a damaged file
        raise ChunkFault(f"its input is unreadable ({type(err).__name__}: {err})") from None


def translate_documents(
    job: Job,
    chunk: int,
    documents: Sequence[Document],
    deliveries: Deliveries,
    memory: Memory | None = None,
    glossary: Glossary | None = None,
) -> list[DocumentResult]:
    """One result per document of chunk ``chunk``: bad input rows as errors, the others translated."""
    readable = [d for d in documents if d.error is None and d.text is not None]
    results = iter(_translate(job, chunk, readable, deliveries, memory, glossary))
    return [DocumentResult(d.id, "", "error", d.error) if d.error is not None else next(results) for d in documents]


def _translate(
    job: Job,
    chunk: int,
    documents: list[Document],
    deliveries: Deliveries,
    memory: Memory | None,
    glossary: Glossary | None,
) -> list[DocumentResult]:
    translator, target = job_translator(job, chunk, deliveries.worker), job.target(chunk)
    job_options, languages = job.spec.target_options(target), translator.languages
    routing = Routing.of(languages, job_options)
    source, into = languages.pair(job_options.fixed_source_language, target)  # ISO codes
    engine = DocumentTranslator(
        translator, overlap=job_options.overlap, budget=job_options.budget, format=job_options.format, memory=memory,
        routing=routing, glossary=glossary.into(into) if glossary else None,
    )  # fmt: skip
    options = translator.options(**job_options.decoding() | {"target_language": languages.told(target)})
    given = {d.id: d.language for d in documents if d.language}  # a spec's language_column
    results = _attempts(engine, [(d.id, str(d.text)) for d in documents], given, deliveries, options, job)
    for result in results:
        result.source_language, result.target_language = result.source_language or source, into
    return results


def _attempts(
    engine: DocumentTranslator,
    documents: list[tuple[str, str]],
    given: dict[str, str],
    deliveries: Deliveries,
    options: DecodingOptions,
    job: Job,
) -> list[DocumentResult]:
    """The documents translated together on a first delivery, one by one after a failure or a death, or none
    once the chunk's deliveries died too often."""
    deaths, poisoned = deliveries.deaths, deliveries.poisoned
    if deaths >= settings.MAX_DEATHS:
        message = f"gave up after {deaths} deliveries of this chunk died (killed or timed out); see the worker logs"
        return [DocumentResult(doc_id, "", "error", message) for doc_id, _ in documents]
    if deaths == 0:
        try:
            return engine.translate(documents, options, given)
        except (SoftTimeLimitExceeded, ArtifactChanged):  # no document's fault
            raise
        except Exception as err:  # noqa: BLE001 - isolate the document that caused it
            log.warning("chunk of job %s failed as a whole (%s); translating document by document", job.id, err)
    return [_isolated(engine, options, doc, given, deliveries, poisoned) for doc in documents]


def _isolated(
    engine: DocumentTranslator,
    options: DecodingOptions,
    document: tuple[str, str],
    given: dict[str, str],
    deliveries: Deliveries,
    poisoned: set[str],
) -> DocumentResult:
    doc_id, text = document
    if doc_id in poisoned:
        metrics.ERRORS.labels(kind="poison").inc()
        return DocumentResult(
            doc_id, "", "error", "the engine crashed or timed out on this document twice; it was skipped"
        )
    deliveries.suspect(doc_id)
    try:
        (result,) = engine.translate([document], options, given)
    except SoftTimeLimitExceeded:
        raise  # the suspect stays recorded: it gets a strike
    except ArtifactChanged:
        deliveries.suspect(None)  # no document's fault: the chunk is retried, no document struck
        raise
    except Exception as err:  # noqa: BLE001 - one document's failure is its own error row
        result = DocumentResult(doc_id, "", "error", f"{type(err).__name__}: {err}")
    deliveries.suspect(None)
    return result


def job_glossary(storage: Storage, job: Job) -> Glossary:
    """The glossary the job was submitted with, read from its copy (a copy whose hash is not the manifest's is
    the chunk's fault: the job's files were altered), parsed once per process."""
    key = glossary_key(job)
    try:
        data = storage.read(key)
    except FileNotFoundError:
        raise ChunkFault(f"its glossary {key} is gone") from None
    if hashlib.sha256(data).hexdigest() != job.glossary_sha256:
        raise ChunkFault(f"its glossary {key} is not the one the job was submitted with: submit the job again")
    return _parsed(data, key)


@functools.lru_cache(maxsize=8)
def _parsed(data: bytes, name: str) -> Glossary:
    return Glossary.parse(data, name)


def _row(result: DocumentResult, source: str, job_id: str, artifact_id: str, counted: bool) -> Row:
    """The result row of a document (``contract.rows``); ``counted``: the job has a glossary, whose terms it counts."""
    sentences = [SentenceSpans(*s.source, *s.target, s.flags) for s in result.sentences]
    timings = Timings(**{k: float(v) for k, v in (result.timings or {}).items() if k in TIMINGS})
    return Row(
        job_id, result.id, source, result.translation, result.status, result.error, result.flags, sentences,
        artifact_id, timings, result.windows, result.reused_windows, result.source_language, result.target_language,
        *((result.terms, result.terms_missed) if counted else (None, None)),
    )  # fmt: skip
