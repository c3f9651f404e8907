"""A thread in every worker's main process, started with the worker (before it connects to the broker)
and run once per heartbeat:

* **liveness**: first, before any call to Redis or storage, the time of this pass is written next to
  the health file (``worker.monitoring.health``: ``python -m worker.health --live``), so a hung worker can be
  restarted and one waiting for Redis is not;
* **heartbeat**: ``fanyi:worker:<hostname>`` in the cache, expiring after three heartbeats, with
  this worker's health and the queues it serves (``worker.monitoring.fleet``);
* **stale deliveries**: a chunk delivered three heartbeats ago and not acknowledged that no live
  worker holds is put back in its queue, the very message (kombu's ``restore_by_tag``), instead of
  after the broker's visibility timeout (30 minutes by default). Each worker records the messages it
  receives with its *instance* (``worker.monitoring.fleet``); a message is held while that instance beats, so a
  worker killed as a whole, or restarted under the same name as a container restarted in its pod
  is, holds nothing, while a live worker's messages stay (waiting for a free process, for a retry's
  countdown, or running). A pool process that dies alone is Celery's to requeue;
* **a broker that lost its queues** (restarted without persistence, or from an older snapshot,
  FLUSHALL): a mark this watchdog reads every heartbeat (``fanyi:broker`` and the server's run id)
  changed. Storage is the system of record: each job this worker knows (it took chunks of it, or the
  cache's registry lists it as unfinished) gets every chunk that has no part and no message queued
  or delivered enqueued again, by one watchdog per job;
* **completion**: jobs this worker took chunks of (and, every five minutes, the unfinished ones the
  cache's registry lists) are finalised from storage when all their parts exist, so a job ends even
  when the progress counters in the cache were lost or drifted; a job that wrote no part for a minute
  gets its chunks that have neither a part nor a message enqueued again (kombu loses a message whose
  worker is killed between taking it off the queue and recording it as delivered); a job that
  ended, was cancelled or is gone is forgotten (a chunk of it arriving again brings it back);
* **health**: an unhealthy worker reruns the checks that show its faults fixed, and consumes again
  once every one passes (``worker.monitoring.health``).

Each entry of each duty is handled on its own: one bad record or job never stalls the others.
"""

from __future__ import annotations

import base64
import importlib
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from contract import settings
from contract.cache import (
    BROKER_MARK_KEY,
    HELD_KEY,
    LEASE_KEY,
    REENQUEUE_LOCK,
    RESTORE_LOCK,
    RUNNING_KEY,
    UNACKED_INDEX_KEY,
    UNACKED_KEY,
    best_effort,
    broker,
    cache,
    unfinished_jobs,
)
from contract.job import TRANSLATE_CHUNK
from contract.messages import InvalidChunk, chunk_arguments
from worker.monitoring import fleet, health, metrics

log = logging.getLogger(__name__)
ADOPT_EVERY = 300.0  # seconds between a watchdog's looks at the registry's unfinished jobs
# What the duties import on first use, imported in the main thread before the watchdog starts: a pool
# process forked (at start, or to replace one that died) while this thread is inside an import inherits
# that module's import lock, held by a thread it does not have, and hangs at its first import of it.
PRELOAD = (
    "boto3", "boto3.s3.transfer", "botocore.config", "botocore.exceptions", "pyarrow", "pyarrow.parquet",
    "contract.job", "contract.storage", "worker.engine.artifact", "worker.runtime.faults",
)  # fmt: skip
# KEYS[1] a hash, ARGV[1] a field, ARGV[2] the value read: deletes the field only if it still holds that value
_DELETE_IF = """
if redis.call('hget', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('hdel', KEYS[1], ARGV[1]) end
return 0
"""


def chunk_field(output: str, job_id: str, chunk: int) -> str:
    return f"{output}|{job_id}|{chunk}"


def record_running(output: str, job_id: str, chunk: int, hostname: str, delivery: str) -> str:
    """Record ``delivery`` (whose lease says it is alive) as under way; the record, for ``record_ended``."""

    record = json.dumps({"worker": hostname, "delivery": delivery, "since": time.time()})
    running = chunk_field(output, job_id, chunk)
    best_effort("cannot record the running chunk", lambda: cache().hset(RUNNING_KEY, running, record), 0)
    return record


def record_ended(output: str, job_id: str, chunk: int, record: str) -> None:
    """Clear this delivery's record, not one another delivery of the chunk wrote since."""
    running = chunk_field(output, job_id, chunk)
    best_effort("cannot clear the running chunk", lambda: cache().eval(_DELETE_IF, 1, RUNNING_KEY, running, record), 0)


@dataclass(frozen=True)
class Chunk:
    output: str
    job_id: str
    number: int


