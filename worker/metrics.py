"""Prometheus metrics, and the exporter that reads the queues.

Two sources, two endpoints:
- each worker (``FANYI_METRICS_PORT``) serves what its processes did: documents, sentences and
  tokens translated, errors by kind, task latency, batch fill. Prefork children write to
  ``PROMETHEUS_MULTIPROC_DIR`` and the worker's main process serves the sum.
- ``python -m worker.exporter --port 9100`` (one per cluster) serves what Redis knows: queue depth
  per queue and priority list, messages delivered but not acknowledged, the backlog autoscalers
  read, workers answering, and the progress of jobs submitted through this Redis.

Counts are taken only by the delivery that created a part, so they match the output exactly.
"""

from __future__ import annotations

import functools
import os
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from worker import settings
from worker.job import STATUSES, Tally

if settings.METRICS_PORT and "PROMETHEUS_MULTIPROC_DIR" not in os.environ:  # before prometheus_client loads
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="fanyi-metrics-")

from prometheus_client import Counter, Histogram

DOCUMENTS = Counter("fanyi_documents_translated_total", "Documents written to result parts", ["status"])
SENTENCES = Counter("fanyi_sentences_translated_total", "Sentences written to result parts")
SENTENCE_FLAGS = Counter(
    "fanyi_sentence_flags_total", "Sentences written with a flag (retried, empty, numbers, copied, ...)", ["flag"]
)
TOKENS = Counter("fanyi_source_tokens_translated_total", "Source tokens of the documents written")
ERRORS = Counter(
    "fanyi_errors_total", "Errors by kind (document, poison, time_limit, transient, environment, chunk)", ["kind"]
)
TASK_SECONDS = Histogram(
    "fanyi_task_duration_seconds", "Time to translate and write one chunk",
    buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1200),
)  # fmt: skip
DOCUMENT_SECONDS = Histogram(
    "fanyi_document_duration_seconds", "Time per document (its share of the engine call)",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)  # fmt: skip
BATCH_FILL = Histogram(
    "fanyi_batch_fill_ratio", "Planned tokens of an engine batch over the token budget",
    buckets=(0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.5),
)  # fmt: skip
JOB_PROGRESS_KEY = "fanyi:progress:{job}"  # Redis hash: total, documents, errors, partial, flag:<name>, ended
JOBS_KEY = "fanyi:jobs"  # Redis hash: job id -> output prefix, for the exporter and the CLI (a cache)


@functools.cache
def cache() -> Any:
    import redis

    return redis.Redis.from_url(settings.CACHE_URL, socket_timeout=5, socket_connect_timeout=5)


def record_part(job_id: str, rows: Sequence[dict[str, Any]]) -> bool:
    """Count a written part; whether the job may be complete now (the caller then checks storage).

    The answer is a hint from the progress cache: True once its documents reach the total recorded
    at submission, and True whenever the cache cannot tell (Redis lost it or is down), so a lost
    cache costs a storage listing, never a job left without its ``_SUCCESS``."""
    tally = Tally().add(rows)
    for status in STATUSES:
        DOCUMENTS.labels(status=status).inc(tally.statuses[status])
    ERRORS.labels(kind="document").inc(tally.statuses["error"])
    SENTENCES.inc(tally.sentences)
    for flag, count in tally.sentence_flags.items():
        SENTENCE_FLAGS.labels(flag=flag).inc(count)
    TOKENS.inc(sum(r.get("tokens", 0) for r in rows))
    for row in rows:
        DOCUMENT_SECONDS.observe(row["timings"]["total"])
    try:
        progress = JOB_PROGRESS_KEY.format(job=job_id)
        pipeline = cache().pipeline().hincrby(progress, "documents", len(rows))
        pipeline.hincrby(progress, "errors", tally.statuses["error"]).hincrby(
            progress, "partial", tally.statuses["partial"]
        )
        for flag, count in tally.sentence_flags.items():
            pipeline.hincrby(progress, f"flag:{flag}", count)
        done, *_, total = pipeline.hget(progress, "total").execute()
    except Exception:  # noqa: BLE001 - progress is a cache; `jobs status` recomputes from storage
        return True
    return total is None or int(done) >= int(total)


def rebuild_progress(job_id: str, output: str) -> None:
    """After the cache lost a job's counters (a flush, a restart without disk): count them again from the
    parts in storage, and register the job again. A part written meanwhile may be counted twice: these
    are a cache's numbers; ``jobs status`` and ``_SUCCESS`` count from storage."""
    from worker.job import read_job, read_rows, result_keys
    from worker.storage import open_storage

    storage = open_storage(output)
    job = read_job(storage, job_id)
    tally = Tally()
    for key in result_keys(storage, job):
        tally.add(read_rows(storage.read(key)))
    counts: dict[str, float] = {"total": job.documents, "documents": sum(tally.statuses.values())}
    counts |= {"errors": tally.statuses["error"], "partial": tally.statuses["partial"]}
    counts |= {f"flag:{f}": n for f, n in tally.sentence_flags.items()}
    if storage.exists(job.key("_SUCCESS")) or storage.exists(job.key("_CANCELLED")):
        counts["ended"] = time.time()
    progress = JOB_PROGRESS_KEY.format(job=job_id)
    cache().pipeline().hset(JOBS_KEY, job_id, output).delete(progress).hset(progress, mapping=counts).execute()


def record_ended(job_id: str, ended: bool = True) -> None:
    """A job was cancelled (``ended``) or resumed: the exporter keeps an ended job's series for
    ``FANYI_JOB_METRICS_RETENTION`` seconds, then forgets it. A finished job is seen ending by the
    exporter itself (its documents reach its total)."""
    progress = JOB_PROGRESS_KEY.format(job=job_id)
    try:
        cache().hset(progress, "ended", time.time()) if ended else cache().hdel(progress, "ended")
    except Exception:  # noqa: BLE001 - a cache: the exporter rebuilds it from storage
        pass


def serve_worker_metrics(port: int) -> None:
    """The worker's endpoint: the sum over its processes (multiprocess mode)."""
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    start_http_server(port, registry=registry)
