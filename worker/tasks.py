"""The chunk task: read a chunk's documents, translate them, write their part once.

Delivery is at-least-once, so the task is idempotent: the part's key is fixed by (job, chunk), it is
created only if absent (a duplicate or redelivered chunk finds it and stops, or loses the race and
discards its copy), and metrics and progress count only the delivery that created it.

Every chunk ends in a part. What goes wrong is classified once (``worker.faults``): a transient fault
is retried with Celery's exponential backoff and full jitter, capped at ``FANYI_RETRY_MAX_DELAY``; an
environment fault puts the chunk back for a healthy worker and makes this one stop consuming until it
is fixed (``worker.health``), and a chunk put back ``FANYI_MAX_DEATHS`` times becomes error rows; a
fault of the chunk itself writes its documents as error rows with the reason (``write_failed_chunk``),
so the job ends. A failure while a fault is handled (storage, the cache, the health file, the broker)
retries the chunk: no message is acknowledged without its part (``translate_chunk``).

Poison documents: a chunk is first translated in one engine call. After a delivery of it died
(``worker.deliveries``), the next ones translate document by document, recording which document they
are on; a document that was in progress in two deliveries that died alone (their worker still
beating) is written as an error row. After
``FANYI_MAX_DEATHS`` deaths the remaining documents become error rows rather than loop forever.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, NoReturn

from celery.exceptions import Reject, Retry, SoftTimeLimitExceeded
from celery.utils.time import get_exponential_backoff_interval

from contract import settings
from contract.job import (
    TRANSLATE_CHUNK,
    Document,
    Job,
    compacted_chunks,
    decode_documents,
    encode_rows,
    finalize,
    input_key,
    part_key,
    read_job,
    read_own,
    write_failed_chunk,
)
from contract.storage import Storage, open_storage
from worker import fleet, health, metrics
from worker.app import app
from worker.artifact import ArtifactChanged, ArtifactError
from worker.deliveries import Deliveries
from worker.documents import DEFAULT_BUDGET, DocumentResult, DocumentTranslator
from worker.engine.search import DecodingOptions
from worker.engine.translator import Translator
from worker.faults import ChunkFault, EnvironmentFault, Fault, classify
from worker.memory import Memory, forget_job_memory, job_memory
from worker.messages import InvalidChunk, chunk_arguments, dropped
from worker.watchdog import record_ended, record_running

log = logging.getLogger(__name__)
DECODING_OPTIONS = ("beam_size", "max_new_tokens", "source_language", "target_language", "source_prefix")


_TRANSLATORS: dict[str, Translator] = {}


def translator_for(artifact: str) -> Translator:
    """One Translator per artifact per process, made after fork and reused by every task; made (and
    verified) again once the artifact's files changed under it."""
    translator = _TRANSLATORS.get(artifact)
    if translator is not None:
        try:
            translator.artifact.check_unchanged()
            return translator
        except ArtifactChanged:
            del _TRANSLATORS[artifact]
    translator = Translator(
        artifact, device=settings.DEVICE, precision=settings.PRECISION, threads=settings.THREADS,
        sessions=settings.SESSIONS,
    )  # fmt: skip
    translator.on_batch = lambda batch: metrics.BATCH_FILL.observe(batch.cost / translator.max_tokens)
    _TRANSLATORS[artifact] = translator
    return translator


class JobGone(Exception):
    """The job's manifest is not in storage: the job was deleted (or the output prefix is wrong)."""


@app.task(name=TRANSLATE_CHUNK, bind=True, max_retries=None)
def translate_chunk(self: Any, *args: Any, **kwargs: Any) -> str:
    """Translate chunk ``chunk`` of job ``job_id`` under ``output`` (the message's arguments).

    Only three things leave here: a return (the message is acknowledged: its part exists, or the job
    is gone, or the message can never be done, logged and counted), a ``Retry`` (a new message was
    sent first) or a ``Reject`` with requeue. Whatever fails while a failure is handled (storage, the
    cache, the health file, the broker) leads to a retry, never to an acknowledgement without a part."""
    try:  # any arguments reach here: checked before anything is read or written (worker.messages)
        output, job_id, chunk = chunk_arguments(args, kwargs)
    except InvalidChunk as err:
        return _invalid(self, err)
    hostname = self.request.hostname or ""
    deliveries = Deliveries(job_id, chunk, hostname)
    running = record_running(output, job_id, chunk, hostname, deliveries.me)
    try:
        deliveries.start()
        try:
            with metrics.TASK_SECONDS.time():
                outcome = run_chunk(output, job_id, chunk, deliveries)
        except SoftTimeLimitExceeded:
            metrics.ERRORS.labels(kind="time_limit").inc()
            deliveries.timed_out()  # counts as a death: the document it was on gets a strike
            _retry(self, 1, "past the soft time limit")
        except Exception as err:  # noqa: BLE001 - every fault is classified (worker.faults), none escapes
            deliveries.end()
            return _handle(self, err, output, job_id, chunk, deliveries)
        deliveries.end()
        return outcome
    except (Retry, Reject):
        raise
    except Exception as err:  # handling the fault failed in turn: the chunk is tried again, never dropped
        deliveries.end()
        metrics.ERRORS.labels(kind="handler").inc()
        log.exception("chunk %s of job %s: handling its fault failed (%s); retrying", chunk, job_id, err)
        _retry(self, _backoff(self), f"{type(err).__name__}: {err}")
    finally:
        record_ended(output, job_id, chunk, running)


