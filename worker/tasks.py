"""The chunk task: read a chunk's documents, translate them, write their part once.

Delivery is at-least-once, so the task is idempotent: the part's key is fixed by (job, chunk), it is
created only if absent (a duplicate or redelivered chunk finds it and stops, or loses the race and
discards its copy), and metrics and progress count only the delivery that created it.

Every chunk ends in a part. What goes wrong is classified once (``worker.faults``): a transient fault
is retried with capped, jittered backoff; an environment fault puts the chunk back for a healthy
worker and makes this one stop consuming until it is fixed (``worker.health``); a fault of the chunk
itself writes its documents as error rows with the reason (``write_failed_chunk``), so the job ends.

Poison documents: a chunk is first translated in one engine call. After a delivery of it died
(``worker.deliveries``), the next ones translate document by document, recording which document they
are on; a document that was in progress in two deliveries that died is written as an error row. After
``FANYI_MAX_DEATHS`` deaths the remaining documents become error rows rather than loop forever.
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from celery.exceptions import Reject, SoftTimeLimitExceeded

from worker import health, metrics, settings
from worker.app import app
from worker.artifact import ArtifactError
from worker.deliveries import Deliveries
from worker.documents import DocumentResult, DocumentTranslator
from worker.engine.translator import Translator
from worker.faults import ChunkFault, EnvironmentFault, Fault, classify
from worker.job import (
    Document,
    Job,
    decode_documents,
    encode_rows,
    finalize,
    input_key,
    part_key,
    read_job,
    write_failed_chunk,
)
from worker.storage import open_storage
from worker.watchdog import record_ended, record_running

log = logging.getLogger(__name__)
DECODING_OPTIONS = ("beam_size", "max_new_tokens", "source_language", "target_language", "source_prefix")


@functools.cache
def translator_for(artifact: str) -> Translator:
    """One Translator per artifact per process, made after fork and reused by every task."""
    translator = Translator(
        artifact, device=settings.DEVICE, precision=settings.PRECISION, threads=settings.THREADS,
        sessions=settings.SESSIONS,
    )  # fmt: skip
    translator.on_batch = lambda batch: metrics.BATCH_FILL.observe(batch.cost / translator.max_tokens)
    return translator


@app.task(name="fanyi.translate_chunk", bind=True, max_retries=None)
def translate_chunk(self: Any, output: str, job_id: str, chunk: int) -> str:
    deliveries = Deliveries(job_id, chunk, self.request.hostname or "")
    record_running(output, job_id, chunk, self.request.hostname or "")
    try:
        with metrics.TASK_SECONDS.time():
            outcome = run_chunk(output, job_id, chunk, deliveries)
        deliveries.end()
        return outcome
    except SoftTimeLimitExceeded:
        metrics.ERRORS.labels(kind="time_limit").inc()
        deliveries.timed_out()  # counts as a death: the document it was on gets a strike
        raise self.retry(countdown=1) from None
    except Exception as err:
        deliveries.end()
        return _handle(self, err, output, job_id, chunk)
    finally:
        record_ended(output, job_id, chunk)


def _handle(task: Any, err: Exception, output: str, job_id: str, chunk: int) -> str:
    fault = classify(err)
    metrics.ERRORS.labels(kind=fault.value).inc()
    if fault is Fault.TRANSIENT:
        delay = min(settings.RETRY_MAX_DELAY, 2.0 ** min(task.request.retries, 10)) * random.uniform(0.5, 1.0)
        log.warning("chunk %s of job %s: %s; retrying in %.0f s", chunk, job_id, err, delay)
        raise task.retry(countdown=delay) from None
    if fault is Fault.ENVIRONMENT:
        _stop_consuming(task, err, output)
        raise Reject(f"environment fault, chunk put back: {err}", requeue=True) from None
    log.error("chunk %s of job %s cannot be done: %s", chunk, job_id, err)
    _fail_chunk(output, job_id, chunk, f"chunk {chunk} could not be translated: {err}")
    return "failed"


def _stop_consuming(task: Any, err: Exception, output: str) -> None:
    """Mark this worker unhealthy and cancel its consumers (waiting for the main process to confirm),
    so the chunk put back goes to a healthy worker."""
    queue = (task.request.delivery_info or {}).get("routing_key") or "translate.cpu"
    check = health.check_for(err, output)
    health.mark_unhealthy(f"{type(err).__name__}: {err}", check, [queue])
    log.error("environment fault (%s): this worker stops taking chunks until %s passes", err, check)
    hostname = task.request.hostname
    if hostname:
        task.app.control.cancel_consumer(queue, destination=[hostname], reply=True, timeout=5)


def _fail_chunk(output: str, job_id: str, chunk: int, reason: str) -> None:
    storage = open_storage(output)
    job = _job(output, job_id)
    rows = write_failed_chunk(storage, job, chunk, reason)
    if rows and metrics.record_part(job_id, rows):
        finalize(storage, job)


@functools.lru_cache(maxsize=256)
def _job(output: str, job_id: str) -> Job:
    """A job's manifest, read once per process: it is written once and never changes."""
    return read_job(open_storage(output), job_id)


