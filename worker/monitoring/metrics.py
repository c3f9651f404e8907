"""The worker's Prometheus metrics (the exporter that reads the queues is ``worker.monitoring.exporter``).

Two sources, two endpoints:
- each worker (``FANYI_METRICS_PORT``) serves what its processes did: documents, sentences and
  tokens translated, errors by kind, messages dropped, task latency, batch fill. Prefork children write to
  ``PROMETHEUS_MULTIPROC_DIR`` and the worker's main process serves the sum.
- ``python -m worker.exporter --port 9100`` (one per cluster) serves what Redis knows: queue depth
  per queue and priority list, messages delivered but not acknowledged, the backlog autoscalers
  read, workers answering, and the progress of jobs submitted through this Redis.

Counts are taken only by the delivery that created a part, so they match the output exactly.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence

from contract import settings
from contract.cache import count_part
from contract.job import STATUSES, Tally
from contract.rows import Row

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"


def multiprocess_dir() -> str | None:
    """Make the worker's processes count into ``PROMETHEUS_MULTIPROC_DIR`` when it serves metrics.

    prometheus_client picks its storage when it is first imported, from the environment as it is then
    (its documentation: set the variable before the process starts). The images and the Kubernetes
    manifests set it (an emptyDir). Where it is unset and nothing has imported prometheus_client yet, a
    fresh temporary folder is used. Where something already has (Celery's command line loads every
    installed plugin first: flower's imports prometheus_client), the worker would serve an empty
    ``/metrics``: the problem is returned, and a worker starting with it stops with that one line
    (``worker.runtime.app``); beat and flower, which import this module too and serve no metrics, go on."""
    if folder := os.environ.get(MULTIPROC_DIR):  # set (the images do): prometheus_client writes there at import
        os.makedirs(folder, exist_ok=True)
        return None
    if not settings.METRICS_PORT:
        return None
    if "prometheus_client" not in sys.modules:
        os.environ[MULTIPROC_DIR] = tempfile.mkdtemp(prefix="fanyi-metrics-")
    else:
        return (
            f"FANYI_METRICS_PORT={settings.METRICS_PORT} needs {MULTIPROC_DIR} set before the worker starts "
            "(prometheus_client was loaded first, by a Celery plugin such as flower's, and would count nothing "
            f"for /metrics): export {MULTIPROC_DIR}=<an empty folder>, as the images and manifests do"
        )
    return None


PROBLEM = multiprocess_dir()

from prometheus_client import Counter, Histogram  # noqa: E402 - after the storage is chosen

DOCUMENTS = Counter("fanyi_documents_translated_total", "Documents written to result parts", ["status"])
SENTENCES = Counter("fanyi_sentences_translated_total", "Sentences written to result parts")
SENTENCE_FLAGS = Counter(
    "fanyi_sentence_flags_total", "Sentences written with a flag (retried, empty, numbers, copied, ...)", ["flag"]
)
TOKENS = Counter("fanyi_source_tokens_translated_total", "Source tokens of the documents written")
ERRORS = Counter(
    "fanyi_errors_total",
    "Errors by kind (document, poison, time_limit, transient, environment, chunk, handler, job_gone)",
    ["kind"],
)  # transient, environment, chunk: worker.runtime.faults.Fault; tests/worker/monitoring/test_metrics.py holds the list
MESSAGES_DROPPED = Counter(
    "fanyi_messages_dropped_total",
    "Messages dropped unread or undone (undecodable, not_a_task, invalid_chunk)",
    ["reason"],
)  # worker/runtime/messages.py: each also logged on one line
WINDOWS = Counter(
    "fanyi_windows_translated_total", "Windows of the documents written, by what translated them", ["by"]
)  # by: engine, or memory (the translation memory had it: worker/engine/memory.py)
TOKENS_REUSED = Counter("fanyi_memory_source_tokens_total", "Source tokens of windows the translation memory gave")
CHUNKS_REQUEUED = Counter(
    "fanyi_chunks_requeued_total", "Chunks the watchdog put back in their queue, by why", ["reason"]
)  # delivery_died: delivered and not acknowledged by a delivery that is not alive; broker_lost: FLUSHALL, restart
ENGINES_BUILT = Counter(
    "fanyi_engines_built_total", "Engines a worker process built, by the precision chosen and the CPU's class",
    ["precision", "cpu"],
)  # cpu: worker.engine.sessions.cpu_class (amx, avx512-vnni, avx-vnni, avx2, other)
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


def record_part(job_id: str, rows: Sequence[Row], tokens: int = 0, reused_tokens: int = 0) -> bool:
    """Count a written part (its rows, and the source tokens the engine read and the memory spared it);
    whether the job may be complete now (the caller then checks storage).

    The answer is a hint from the progress cache: True once its documents reach the total recorded
    at submission, and True whenever the cache cannot tell (Redis lost it or is down), so a lost
    cache costs a storage listing, never a job left without its ``_SUCCESS``."""
    tally = Tally().add([row.to_dict() for row in rows])
    for status in STATUSES:
        DOCUMENTS.labels(status=status).inc(tally.statuses[status])
    ERRORS.labels(kind="document").inc(tally.statuses["error"])
    SENTENCES.inc(tally.sentences)
    for flag, count in tally.sentence_flags.items():
        SENTENCE_FLAGS.labels(flag=flag).inc(count)
    TOKENS.inc(tokens)
    WINDOWS.labels(by="memory").inc(tally.reused_windows)
    WINDOWS.labels(by="engine").inc(tally.windows - tally.reused_windows)
    TOKENS_REUSED.inc(reused_tokens)
    for row in rows:
        DOCUMENT_SECONDS.observe(row.timings.total)
    return count_part(job_id, tally)


def serve_worker_metrics(port: int) -> None:
    """The worker's endpoint: the sum over its processes (multiprocess mode)."""
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    start_http_server(port, registry=registry)