def _backoff(task: Any) -> float:
    """Celery's exponential backoff with full jitter, capped at ``FANYI_RETRY_MAX_DELAY``."""
    return get_exponential_backoff_interval(1, task.request.retries, int(settings.RETRY_MAX_DELAY), full_jitter=True)


def _retry(task: Any, countdown: float, why: str) -> NoReturn:
    """Send the chunk again after ``countdown`` s, or, when that cannot be sent (Celery then rejects the
    message without requeue: it would be lost), put this very message back."""
    try:
        raise task.retry(countdown=countdown)
    except Reject as err:
        raise Reject(f"{why}; the retry could not be sent ({err.reason}): chunk put back", requeue=True) from None


def _handle(task: Any, err: Exception, output: str, job_id: str, chunk: int, deliveries: Deliveries) -> str:
    if isinstance(err, JobGone):
        return _job_gone(task, err, job_id, chunk, deliveries)
    if isinstance(err, InvalidChunk):
        return _invalid(task, err)
    fault = classify(err)
    metrics.ERRORS.labels(kind=fault.value).inc()
    if fault is Fault.TRANSIENT:
        delay = _backoff(task)
        log.warning("chunk %s of job %s: %s; retrying in %.0f s", chunk, job_id, err, delay)
        _retry(task, delay, str(err))
    if fault is Fault.ENVIRONMENT:
        _stop_consuming(task, err, output)
        put_back = deliveries.count("put_back")
        if put_back < settings.MAX_DEATHS:
            raise Reject(f"environment fault, chunk put back: {err}", requeue=True) from None
        reason = (
            f"chunk {chunk} could not be translated: {put_back} deliveries each met an environment fault "
            f"(last: {type(err).__name__}: {err}); see the workers' health (`python -m worker.health`)"
        )
    else:
        reason = f"chunk {chunk} could not be translated: {err}"
    log.error("chunk %s of job %s cannot be done: %s", chunk, job_id, reason)
    _fail_chunk(output, job_id, chunk, reason)
    return "failed"


def _invalid(task: Any, err: InvalidChunk) -> str:
    """A message no worker can ever do: acknowledged, never retried, nothing written."""
    dropped("invalid_chunk", str(err), (task.request.delivery_info or {}).get("routing_key") or "")
    return "invalid"


def _job_gone(task: Any, err: JobGone, job_id: str, chunk: int, deliveries: Deliveries) -> str:
    """Retried with backoff (a storage that answers "not found" by mistake heals); dropped, logged and
    counted after ``FANYI_MAX_DEATHS`` tries: a deleted job has nobody to write a part for."""
    tries = deliveries.count("job_gone")
    if tries < settings.MAX_DEATHS:
        _retry(task, _backoff(task), str(err))
    metrics.ERRORS.labels(kind="job_gone").inc()
    log.error("chunk %s of job %s dropped after %s tries: %s", chunk, job_id, tries, err)
    return "job gone"


def _stop_consuming(task: Any, err: Exception, output: str) -> None:
    """Mark this worker unhealthy and cancel its consumers (waiting for the main process to confirm),
    so the chunk put back goes to a healthy worker. A worker that cannot record its fault (the health
    file's disk is full) keeps consuming: nothing would tell it when to consume again."""
    queue = (task.request.delivery_info or {}).get("routing_key") or "translate.cpu"
    checks = health.check_for(err, output)
    try:
        health.mark_unhealthy(f"{type(err).__name__}: {err}", checks, [queue])
    except Exception as failed:  # noqa: BLE001
        log.error("environment fault (%s), and it cannot be recorded in %s (%s)", err, settings.HEALTH_FILE, failed)
        return
    log.error("environment fault (%s): this worker stops taking chunks until %s pass", err, checks)
    hostname = task.request.hostname
    try:
        if hostname:
            task.app.control.cancel_consumer(queue, destination=[hostname], reply=True, timeout=5)
    except Exception as failed:  # noqa: BLE001 - the chunk still goes back; the next one meets the fault again
        log.error("cannot stop consuming %s: %s", queue, failed)


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
    documents = _documents(storage, job_id, chunk)
    memory = job_memory(output, job_id, job.spec)
    rows = translate_rows(job, documents, deliveries, memory)
    if not storage.create(key, encode_rows(rows)):
        return "duplicate"  # another delivery wrote this part first; its content stands
    if metrics.record_part(job_id, rows) and finalize(storage, job) is not None:  # storage decides
        forget_job_memory(output, job_id, job.spec)
    return "written"


