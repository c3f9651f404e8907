"""A thread in every worker's main process, started with the worker (before it connects to the broker)
and run once per heartbeat:

* **liveness**: first, before any call to Redis or storage, the time of this pass is written next to
  the health file (``worker.health``: ``python -m worker.health --live``), so a hung worker can be
  restarted and one waiting for Redis is not;
* **heartbeat**: ``fanyi:worker:<hostname>`` in the cache, expiring after three heartbeats, with
  this worker's health;
* **orphans**: a chunk whose delivery is recorded as running on a worker whose heartbeat expired
  (the whole worker was killed: a node drain, an OOM kill of the pod) is enqueued again at once,
  instead of waiting out the broker's visibility timeout (30 minutes by default). A duplicate
  delivery is harmless: parts are created once, and a delivery that is alive is no death
  (``worker.deliveries``);
* **completion**: jobs this worker took chunks of are finalised from storage when all their parts
  exist, so a job ends even when the progress counters in the cache were lost or drifted; a job
  that ended, was cancelled or is gone is forgotten (a chunk of it arriving again brings it back);
* **health**: an unhealthy worker reruns the checks that show its faults fixed, and consumes again
  once every one passes (``worker.health``).

Each entry of each duty is handled on its own: one bad record or job never stalls the others.
"""

from __future__ import annotations

import importlib
import json
import logging
import threading
import time
from typing import Any

from contract import settings
from contract.cache import REQUEUE_LOCK, RUNNING_KEY, WORKER_KEY, cache
from contract.job import TRANSLATE_CHUNK
from worker import health

log = logging.getLogger(__name__)
# KEYS[1] a hash, ARGV[1] a field, ARGV[2] the value read: deletes the field only if it still holds that value
# What the duties import on first use, imported in the main thread before the watchdog starts: a pool
# process forked (at start, or to replace one that died) while this thread is inside an import inherits
# that module's import lock, held by a thread it does not have, and hangs at its first import of it.
PRELOAD = (
    "boto3", "boto3.s3.transfer", "botocore.config", "botocore.exceptions", "pyarrow", "pyarrow.parquet",
    "contract.job", "contract.storage", "worker.artifact", "worker.faults",
)  # fmt: skip
_DELETE_IF = """
if redis.call('hget', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('hdel', KEYS[1], ARGV[1]) end
return 0
"""


def chunk_field(output: str, job_id: str, chunk: int) -> str:
    return f"{output}|{job_id}|{chunk}"


def record_running(output: str, job_id: str, chunk: int, hostname: str) -> str:
    """Record a delivery as under way; the record, for ``record_ended``."""

    record = json.dumps({"worker": hostname, "since": time.time()})
    try:
        cache().hset(RUNNING_KEY, chunk_field(output, job_id, chunk), record)
    except Exception as err:  # noqa: BLE001 - a cache: the visibility timeout is the slow backstop
        log.warning("cannot record the running chunk (%s)", err)
    return record


def record_ended(output: str, job_id: str, chunk: int, record: str) -> None:
    """Clear this delivery's record, not one another delivery of the chunk wrote since."""

    try:
        cache().eval(_DELETE_IF, 1, RUNNING_KEY, chunk_field(output, job_id, chunk), record)
    except Exception as err:  # noqa: BLE001
        log.warning("cannot clear the running chunk (%s)", err)


