"""The chunk task: read a chunk's documents, translate them, write their part once.

Delivery is at-least-once, so the task is idempotent: the part's key is fixed by (job, chunk), it is
created only if absent (a duplicate or redelivered chunk finds it and stops, or loses the race and
discards its copy), and metrics and progress count only the delivery that created it.

Poison documents: a chunk is first translated in one engine call. If a delivery dies (the process
crashed or hit its time limit), the next one translates document by document, recording in Redis
which document it is on; a delivery that finds such a record knows that document killed its
predecessor and writes it as an error row. So a poison document costs two extra deliveries and
never sinks its chunk; after ``FANYI_MAX_ATTEMPTS`` deliveries the remaining documents become error
rows rather than loop forever.
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from worker import metrics, settings
from worker.app import app
from worker.documents import DocumentResult, DocumentTranslator
from worker.engine.translator import Translator
from worker.job import Document, Job, decode_documents, encode_rows, finalize, input_key, part_key, read_job
from worker.storage import StorageError, open_storage

log = logging.getLogger(__name__)
DECODING_OPTIONS = ("beam_size", "max_new_tokens", "source_language", "target_language", "source_prefix")
ATTEMPTS_TTL = 7 * 24 * 3600  # seconds the delivery record of a chunk is kept in Redis


@functools.cache
def translator_for(artifact: str) -> Translator:
    """One Translator per artifact per process, made after fork and reused by every task."""
    translator = Translator(
        artifact, device=settings.DEVICE, precision=settings.PRECISION, threads=settings.THREADS,
        sessions=settings.SESSIONS,
    )  # fmt: skip
    translator.on_batch = lambda batch: metrics.BATCH_FILL.observe(batch.cost / translator.max_tokens)
    return translator


def _transient(err: BaseException) -> bool:
    """Storage and broker hiccups are worth retrying; bad input and missing jobs are not."""
    from botocore.exceptions import BotoCoreError, ClientError
    from redis.exceptions import ConnectionError as RedisConnectionError

    if isinstance(err, ClientError):
        return int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 500)) >= 500
    return isinstance(err, BotoCoreError | RedisConnectionError | ConnectionError | TimeoutError)


@app.task(name="fanyi.translate_chunk", bind=True, max_retries=None)
def translate_chunk(self: Any, output: str, job_id: str, chunk: int) -> str:
    try:
        with metrics.TASK_SECONDS.time():
            return run_chunk(output, job_id, chunk)
    except SoftTimeLimitExceeded:
        metrics.ERRORS.labels(kind="time_limit").inc()
        raise self.retry(countdown=1) from None  # the next delivery skips the document it was stuck on
    except Exception as err:
        if not _transient(err):
            metrics.ERRORS.labels(kind="chunk_failed").inc()
            log.error("chunk %s of job %s failed: %s", chunk, job_id, err)
            raise
        metrics.ERRORS.labels(kind="transient").inc()
        delay = min(60.0, 2.0 ** min(self.request.retries, 6)) * random.uniform(0.5, 1.0)
        raise self.retry(exc=err, countdown=delay) from None


@functools.lru_cache(maxsize=256)
def _job(output: str, job_id: str) -> Job:
    """A job's manifest, read once per process: it is written once and never changes."""
    return read_job(open_storage(output), job_id)


def run_chunk(output: str, job_id: str, chunk: int) -> str:
    storage = open_storage(output)
    job = _job(output, job_id)
    if not 0 <= chunk < len(job.chunks):
        raise StorageError(f"job {job_id} has {len(job.chunks)} chunks, not a chunk {chunk}")
    key = part_key(job_id, chunk)
    if storage.exists(key):
        finalize(storage, job)
        return "exists"
    if storage.exists(job.key("_CANCELLED")):
        return "cancelled"
    documents = decode_documents(storage.read(input_key(job_id, chunk)))
    rows = translate_rows(job, documents, Deliveries(job_id, chunk))
    if not storage.create(key, encode_rows(rows)):
        return "duplicate"  # another delivery wrote this part first; its content stands
    if metrics.record_part(job_id, rows):  # the last part, or the cache cannot tell: storage decides
        finalize(storage, job)
    return "written"


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
    attempt, poisoned = deliveries.start()
    if attempt > settings.MAX_ATTEMPTS:
        message = f"gave up after {attempt - 1} deliveries of this chunk died; see the worker logs"
        return [DocumentResult(doc_id, "", "error", message) for doc_id, _ in documents]
    if attempt == 1:
        try:
            return engine.translate(documents, options)
        except SoftTimeLimitExceeded:
            raise
        except Exception as err:  # noqa: BLE001 - isolate the document that caused it
            log.warning("chunk of job %s failed as a whole (%s); translating document by document", job.id, err)
    return [_isolated(engine, options, doc, deliveries, poisoned) for doc in documents]


def _translator(job: Job) -> Translator:
    """The worker's own artifact (``FANYI_ARTIFACT``) when it is the job's, else the one the spec names."""
    if settings.ARTIFACT and translator_for(settings.ARTIFACT).artifact.artifact_id == job.artifact_id:
        return translator_for(settings.ARTIFACT)
    translator = translator_for(job.spec["artifact"])
    if translator.artifact.artifact_id != job.artifact_id:
        raise StorageError(
            f"artifact at {job.spec['artifact']} is {translator.artifact.artifact_id}, the job was submitted "
            f"for {job.artifact_id}: submit the job again for the new artifact"
        )
    return translator


def _isolated(engine, options, document: tuple[str, str], deliveries: Deliveries, poisoned: set[str]):
    doc_id, text = document
    if doc_id in poisoned:
        metrics.ERRORS.labels(kind="poison").inc()
        return DocumentResult(doc_id, "", "error", "the engine crashed or timed out on this document; it was skipped")
    deliveries.suspect(doc_id)
    try:
        (result,) = engine.translate([document], options)
    except SoftTimeLimitExceeded:
        raise  # the suspect stays recorded: the next delivery skips this document
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
    return {**row, "source": source, "artifact_id": job.artifact_id}


class Deliveries:
    """How many times a chunk was delivered, and the document a dead delivery was working on (Redis).

    Losing this record loses nothing: the chunk is simply treated as delivered for the first time."""

    def __init__(self, job_id: str, chunk: int):
        self.key = f"fanyi:chunk:{job_id}:{chunk}"

    def start(self) -> tuple[int, set[str]]:
        try:
            cache = metrics.cache()
            attempt = int(cache.hincrby(self.key, "attempts", 1))
            suspect = cache.hget(self.key, "suspect")
            if suspect:
                cache.sadd(self.key + ":poisoned", suspect)
                cache.hdel(self.key, "suspect")
            cache.expire(self.key, ATTEMPTS_TTL)
            cache.expire(self.key + ":poisoned", ATTEMPTS_TTL)
            return attempt, {p.decode() for p in cache.smembers(self.key + ":poisoned")}
        except Exception as err:  # noqa: BLE001 - the cache is a convenience
            log.warning("delivery record unavailable (%s): translating the chunk as a first delivery", err)
            return 1, set()

    def suspect(self, doc_id: str | None) -> None:
        try:
            if doc_id is None:
                metrics.cache().hdel(self.key, "suspect")
            else:
                metrics.cache().hset(self.key, "suspect", doc_id)
        except Exception as err:  # noqa: BLE001
            log.warning("delivery record unavailable: %s", err)