def _documents(storage: Storage, job_id: str, chunk: int) -> list[Document]:
    """The chunk's input; a missing or unreadable one is the chunk's own fault."""
    try:
        data = read_own(storage, input_key(job_id, chunk))
    except FileNotFoundError as err:
        raise ChunkFault(f"its input is gone ({err})") from None
    try:
        return decode_documents(data)
    except Exception as err:  # noqa: BLE001 - pyarrow raises several kinds for a damaged file
        raise ChunkFault(f"its input is unreadable ({type(err).__name__}: {err})") from None


def translate_rows(
    job: Job, documents: Sequence[Document], deliveries: Deliveries, memory: Memory | None = None
) -> list[dict[str, Any]]:
    """One row per document: bad input rows as error rows, the others translated."""
    readable = [(d.id, d.text) for d in documents if d.error is None and d.text is not None]
    results = iter(_translate(job, readable, deliveries, memory))
    return [
        _row(DocumentResult(d.id, "", "error", d.error) if d.error is not None else next(results), d.text or "", job)
        for d in documents
    ]


def _translate(
    job: Job, documents: list[tuple[str, str]], deliveries: Deliveries, memory: Memory | None
) -> list[DocumentResult]:
    translator = _translator(job, deliveries.worker)
    spec_options = job.spec.get("options", {})
    engine = DocumentTranslator(
        translator,
        overlap=spec_options.get("overlap", 1),
        budget=spec_options.get("budget", DEFAULT_BUDGET),
        format=spec_options.get("format", "text"),
        memory=memory,
    )
    options = translator.options(**{k: v for k, v in spec_options.items() if k in DECODING_OPTIONS})
    deaths, poisoned = deliveries.deaths, deliveries.poisoned
    if deaths >= settings.MAX_DEATHS:
        message = f"gave up after {deaths} deliveries of this chunk died (killed or timed out); see the worker logs"
        return [DocumentResult(doc_id, "", "error", message) for doc_id, _ in documents]
    if deaths == 0:
        try:
            return engine.translate(documents, options)
        except (SoftTimeLimitExceeded, ArtifactChanged):  # no document's fault
            raise
        except Exception as err:  # noqa: BLE001 - isolate the document that caused it
            log.warning("chunk of job %s failed as a whole (%s); translating document by document", job.id, err)
    return [_isolated(engine, options, doc, deliveries, poisoned) for doc in documents]


def own_translator(*, sessions: bool = True) -> Translator | None:
    """The worker's own engine (``FANYI_ARTIFACT``, None without one), with its sessions made unless
    ``sessions`` is False (the main process checks it without ONNX Runtime sessions before any fork).

    The one check of the worker's own artifact (at start, in each process after fork, for every
    chunk): whatever keeps it from being built (files missing or altered, the tokenizer, ONNX Runtime,
    CUDA) is an ``EnvironmentFault`` of this worker, never a chunk's; its health check loads the
    artifact again, or for any other failure builds the whole engine in a new process."""
    if not settings.ARTIFACT:
        return None
    try:
        translator = translator_for(settings.ARTIFACT)
        if sessions:
            with translator.pool.acquire():
                pass
    except SoftTimeLimitExceeded:
        raise
    except Exception as err:  # noqa: BLE001 - one exception set: anything is this worker's fault
        check = {"kind": "artifact" if isinstance(err, ArtifactError) else "engine", "target": settings.ARTIFACT}
        raise EnvironmentFault(
            f"this worker's own artifact {settings.ARTIFACT} cannot be used: {type(err).__name__}: {err}", check
        ) from None
    return translator


def _translator(job: Job, worker: str) -> Translator:
    """The worker's own engine when it is the job's artifact, else the one the spec names.

    A job's artifact that this worker cannot load (missing, half-copied, altered) while another worker
    of its queue may is this worker's fault, as its own artifact is (``own_translator``): the chunk
    goes back and this worker stops consuming until it can load it. Only an artifact that no live
    worker of the queue can load (``worker.fleet``), or whose content is no longer the one the job was
    submitted for, is the job's: its chunks end as error rows with the reason."""
    own = own_translator()
    if own is not None and own.artifact.artifact_id == job.artifact_id:
        return own
    path, queue = job.spec["artifact"], job.queue
    try:
        translator = translator_for(path)
    except ArtifactError as err:
        if fleet.nobody_can_load(path, queue, worker):
            raise ChunkFault(f"no worker of {queue} can load its artifact: {err}") from None
        check = {"kind": "job_artifact", "target": path, "queue": queue, "worker": worker}
        raise EnvironmentFault(f"this worker cannot load the job's artifact: {err}", check) from None
    fleet.can_load(path, worker)
    if translator.artifact.artifact_id != job.artifact_id:
        raise ChunkFault(
            f"the artifact at {job.spec['artifact']} is now {translator.artifact.artifact_id}, the job was submitted "
            f"for {job.artifact_id} (artifacts are immutable: a new version goes to a new path): submit the job again"
        )
    return translator


def _isolated(
    engine: DocumentTranslator,
    options: DecodingOptions,
    document: tuple[str, str],
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
        (result,) = engine.translate([document], options)
    except SoftTimeLimitExceeded:
        raise  # the suspect stays recorded: it gets a strike
    except ArtifactChanged:
        deliveries.suspect(None)  # no document's fault: the chunk is retried, no document struck
        raise
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