def chunk_of(raw: bytes, delivered: bool = False) -> Chunk | None:
    """The chunk of a message as kombu keeps it, queued or (``delivered``) in ``unacked`` (``[message,
    exchange, routing key]``); None for anything else."""
    try:
        message = json.loads(raw)[0] if delivered else json.loads(raw)
        if (message.get("headers") or {}).get("task") != TRANSLATE_CHUNK:
            return None
        args, kwargs, _ = json.loads(base64.b64decode(message["body"]))
        return Chunk(*chunk_arguments(args, kwargs))
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, InvalidChunk):
        return None  # left to the broker's visibility timeout, then dropped by the task (worker.runtime.messages)


def in_broker(client: Any) -> dict[tuple[str, str], set[int]]:
    """Per ``(output, job id)``, the chunks that have a message in the broker, queued or delivered."""
    found: dict[tuple[str, str], set[int]] = {}
    lists = [(name, False) for queue in settings.QUEUES for name in settings.priority_lists(queue)]
    entries = [(raw, False) for name, _ in lists for raw in client.lrange(name, 0, -1)]
    entries += [(raw, True) for raw in client.hvals(UNACKED_KEY)]
    for raw, delivered in entries:
        chunk = chunk_of(raw, delivered)
        if chunk is not None:
            found.setdefault((chunk.output, chunk.job_id), set()).add(chunk.number)
    return found