def run_chunk(output: str, job_id: str, chunk: int, deliveries: Deliveries) -> str:
    storage = open_storage(output)
    try:
        job = _job(output, job_id)
    except FileNotFoundError as err:
        raise ChunkFault(f"the job's manifest is gone ({err})") from None
    if not 0 <= chunk < len(job.chunks):
        raise ChunkFault(f"job {job_id} has {len(job.chunks)} chunks, not a chunk {chunk}")
    key = part_key(job_id, chunk)
    if storage.exists(key):
        finalize(storage, job)
        return "exists"
    if storage.exists(job.key("_CANCELLED")):
        return "cancelled"
    documents = _documents(storage.read, job_id, chunk)
    rows = translate_rows(job, documents, deliveries)
    if not storage.create(key, encode_rows(rows)):
        return "duplicate"  # another delivery wrote this part first; its content stands
    if metrics.record_part(job_id, rows):  # the last part, or the cache cannot tell: storage decides
        finalize(storage, job)
    return "written"


def _documents(read: Any, job_id: str, chunk: int) -> list[Document]:
    """The chunk's input; a missing or unreadable one is the chunk's own fault."""
    try:
        data = read(input_key(job_id, chunk))
    except FileNotFoundError as err:
        raise ChunkFault(f"its input is gone ({err})") from None
    try:
        return decode_documents(data)
    except Exception as err:  # noqa: BLE001 - pyarrow raises several kinds for a damaged file
        raise ChunkFault(f"its input is unreadable ({type(err).__name__}: {err})") from None


def translate_rows(job: Job, documents: Sequence[Document], deliveries: Deliveries) -> list[dict[str, Any]]:
    """One row per document: bad input rows as error rows, the others translated."""
    readable = [(d.id, d.text) for d in documents if d.error is None and d.text is not None]
    results = iter(_translate(job, readable, deliveries))
    return [
        _row(DocumentResult(d.id, "", "error", d.error) if d.error is not None else next(results), d.text or "", job)
        for d in documents
    ]


def _translate(job: Job, documents: list[tuple[str, str]], deliveries: Deliveries) -> list[DocumentResult]:
    translator = _translator(job)
    spec_options = job.spec.get("options", {})
    engine = DocumentTranslator(
        translator,
        overlap=spec_options.get("overlap", 1),
        budget=spec_options.get("budget", 64),
        format=spec_options.get("format", "text"),
    )
    options = translator.options(**{k: v for k, v in spec_options.items() if k in DECODING_OPTIONS})
    deaths, poisoned = deliveries.start()
    if deaths >= settings.MAX_DEATHS:
        message = f"gave up after {deaths} deliveries of this chunk died (killed or timed out); see the worker logs"
        return [DocumentResult(doc_id, "", "error", message) for doc_id, _ in documents]
    if deaths == 0:
        try:
            return engine.translate(documents, options)
        except SoftTimeLimitExceeded:
            raise
        except Exception as err:  # noqa: BLE001 - isolate the document that caused it
            log.warning("chunk of job %s failed as a whole (%s); translating document by document", job.id, err)
    return [_isolated(engine, options, doc, deliveries, poisoned) for doc in documents]


def _translator(job: Job) -> Translator:
    """The worker's own artifact (``FANYI_ARTIFACT``) when it is the job's, else the one the spec names."""
    if (
        settings.ARTIFACT
        and _loads(settings.ARTIFACT)
        and translator_for(settings.ARTIFACT).artifact.artifact_id == job.artifact_id
    ):
        return translator_for(settings.ARTIFACT)
    path = job.spec["artifact"]
    try:
        translator = translator_for(path)
    except ArtifactError as err:  # missing, half-copied or altered: this worker cannot see it as it is
        raise EnvironmentFault(str(err), {"kind": "artifact", "target": path}) from None
    if translator.artifact.artifact_id != job.artifact_id:
        raise ChunkFault(
            f"the artifact at {job.spec['artifact']} is now {translator.artifact.artifact_id}, the job was submitted "
            f"for {job.artifact_id} (artifacts are immutable: a new version goes to a new path): submit the job again"
        )
    return translator


def _loads(path: str) -> bool:
    try:
        translator_for(path)
    except ArtifactError:
        return False
    return True


def _isolated(engine, options, document: tuple[str, str], deliveries: Deliveries, poisoned: set[str]):
    doc_id, text = document
    if doc_id in poisoned:
        metrics.ERRORS.labels(kind="poison").inc()
        return DocumentResult(
            doc_id, "", "error", "the engine crashed or timed out on this document twice; it was skipped"
        )
    deliveries.suspect(doc_id)
    try:
        (result,) = engine.translate([document], options)
    except SoftTimeLimitExceeded:
        raise  # the suspect stays recorded: it gets a strike
    except Exception as err:  # noqa: BLE001 - one document's failure is its own error row
        result = DocumentResult(doc_id, "", "error", f"{type(err).__name__}: {err}")
    deliveries.suspect(None)
    return result


def _row(result: DocumentResult, source: str, job: Job) -> dict[str, Any]:
    row = asdict(result)
    row["sentences"] = [
        {"source_start": s.source[0], "source_end": s.source[1], "target_start": s.target[0],
         "target_end": s.target[1], "flags": s.flags}
        for s in result.sentences
    ]  # fmt: skip
    timings = result.timings or {}
    row["timings"] = {k: float(timings.get(k, 0.0)) for k in ("prepare", "translate", "total")}
    return {**row, "job_id": job.id, "source": source, "artifact_id": job.artifact_id}
