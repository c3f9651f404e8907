"""The Redis cache both sides share: its client, every key Fanyi writes there, and jobs' progress counters.

Nothing here is the system of record (storage is: ``contract.job``). Losing every key loses no work:
progress is counted again from the parts (``rebuild_progress``), a job ends from storage, running
records and leases only speed up recovery. The broker's own keys (kombu's queues and ``unacked``)
are not listed here.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

from contract import settings
from contract.job import Tally, read_job, result_keys
from contract.rows import read_rows
from contract.spec import MEMORY_SCOPES
from contract.storage import open_storage

log = logging.getLogger(__name__)
T = TypeVar("T")

JOBS_KEY = "fanyi:jobs"  # hash: job id -> output prefix, for the exporter and the CLI
JOB_PROGRESS_KEY = "fanyi:progress:{job}"  # hash: total, documents, errors, partial, windows, Tally.counters(), ended
RUNNING_KEY = "fanyi:running"  # hash: "<output>|<job>|<chunk>" -> {"worker", "delivery", "since"} under way
WORKER_KEY = "fanyi:worker:{hostname}"  # a worker's heartbeat: its health and queues, expiring after 3 heartbeats
WORKERS_KEY = "fanyi:workers"  # set: the workers that beat, pruned of those whose heartbeat expired
UNLOADABLE_KEY = "fanyi:unloadable:{artifact}"  # hash: workers that cannot load this artifact -> since when
CHUNK_KEY = "fanyi:chunk:{job}:{chunk}"  # hash: a chunk's deliveries (running, deaths, strikes:<doc>, ...)
LEASE_KEY = "fanyi:delivery:{delivery}"  # present while that delivery's process is alive
RESTORE_LOCK = "fanyi:restore"  # one watchdog per heartbeat puts back the chunks whose delivery died
SCHEDULE_RUN_KEY = "fanyi:schedule:{name}:{date}"  # the job id a scheduled run submitted (kept 7 days)
SCHEDULE_LAST_KEY = "fanyi:schedule:{name}:last"  # "<job id> <output>" of a schedule's latest run
SCHEDULES_KEY = "fanyi:schedules"  # hash: schedule name -> its spec's path (what beat runs), for `jobs schedules`
SCHEDULE_WAITING_KEY = "fanyi:schedule:{name}:waiting"  # "<date> <job id> <since>": a night waiting for that run
SCHEDULE_SKIPPED_KEY = "fanyi:schedule:{name}:skipped"  # hash: date -> the run still going then, of nights never run
SCHEDULE_SUBMITTING_KEY = "fanyi:schedule:{name}:submitting"  # the job id beat is submitting for it now (a lock)
# In the broker's Redis (``broker()``), beside kombu's own keys:
BROKER_MARK_KEY = "fanyi:broker"  # set once; gone when the broker lost its keys (restart without disk, FLUSHALL)
INSTANCE_KEY = "fanyi:instance:{hostname}"  # the worker instance now beating under that name, for 3 heartbeats
HELD_KEY = "fanyi:held"  # hash: delivery tag -> {"worker", "holder"} that received that message
FINALIZE_LOCK = "fanyi:finalize:{job}"  # one caller at a time sums a job's parts into its _SUCCESS
REENQUEUE_LOCK = "fanyi:reenqueue:{job}:{mark}"  # one watchdog enqueues a job's lost chunks again
UNACKED_KEY = "unacked"  # kombu's hash of delivered, unacknowledged messages: tag -> [message, exchange, queue]
UNACKED_INDEX_KEY = "unacked_index"  # kombu's sorted set: tag -> when it was delivered
MEMORY_KEY = "fanyi:memory:{output}|{scope}"  # hash: a translation memory (scope: a job id, or "shared")


@functools.cache
def cache() -> Any:
    import redis

    return redis.Redis.from_url(
        settings.CACHE_URL, socket_timeout=settings.REDIS_TIMEOUT, socket_connect_timeout=settings.REDIS_TIMEOUT
    )


@functools.cache
def broker() -> Any:
    """The broker's Redis, for what reads kombu's keys itself (the exporter, the watchdog)."""
    import redis

    return redis.Redis.from_url(
        settings.BROKER_URL, socket_timeout=settings.REDIS_TIMEOUT, socket_connect_timeout=settings.REDIS_TIMEOUT
    )


def register(job_id: str, output: str, documents: int) -> None:
    """A submitted job: where it lives and how many documents it has."""
    cache().pipeline().hset(JOBS_KEY, job_id, output).hsetnx(
        JOB_PROGRESS_KEY.format(job=job_id), "total", documents
    ).execute()


def count_part(job_id: str, tally: Tally) -> bool:
    """Count a written part's rows; whether the job may be complete now: True once its documents reach
    the total recorded at submission, and True whenever the cache cannot tell (lost or down), so a lost
    cache costs a storage listing, never a job left without its ``_SUCCESS``."""
    progress = JOB_PROGRESS_KEY.format(job=job_id)

    def count() -> bool:
        pipeline = cache().pipeline().hincrby(progress, "documents", sum(tally.statuses.values()))
        pipeline.hincrby(progress, "errors", tally.statuses["error"])
        pipeline.hincrby(progress, "partial", tally.statuses["partial"])
        for name, number in tally.counters().items():
            pipeline.hincrby(progress, name, number)
        pipeline.hincrby(progress, "windows", tally.windows).hincrby(progress, "reused_windows", tally.reused_windows)
        done, *_, total = pipeline.hget(progress, "total").execute()
        return total is None or int(done) >= int(total)

    return best_effort(f"job {job_id}'s progress not counted: storage will tell when it ends", count, True)


def rebuild_progress(job_id: str, output: str) -> None:
    """After the cache lost a job's counters (a flush, a restart without disk): count them again from the
    parts in storage, and register the job again. A part written meanwhile may be counted twice: these
    are a cache's numbers; ``jobs status`` and ``_SUCCESS`` count from storage."""
    storage = open_storage(output)
    job = read_job(storage, job_id)
    tally = Tally()
    for key in result_keys(storage, job):
        tally.add(read_rows(storage.read(key)))
    counts: dict[str, float] = {"total": job.documents, "documents": sum(tally.statuses.values())}
    counts |= {"errors": tally.statuses["error"], "partial": tally.statuses["partial"]}
    counts |= tally.counters()
    counts |= {"windows": tally.windows, "reused_windows": tally.reused_windows}
    if storage.exists(job.key("_SUCCESS")) or storage.exists(job.key("_CANCELLED")):
        counts["ended"] = time.time()
    progress = JOB_PROGRESS_KEY.format(job=job_id)
    cache().pipeline().hset(JOBS_KEY, job_id, output).delete(progress).hset(progress, mapping=counts).execute()