class Watchdog(threading.Thread):
    def __init__(self, app: Any, hostname: str, queues: list[str], interval: float = settings.HEARTBEAT):
        super().__init__(name="fanyi-watchdog", daemon=True)
        self.app, self.hostname, self.queues, self.interval = app, hostname, queues, interval
        self.jobs: dict[tuple[str, str], tuple[float, int]] = {}  # (output, job id) -> last checked, chunks done
        self.adopted = 0.0  # when this watchdog last took on the unfinished jobs the cache's registry lists
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.started = time.time()
        self.broker_mark: str | None = None  # the broker's mark and run id as last read (``check_broker``)
        self.lost: set[tuple[str, str]] = set()  # jobs whose chunks the broker lost, not yet enqueued again

    def saw(self, output: str, job_id: str) -> None:
        """A chunk of this job reached this worker: watch the job until it ends."""
        with self.lock:
            self.jobs.setdefault((output, job_id), (0.0, -1))

    def start(self) -> None:
        for name in PRELOAD:
            importlib.import_module(name)
        super().start()

    def run(self) -> None:
        duties = (self.beat, self.check_broker, self.restore_stale, self.finalize_jobs, self.recover)
        while True:
            for duty in duties:
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
        fleet.beat(self.hostname, self.queues, health.state(), self.interval)

    def restore_stale(self) -> None:
        """Put back each chunk delivered over three heartbeats ago that no live worker instance holds; then
        forget what is acknowledged since, and the running records of deliveries that are not alive. One
        watchdog of the fleet per heartbeat."""
        if not cache().set(RESTORE_LOCK, self.hostname, nx=True, px=max(1, int(900 * self.interval))):
            return
        client, cutoff = broker(), time.time() - 3 * self.interval
        held = client.hgetall(HELD_KEY)
        for tag in client.zrangebyscore(UNACKED_INDEX_KEY, 0, cutoff):
            if not fleet.held_alive(held.get(tag)):
                try:
                    self._restore(client, tag)
                except Exception as err:  # noqa: BLE001 - the next message is not held up by this one
                    log.warning("watchdog: unacknowledged message %r: %s", tag, err)
        acknowledged = set(held) - set(client.hkeys(UNACKED_KEY))  # one read, not one per record
        if acknowledged:
            client.hdel(HELD_KEY, *acknowledged)
        for name, raw in cache().hgetall(RUNNING_KEY).items():  # what `jobs status` reads as running
            if not self._alive(raw, cutoff):
                cache().eval(_DELETE_IF, 1, RUNNING_KEY, name, raw)

    def _restore(self, client: Any, tag: bytes) -> None:
        raw = client.hget(UNACKED_KEY, tag)
        chunk = chunk_of(raw, delivered=True) if raw else None
        if chunk is None:
            return  # acknowledged meanwhile, or not a chunk (left to the visibility timeout)
        with self.app.connection_for_write(settings.BROKER_URL) as connection:
            connection.default_channel.qos.restore_by_tag(tag)  # once: a transaction on the unacked hash
        metrics.CHUNKS_REQUEUED.labels(reason="delivery_died").inc()
        log.warning("chunk %s of job %s: no live worker holds it; put back in its queue", chunk.number, chunk.job_id)

    @staticmethod
    def _alive(raw: bytes | None, cutoff: float) -> bool:
        """Whether a running record names a delivery whose lease is held (or that began after ``cutoff``)."""
        try:
            record = json.loads(raw or b"null")
            if float(record["since"]) > cutoff:
                return True
            return bool(cache().exists(LEASE_KEY.format(delivery=record["delivery"])))
        except (ValueError, KeyError, TypeError):
            return False

    def check_broker(self) -> None:
        """Enqueue again what a broker that lost its keys lost (see the module's docstring); a job that
        cannot be done now is tried again at the next pass."""
        client = broker()
        client.set(BROKER_MARK_KEY, f"{time.time()} {self.hostname}", nx=True)
        mark = f"{(client.get(BROKER_MARK_KEY) or b'').decode()} {client.info('server').get('run_id', '')}"
        if self.broker_mark is not None and mark != self.broker_mark:
            log.warning("watchdog: the broker restarted or lost its keys: enqueueing again what it lost")
            with self.lock:
                known = set(self.jobs)
            self.lost |= known | unfinished_jobs()  # before the mark is taken: a failure here is retried
        self.broker_mark = mark
        if not self.lost:
            return
        present = in_broker(client)
        for output, job_id in sorted(self.lost):
            try:
                lock = REENQUEUE_LOCK.format(job=job_id, mark=mark)
                self._reenqueue(output, job_id, (lock, 86400), present.get((output, job_id), set()), "broker_lost")
            except Exception as err:  # noqa: BLE001 - the other jobs are not held up by this one
                log.warning("watchdog: job %s under %s not enqueued again yet: %s", job_id, output, err)
            else:
                self.lost.discard((output, job_id))

    def _reenqueue(self, output: str, job_id: str, lock: tuple[str, int], present: set[int], reason: str) -> None:
        """Enqueue again each chunk of a running job that has no part and no message, by the one watchdog that
        takes ``lock`` (a key, and seconds it is held)."""
        from contract.job import done_chunks, read_job
        from contract.storage import open_storage

        if not broker().set(lock[0], self.hostname, nx=True, ex=lock[1]):
            return  # another watchdog does it
        try:
            storage = open_storage(output)
            job = read_job(storage, job_id)
            if storage.exists(job.key("_SUCCESS")) or storage.exists(job.key("_CANCELLED")):
                return
            missing = sorted(set(range(len(job.chunks))) - done_chunks(storage, job) - present)
            with self.app.connection_for_write(settings.BROKER_URL) as connection:
                for chunk in missing:
                    self.app.send_task(TRANSLATE_CHUNK, **job.chunk_message(output, chunk), connection=connection)
        except FileNotFoundError:
            return  # the job is gone: nothing to enqueue
        except Exception:
            broker().delete(lock[0])  # tried again at the next pass
            raise
        metrics.CHUNKS_REQUEUED.labels(reason=reason).inc(len(missing))
        self.saw(output, job_id)
        log.warning("job %s: %s chunks without a part or a message enqueued again", job_id, len(missing))

    def finalize_jobs(self) -> None:
        """Jobs whose chunks passed through here (and, every few minutes, the unfinished ones the cache's
        registry lists), checked against storage once a minute until they end. A job that wrote no part
        since the last check gets its chunks that have neither a part nor a message enqueued again: kombu
        loses a message whose worker is killed between taking it off the queue and recording it as
        delivered, and nothing else would ever bring it back."""
        now = time.time()
        if now - self.adopted >= ADOPT_EVERY:
            self.adopted = now
            registered: set[tuple[str, str]] = best_effort("watchdog: cannot read the registry", unfinished_jobs, set())
            for output, job_id in registered:
                self.saw(output, job_id)
        with self.lock:
            due = {key: done for key, (checked, done) in self.jobs.items() if now - checked >= max(60.0, self.interval)}
        present: dict[tuple[str, str], set[int]] | None = None
        for (output, job_id), before in due.items():
            try:
                done = self._progress(output, job_id)
                if done is not None and done == before:
                    present = in_broker(broker()) if present is None else present
                    lock = (REENQUEUE_LOCK.format(job=job_id, mark="stalled"), 60)
                    self._reenqueue(output, job_id, lock, present.get((output, job_id), set()), "lost")
            except Exception as err:  # noqa: BLE001 - checked again next time; the others are not held up
                log.warning("watchdog: job %s under %s: %s", job_id, output, err)
                done = before
            with self.lock:
                if done is None:
                    self.jobs.pop((output, job_id), None)
                elif (output, job_id) in self.jobs:
                    self.jobs[(output, job_id)] = (now, done)

    @staticmethod
    def _progress(output: str, job_id: str) -> int | None:
        """The chunks the job has done, or None when it needs no more watching: it ended (now, maybe), is
        cancelled or is gone."""
        from contract.job import done_chunks, finalize, read_job
        from contract.storage import open_storage

        storage = open_storage(output)
        try:
            job = read_job(storage, job_id)
        except FileNotFoundError:
            return None
        if storage.exists(job.key("_SUCCESS")) or storage.exists(job.key("_CANCELLED")):
            return None
        done = len(done_chunks(storage, job))
        return None if done == len(job.chunks) and finalize(storage, job) is not None else done

    def recover(self) -> None:
        fixed = health.fixed()
        if fixed is None:
            return
        queues = fixed.get("queues") or self.queues
        for queue in queues:
            self.app.control.add_consumer(queue, destination=[self.hostname], reply=True, timeout=5)
        health.clear(fixed)
        log.warning("healthy again (%s fixed): consuming %s", fixed.get("reason"), ", ".join(queues))
