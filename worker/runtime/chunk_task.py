"""``ChunkTask``: the fault policy every chunk delivery runs under, around the task's body.

Delivery is at-least-once, so the body is idempotent (``worker.runtime.tasks``). Only three things leave
a delivery: a return (the message is acknowledged: its part exists, or the job is gone, or the message
can never be done, logged and counted), a ``Retry`` (a new message was sent first) or a ``Reject`` with
requeue. Whatever fails while a failure is handled (storage, the cache, the health file, the broker)
leads to a retry, never to an acknowledgement without a part.

What goes wrong is classified once (``worker.runtime.faults``): a transient fault is retried with
Celery's exponential backoff and full jitter, capped at ``FANYI_RETRY_MAX_DELAY``; an environment fault
puts the chunk back for a healthy worker and makes this one stop consuming until it is fixed
(``worker.monitoring.health``), and a chunk put back ``FANYI_MAX_DEATHS`` times becomes error rows; a
fault of the chunk itself writes its documents as error rows with the reason (``write_failed_chunk``),
so the job ends. A delivery past the soft time limit is a death (``worker.runtime.deliveries``).
"""

from __future__ import annotations

import functools
import logging
from typing import Any, NoReturn

from celery import Task
from celery.exceptions import Reject, Retry, SoftTimeLimitExceeded
from celery.utils.time import get_exponential_backoff_interval

from contract import settings
from contract.job import Job, finalize, read_job, write_failed_chunk
from contract.messages import InvalidChunk, chunk_arguments
from contract.storage import open_storage
from worker.monitoring import health, metrics
from worker.monitoring.watchdog import record_ended, record_running
from worker.runtime.deliveries import Deliveries
from worker.runtime.faults import Fault, JobGone, checks_for, classify
from worker.runtime.messages import dropped

log = logging.getLogger(__name__)


class ChunkTask(Task):
    """A chunk task: its body is ``run(output, job_id, chunk, deliveries)``; the message carries
    ``(output, job_id, chunk)``, checked here before anything is read or written (``contract.messages``)."""

    max_retries = None  # a transient fault is retried for as long as it lasts
    typing = False  # the body takes the delivery's record besides the message's arguments

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        try:
            output, job_id, chunk = chunk_arguments(args, kwargs)
        except InvalidChunk as err:
            return self._invalid(err)
        deliveries = Deliveries(job_id, chunk, self.request.hostname or "")
        running = record_running(output, job_id, chunk, deliveries.worker, deliveries.me)
        try:
            return self._deliver(output, job_id, chunk, deliveries)
        except (Retry, Reject):
            raise
        except Exception as err:  # handling the fault failed in turn: the chunk is tried again, never dropped
            deliveries.end()
            metrics.ERRORS.labels(kind="handler").inc()
            log.exception("chunk %s of job %s: handling its fault failed (%s); retrying", chunk, job_id, err)
            self._retry(self._backoff(), f"{type(err).__name__}: {err}")
        finally:
            record_ended(output, job_id, chunk, running)

    def _deliver(self, output: str, job_id: str, chunk: int, deliveries: Deliveries) -> str:
        deliveries.start()
        try:
            with metrics.TASK_SECONDS.time():
                outcome: str = self.run(output, job_id, chunk, deliveries)
        except SoftTimeLimitExceeded:
            metrics.ERRORS.labels(kind="time_limit").inc()
            deliveries.timed_out()  # counts as a death: the document it was on gets a strike
            self._retry(1, "past the soft time limit")
        except Exception as err:  # noqa: BLE001 - every fault is classified (worker.runtime.faults), none escapes
            deliveries.end()
            return self._handle(err, output, job_id, chunk, deliveries)
        deliveries.end()
        return outcome

    def _backoff(self) -> float:
        """Celery's exponential backoff with full jitter, capped at ``FANYI_RETRY_MAX_DELAY``."""
        delay = get_exponential_backoff_interval(
            1, self.request.retries, int(settings.RETRY_MAX_DELAY), full_jitter=True
        )
        return float(delay)

    def _retry(self, countdown: float, why: str) -> NoReturn:
        """Send the chunk again after ``countdown`` s, or, when that cannot be sent (Celery then rejects the
        message without requeue: it would be lost), put this very message back."""
        try:
            raise self.retry(countdown=countdown)
        except Reject as err:
            raise Reject(f"{why}; the retry could not be sent ({err.reason}): chunk put back", requeue=True) from None

    def _handle(self, err: Exception, output: str, job_id: str, chunk: int, deliveries: Deliveries) -> str:
        if isinstance(err, JobGone):
            return self._job_gone(err, job_id, chunk, deliveries)
        if isinstance(err, InvalidChunk):
            return self._invalid(err)
        fault = classify(err)
        metrics.ERRORS.labels(kind=fault.value).inc()
        if fault is Fault.TRANSIENT:
            delay = self._backoff()
            log.warning("chunk %s of job %s: %s; retrying in %.0f s", chunk, job_id, err, delay)
            self._retry(delay, str(err))
        if fault is Fault.ENVIRONMENT:
            self._stop_consuming(err, output)
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

    def _invalid(self, err: InvalidChunk) -> str:
        """A message no worker can ever do: acknowledged, never retried, nothing written."""
        dropped("invalid_chunk", str(err), self._queue())
        return "invalid"

    def _job_gone(self, err: JobGone, job_id: str, chunk: int, deliveries: Deliveries) -> str:
        """Retried with backoff (a storage that answers "not found" by mistake heals); dropped, logged and
        counted after ``FANYI_MAX_DEATHS`` tries: a deleted job has nobody to write a part for."""
        tries = deliveries.count("job_gone")
        if tries < settings.MAX_DEATHS:
            self._retry(self._backoff(), str(err))
        metrics.ERRORS.labels(kind="job_gone").inc()
        log.error("chunk %s of job %s dropped after %s tries: %s", chunk, job_id, tries, err)
        return "job gone"

    def _stop_consuming(self, err: Exception, output: str) -> None:
        """Mark this worker unhealthy and cancel its consumers (waiting for the main process to confirm),
        so the chunk put back goes to a healthy worker. A worker that cannot record its fault (the health
        file's disk is full) keeps consuming: nothing would tell it when to consume again."""
        queue = self._queue() or settings.queue_for("cpu")
        checks = checks_for(err, output)
        try:
            health.mark_unhealthy(f"{type(err).__name__}: {err}", checks, [queue])
        except Exception as failed:  # noqa: BLE001
            log.error("environment fault (%s), and it cannot be recorded in %s (%s)", err, settings.HEALTH_FILE, failed)
            return
        log.error("environment fault (%s): this worker stops taking chunks until %s pass", err, checks)
        try:
            if self.request.hostname:
                self.app.control.cancel_consumer(queue, destination=[self.request.hostname], reply=True, timeout=5)
        except Exception as failed:  # noqa: BLE001 - the chunk still goes back; the next one meets the fault again
            log.error("cannot stop consuming %s: %s", queue, failed)

    def _queue(self) -> str:
        return str((self.request.delivery_info or {}).get("routing_key") or "")


def _fail_chunk(output: str, job_id: str, chunk: int, reason: str) -> None:
    storage = open_storage(output)
    job = job_manifest(output, job_id)
    rows = write_failed_chunk(storage, job, chunk, reason)
    if rows and metrics.record_part(job_id, rows):
        finalize(storage, job)


@functools.lru_cache(maxsize=256)
def job_manifest(output: str, job_id: str) -> Job:
    """A job's manifest, read once per process: it is written once and never changes."""
    return read_job(open_storage(output), job_id)
