"""Every setting of the worker and the producer, each overridable by the environment variable named.

The visibility timeout must exceed the hard time limit, which must exceed the soft one: a chunk is
redelivered only when its worker is gone, never while it still runs. ``check()`` enforces that at
start-up. Chunk size (``chunk_documents`` in a job spec) is chosen so a chunk finishes well inside
the soft limit: 64 demo-domain documents take seconds, a 64-document chunk of 3,000-word reports
on the real model about a minute per core.
"""

from __future__ import annotations

import os

_env = os.environ.get

BROKER_URL = _env("FANYI_BROKER_URL", "redis://127.0.0.1:6379/0")  # redis:// or rediss:// (TLS), password in URL
CACHE_URL = _env("FANYI_CACHE_URL", BROKER_URL)  # progress counters and locks (Redis); losing it loses nothing
REDIS_TIMEOUT = float(_env("FANYI_REDIS_TIMEOUT", "5"))  # seconds to connect to Redis and to read an answer
SOFT_TIME_LIMIT = int(_env("FANYI_SOFT_TIME_LIMIT", "900"))  # seconds: the task is asked to stop and retried
TIME_LIMIT = int(_env("FANYI_TIME_LIMIT", "1200"))  # seconds: the worker process is killed, the chunk requeued
VISIBILITY_TIMEOUT = int(_env("FANYI_VISIBILITY_TIMEOUT", "1800"))  # seconds before an unacked chunk is redelivered
MAX_DEATHS = int(_env("FANYI_MAX_DEATHS", "10"))  # deliveries of a chunk that died before its rest become error rows
RETRY_MAX_DELAY = float(_env("FANYI_RETRY_MAX_DELAY", "300"))  # seconds: cap of the backoff after transient faults
HEARTBEAT = float(_env("FANYI_HEARTBEAT", "10"))  # seconds between watchdog passes; a delivery 3 beats silent is gone
HEALTH_FILE = _env("FANYI_HEALTH_FILE", "/tmp/fanyi-worker-health.json")  # what a readiness probe reads
ARTIFACT = _env("FANYI_ARTIFACT")  # artifact a worker loads at start (jobs name theirs; this one is warm)
DEVICE = _env("FANYI_DEVICE", "cpu")  # cpu or cuda
PRECISION = _env("FANYI_PRECISION")  # default: int8 on cpu, fp16/fp32 on cuda (as the artifact has them)
THREADS = int(_env("FANYI_THREADS", "1"))  # ONNX Runtime threads per worker process (processes x threads = cores)
SESSIONS = int(_env("FANYI_SESSIONS", "1"))  # session pairs per worker process
METRICS_PORT = int(_env("FANYI_METRICS_PORT", "0"))  # worker's Prometheus port; 0 = none
CONCURRENCY = int(_env("FANYI_CONCURRENCY", "0"))  # worker processes; 0 = the cores this container may use / threads
OUTPUT = _env("FANYI_OUTPUT")  # default output prefix of the jobs CLI (status, list, resume)
MAX_DOCUMENT_CHARS = int(_env("FANYI_MAX_DOCUMENT_CHARS", "1000000"))  # longer documents are refused at submit
S3_RETRIES = int(_env("FANYI_S3_RETRIES", "8"))  # attempts per S3 request, with backoff between them
S3_TIMEOUT = float(_env("FANYI_S3_TIMEOUT", "20"))  # seconds to connect to S3 and to read an answer
SCHEDULES = _env("FANYI_SCHEDULES")  # folder of scheduled job specs that beat runs; unset = none
MEMORY_TTL = float(_env("FANYI_MEMORY_TTL", "259200"))  # seconds a translation memory lives after its last write
MEMORY_ENTRIES = int(_env("FANYI_MEMORY_ENTRIES", "100000"))  # entries one memory keeps (job or shared); then no more
JOB_METRICS_RETENTION = float(_env("FANYI_JOB_METRICS_RETENTION", "86400"))  # seconds an ended job stays exported
PRIORITY_STEPS = list(range(10))  # 0 = first; Redis keeps one list per step: "<queue>", "<queue>:1", ...
DEFAULT_PRIORITY = 5  # a job's priority unless its spec names one


def queue_for(device: str) -> str:
    """The queue of a device's workers: ``translate.cpu``, ``translate.gpu``."""
    return f"translate.{device}"


QUEUES = (queue_for("cpu"), queue_for("gpu"))


def check() -> None:
    if not SOFT_TIME_LIMIT < TIME_LIMIT < VISIBILITY_TIMEOUT:
        raise ValueError(
            "need FANYI_SOFT_TIME_LIMIT < FANYI_TIME_LIMIT < FANYI_VISIBILITY_TIMEOUT, got "
            f"{SOFT_TIME_LIMIT} < {TIME_LIMIT} < {VISIBILITY_TIMEOUT}: raise the visibility timeout"
        )
    if not BROKER_URL.startswith(("redis://", "rediss://")):
        raise ValueError(f"FANYI_BROKER_URL must be redis:// or rediss://, got {redact(BROKER_URL)}")


def s3_endpoint_url() -> str | None:
    """Read at each use (tests and ``jobs demo`` point it at their own server after import)."""
    return _env("FANYI_S3_ENDPOINT_URL") or None  # MinIO or another S3-compatible store; unset for AWS


def worker_processes() -> int:
    """``FANYI_CONCURRENCY``, or as many processes of ``FANYI_THREADS`` threads as this container has
    cores: its CPU quota (cgroup v2 ``cpu.max``) and affinity, not the node's count of CPUs."""
    if CONCURRENCY:
        return CONCURRENCY
    return max(1, available_cores() // THREADS)


def available_cores() -> int:
    cores = len(os.sched_getaffinity(0))
    try:
        quota, period = open("/sys/fs/cgroup/cpu.max").read().split()
    except (OSError, ValueError):
        return cores
    return cores if quota == "max" else max(1, min(cores, -(-int(quota) // int(period))))


def redact(url: str) -> str:
    """A URL fit for logs: any password replaced by ***."""
    from kombu.utils.url import maybe_sanitize_url

    return str(maybe_sanitize_url(url, mask="***"))


def priority_lists(queue: str) -> list[str]:
    """The Redis lists that hold ``queue``'s messages, one per priority step (kombu's naming)."""
    return [queue if step == 0 else f"{queue}:{step}" for step in PRIORITY_STEPS]
