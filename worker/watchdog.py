"""A thread in every worker's main process, once per heartbeat:

* **heartbeat**: ``fanyi:worker:<hostname>`` in the cache, expiring after three heartbeats, with
  this worker's health;
* **orphans**: a chunk whose delivery is recorded as running on a worker whose heartbeat expired
  (the whole worker was killed: a node drain, an OOM kill of the pod) is enqueued again at once,
  instead of waiting out the broker's visibility timeout (30 minutes by default). A duplicate
  delivery is harmless: parts are created once;
* **completion**: jobs this worker took chunks of are finalised from storage when all their parts
  exist, so a job ends even when the progress counters in the cache were lost or drifted;
* **health**: an unhealthy worker reruns the check that shows its fault fixed, and consumes again
  once it passes (``worker.health``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from worker import health, settings

log = logging.getLogger(__name__)
RUNNING_KEY = "fanyi:running"  # hash: "<output>|<job>|<chunk>" -> {"worker", "since"} of deliveries under way
WORKER_KEY = "fanyi:worker:{hostname}"  # this worker's heartbeat: its health, expiring after 3 heartbeats
REQUEUE_LOCK = "fanyi:requeue:{chunk}"  # one watchdog requeues an orphan, not every one that sees it


def chunk_field(output: str, job_id: str, chunk: int) -> str:
    return f"{output}|{job_id}|{chunk}"


def record_running(output: str, job_id: str, chunk: int, hostname: str) -> None:
    from worker.metrics import cache

    try:
        record = json.dumps({"worker": hostname, "since": time.time()})
        cache().hset(RUNNING_KEY, chunk_field(output, job_id, chunk), record)
    except Exception as err:  # noqa: BLE001 - a cache: the visibility timeout is the slow backstop
        log.warning("cannot record the running chunk (%s)", err)


def record_ended(output: str, job_id: str, chunk: int) -> None:
    from worker.metrics import cache

    try:
        cache().hdel(RUNNING_KEY, chunk_field(output, job_id, chunk))
    except Exception as err:  # noqa: BLE001
        log.warning("cannot clear the running chunk (%s)", err)


class Watchdog(threading.Thread):
    def __init__(self, app: Any, hostname: str, queues: list[str], interval: float = settings.HEARTBEAT):
        super().__init__(name="fanyi-watchdog", daemon=True)
        self.app, self.hostname, self.queues, self.interval = app, hostname, queues, interval
        self.jobs: dict[tuple[str, str], float] = {}  # (output, job id) -> when it was last checked
        self.lock = threading.Lock()
        self.stopped = threading.Event()

    def saw(self, output: str, job_id: str) -> None:
        """A chunk of this job reached this worker: watch the job until it ends."""
        with self.lock:
            self.jobs.setdefault((output, job_id), 0.0)

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            for duty in (self.beat, self.requeue_orphans, self.finalize_jobs, self.recover):
                try:
                    duty()
                except Exception as err:  # noqa: BLE001 - a watchdog that dies watches nothing
                    log.warning("watchdog: %s failed: %s", duty.__name__, err)

    def beat(self) -> None:
        from worker.metrics import cache

        cache().set(WORKER_KEY.format(hostname=self.hostname), json.dumps(health.state()), ex=int(3 * self.interval))

    def requeue_orphans(self) -> None:
        from worker.metrics import cache

        redis = cache()
        for field, raw in redis.hgetall(RUNNING_KEY).items():
            record = json.loads(raw)
            if time.time() - record["since"] < 3 * self.interval or redis.exists(
                WORKER_KEY.format(hostname=record["worker"])
            ):
                continue
            name = field.decode()
            if not redis.set(REQUEUE_LOCK.format(chunk=name), self.hostname, nx=True, ex=int(10 * self.interval)):
                continue
            output, job_id, chunk = name.rsplit("|", 2)
            self._enqueue(output, job_id, int(chunk))
            redis.hdel(RUNNING_KEY, field)
            log.warning("chunk %s of job %s was on %s, which stopped: enqueued again", chunk, job_id, record["worker"])

    def _enqueue(self, output: str, job_id: str, chunk: int) -> None:
        from worker.job import read_job
        from worker.storage import open_storage

        job = read_job(open_storage(output), job_id)
        with self.app.connection_for_write(settings.BROKER_URL) as connection:
            self.app.send_task(
                "fanyi.translate_chunk", args=[output, job_id, chunk], queue=job.queue,
                priority=job.spec.get("priority", 5), connection=connection,
            )  # fmt: skip

    def finalize_jobs(self) -> None:
        """Jobs whose chunks passed through here, checked against storage once a minute until they end."""
        from worker.job import finalize, read_job
        from worker.storage import open_storage

        now = time.time()
        with self.lock:
            due = [key for key, checked in self.jobs.items() if now - checked >= max(60.0, self.interval)]
        for output, job_id in due:
            storage = open_storage(output)
            ended = finalize(storage, read_job(storage, job_id)) is not None
            with self.lock:
                if ended:
                    self.jobs.pop((output, job_id), None)
                else:
                    self.jobs[(output, job_id)] = now

    def recover(self) -> None:
        current = health.state()
        if current.get("healthy", True) or not health.passes(current.get("check", {})):
            return
        health.mark_healthy()
        for queue in current.get("queues", []) or self.queues:
            self.app.control.add_consumer(queue, destination=[self.hostname], reply=True, timeout=5)
        log.warning("healthy again (%s fixed): consuming %s", current.get("reason"), ", ".join(self.queues))