class Watchdog(threading.Thread):
    def __init__(self, app: Any, hostname: str, queues: list[str], interval: float = settings.HEARTBEAT):
        super().__init__(name="fanyi-watchdog", daemon=True)
        self.app, self.hostname, self.queues, self.interval = app, hostname, queues, interval
        self.jobs: dict[tuple[str, str], float] = {}  # (output, job id) -> when it was last checked
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.started = time.time()

    def saw(self, output: str, job_id: str) -> None:
        """A chunk of this job reached this worker: watch the job until it ends."""
        with self.lock:
            self.jobs.setdefault((output, job_id), 0.0)

    def start(self) -> None:
        for name in PRELOAD:
            importlib.import_module(name)
        super().start()

    def run(self) -> None:
        while True:
            for duty in (self.beat, self.requeue_orphans, self.finalize_jobs, self.recover):
                self.live()  # before each duty: a slow Redis or storage delays a beat by one call at most
                try:
                    duty()
                except Exception as err:  # noqa: BLE001 - a watchdog that dies watches nothing
                    log.warning("watchdog: %s failed: %s", duty.__name__, err)
            if self.stopped.wait(self.interval):
                return

    def live(self) -> None:
        try:
            health.record_beat(self.started, self.interval)
        except Exception as err:  # noqa: BLE001 - a full disk: the liveness probe will say so
            log.warning("watchdog: cannot record its beat: %s", err)

    def beat(self) -> None:

        cache().set(WORKER_KEY.format(hostname=self.hostname), json.dumps(health.state()), ex=int(3 * self.interval))

    def requeue_orphans(self) -> None:

        redis = cache()
        for field, raw in redis.hgetall(RUNNING_KEY).items():
            try:
                self._requeue(redis, field.decode(), raw)
            except Exception as err:  # noqa: BLE001 - the next record is not held up by this one
                log.warning("watchdog: running record %r: %s", field, err)

    def _requeue(self, redis: Any, name: str, raw: bytes) -> None:
        try:
            record = json.loads(raw)
            worker, since = str(record["worker"]), float(record["since"])
            output, job_id, chunk = name.rsplit("|", 2)
            number = int(chunk)
        except (ValueError, KeyError, TypeError) as err:
            redis.eval(_DELETE_IF, 1, RUNNING_KEY, name, raw)
            log.warning("watchdog: dropped the unreadable running record %r (%s)", name, err)
            return
        if time.time() - since < 3 * self.interval or redis.exists(WORKER_KEY.format(hostname=worker)):
            return
        lock = REQUEUE_LOCK.format(chunk=name)
        if not redis.set(lock, self.hostname, nx=True, ex=int(10 * self.interval)):
            return
        try:
            self._enqueue(output, job_id, number)
        except FileNotFoundError as err:  # the job is gone: nothing to requeue
            log.warning("chunk %s of job %s was on %s, which stopped; not enqueued: %s", chunk, job_id, worker, err)
        except Exception:
            redis.delete(lock)  # tried again at the next pass
            raise
        else:
            log.warning("chunk %s of job %s was on %s, which stopped: enqueued again", chunk, job_id, worker)
        redis.eval(_DELETE_IF, 1, RUNNING_KEY, name, raw)  # the record read, not one its new delivery wrote

    def _enqueue(self, output: str, job_id: str, chunk: int) -> None:
        from contract.job import read_job
        from contract.storage import open_storage

        job = read_job(open_storage(output), job_id)
        with self.app.connection_for_write(settings.BROKER_URL) as connection:
            self.app.send_task(TRANSLATE_CHUNK, **job.chunk_message(output, chunk), connection=connection)

    def finalize_jobs(self) -> None:
        """Jobs whose chunks passed through here, checked against storage once a minute until they end."""
        now = time.time()
        with self.lock:
            due = [key for key, checked in self.jobs.items() if now - checked >= max(60.0, self.interval)]
        for output, job_id in due:
            try:
                done = self._finalize(output, job_id)
            except Exception as err:  # noqa: BLE001 - checked again next time; the others are not held up
                log.warning("watchdog: job %s under %s: %s", job_id, output, err)
                done = False
            with self.lock:
                if done:
                    self.jobs.pop((output, job_id), None)
                elif (output, job_id) in self.jobs:
                    self.jobs[(output, job_id)] = now

    @staticmethod
    def _finalize(output: str, job_id: str) -> bool:
        """Whether the job needs no more watching: it ended, is cancelled or is gone."""
        from contract.job import finalize, read_job
        from contract.storage import open_storage

        storage = open_storage(output)
        try:
            job = read_job(storage, job_id)
        except FileNotFoundError:
            return True
        return finalize(storage, job) is not None or storage.exists(job.key("_CANCELLED"))

    def recover(self) -> None:
        fixed = health.fixed()
        if fixed is None:
            return
        queues = fixed.get("queues") or self.queues
        for queue in queues:
            self.app.control.add_consumer(queue, destination=[self.hostname], reply=True, timeout=5)
        health.clear(fixed)
        log.warning("healthy again (%s fixed): consuming %s", fixed.get("reason"), ", ".join(queues))