def unfinished_jobs() -> set[tuple[str, str]]:
    """``(output, job id)`` of each registered job whose counters do not show it ended (or cannot say)."""
    client = cache()
    registered = [(job_id.decode(), output.decode()) for job_id, output in client.hgetall(JOBS_KEY).items()]
    pipeline = client.pipeline(transaction=False)
    for job_id, _ in registered:
        pipeline.hmget(JOB_PROGRESS_KEY.format(job=job_id), "documents", "total", "ended")
    found = set()
    for (job_id, output), (documents, total, ended) in zip(registered, pipeline.execute()):
        if ended is None and (documents is None or total is None or int(documents) < int(total)):
            found.add((output, job_id))
    return found


def record_ended(job_id: str, ended: bool = True) -> None:
    """A job was cancelled (``ended``) or resumed: the exporter keeps an ended job's series for
    ``FANYI_JOB_METRICS_RETENTION`` seconds, then forgets it. A finished job is seen ending by the
    exporter itself (its documents reach its total)."""
    progress = JOB_PROGRESS_KEY.format(job=job_id)
    change = lambda: cache().hset(progress, "ended", time.time()) if ended else cache().hdel(progress, "ended")
    unrecorded = f"job {job_id}'s end not recorded for the exporter, which rebuilds it from storage"
    best_effort(unrecorded, change, 0, logging.DEBUG)  # the verb that calls it says what matters, in one line


def memory_namespace(output: str, job_id: str, scope: str, shared_prefix: str | None = None) -> str | None:
    """The hash holding a job's translation memory (``worker.engine.memory``): its own under its ``output``
    (``job``), or the one every job under ``shared_prefix`` (by default ``output``) shares (``shared``);
    None when the spec turns it off."""
    if scope not in MEMORY_SCOPES:
        raise ValueError(f"memory must be one of {', '.join(MEMORY_SCOPES)}, got {scope!r}")
    if scope == "off":
        return None
    if scope == "job":
        return MEMORY_KEY.format(output=output.rstrip("/"), scope=job_id)
    return MEMORY_KEY.format(output=(shared_prefix or output).rstrip("/"), scope="shared")


def clear_memory(output: str, job_id: str | None = None) -> dict[str, int]:
    """Delete the translation memories under the prefix ``output`` (its own, and those of the prefixes
    below it, such as a schedule's dated runs), or only job ``job_id``'s: entries per memory."""
    client, output = cache(), output.rstrip("/")
    if job_id is not None:
        names = [MEMORY_KEY.format(output=output, scope=job_id)]
    else:
        glob = re.sub(r"([*?\[\]\\])", r"\\\1", output)
        patterns = [MEMORY_KEY.format(output=glob, scope="*"), MEMORY_KEY.format(output=f"{glob}/*", scope="*")]
        names = sorted({name.decode() for pattern in patterns for name in client.scan_iter(match=pattern, count=1000)})
    sizes = [client.hlen(name) for name in names]
    if names:
        client.delete(*names)
    return {name.removeprefix("fanyi:memory:"): n for name, n in zip(names, sizes) if n}


def forget_job(output: str, job_id: str) -> int:
    """Delete what Redis holds of a job (``jobs delete``): its progress counters and registry entry, its own
    translation memory, its chunks' delivery records. How many keys."""
    client = cache()
    names = [JOB_PROGRESS_KEY.format(job=job_id), MEMORY_KEY.format(output=output.rstrip("/"), scope=job_id)]
    chunks = CHUNK_KEY.format(job=job_id, chunk="*")  # a job id holds no glob character (``contract.job.JOB_ID``)
    names += [n.decode() for n in client.scan_iter(match=chunks, count=1000)]
    return int(client.delete(*names)) + int(client.hdel(JOBS_KEY, job_id))


def best_effort(what: str, action: Callable[[], T], default: T, level: int = logging.WARNING) -> T:
    """``action()``: a call to Redis whose loss costs time, never an output (a cache, a record, a lease, a
    counter). When it fails: one log line saying ``what`` could not be done, and ``default``. A task's
    time limit raised meanwhile is no failure of Redis: it goes through to the task."""
    from billiard.exceptions import SoftTimeLimitExceeded

    try:
        return action()
    except SoftTimeLimitExceeded:
        raise
    except Exception as err:  # noqa: BLE001 - whatever Redis, its client or a damaged value raise
        log.log(level, "%s (%s)", what, err)
        return default
