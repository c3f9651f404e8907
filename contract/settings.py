"""Every setting of the worker and the producer, each overridable by the environment variable named.

The visibility timeout must exceed the hard time limit, which must exceed the soft one: a chunk is
redelivered only when its worker is gone, never while it still runs. ``check()`` enforces that at
start-up. Chunk size (``chunk_documents`` in a job spec) is chosen so a chunk finishes well inside
the soft limit: 64 demo-domain documents take seconds, a 64-document chunk of 3,000-word reports
on the real model about a minute per core.

Every variable is read by one of the typed readers below (``_text``, ``_optional``, ``_redis_url``,
``_choice``, ``_integer``, ``_number``). Reading never raises: a value that cannot be used leaves the
default in place and one line in ``PROBLEMS`` (the variable, its value with any password masked, what
it accepts), and ``check()`` raises ``SettingError`` with them. Every entry point calls
``exit_if_invalid()`` before it does anything (the jobs CLI, ``python -m worker``, the worker and
beat through ``worker.runtime.app``, the exporter, the health probes): one
``error:`` line and exit status 2, as for a bad option, never a traceback.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
PROBLEMS: list[str] = []  # one line per variable whose value cannot be used (its default is used meanwhile)


class SettingError(ValueError):
    """A ``FANYI_*`` setting that cannot be used; the message is one line that names it."""


def redact(url: str) -> str:
    """A URL fit for logs: any password replaced by ***."""
    from kombu.utils.url import maybe_sanitize_url

    return str(maybe_sanitize_url(url, mask="***"))


def _read(name: str, default: str, parse: Callable[[str], T], accepts: str, shown: Callable[[str], str] = repr) -> T:
    """``parse`` of the variable's value (or of ``default`` when it is unset); a value ``parse`` refuses
    (ValueError) is recorded in ``PROBLEMS`` and the default is used."""
    raw = os.environ.get(name)
    if raw is not None:
        try:
            return parse(raw)
        except ValueError:
            PROBLEMS.append(f"{name}={shown(raw)} is not valid: expected {accepts}")
    return parse(default)


def _text(name: str, default: str) -> str:
    return os.environ.get(name, default)


def _optional(name: str) -> str | None:
    return os.environ.get(name)


def _choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    def parse(raw: str) -> str:
        if raw not in choices:
            raise ValueError(raw)
        return raw

    return _read(name, default, parse, " or ".join(choices))


def _redis_url(name: str, default: str) -> str:
    """A redis:// or rediss:// URL; shown with its password masked, never as given."""

    def parse(raw: str) -> str:
        if not raw.startswith(("redis://", "rediss://")):
            raise ValueError(raw)
        return raw

    return _read(name, default, parse, "a redis:// or rediss:// URL", shown=lambda raw: repr(redact(raw)))


def _integer(name: str, default: str, minimum: int = 0, maximum: int | None = None) -> int:
    def parse(raw: str) -> int:
        value = int(raw.strip())
        if value < minimum or (maximum is not None and value > maximum):
            raise ValueError(raw)
        return value

    upto = f" and at most {maximum}" if maximum is not None else ""
    return _read(name, default, parse, f"a whole number of at least {minimum}{upto}")


def _number(name: str, default: str, minimum: float = 0.0, *, zero: bool = False) -> float:
    """A finite number greater than ``minimum`` (or equal to it, with ``zero``)."""

    def parse(raw: str) -> float:
        value = float(raw.strip())
        if not math.isfinite(value) or value < minimum or (value == minimum and not zero):
            raise ValueError(raw)
        return value

    return _read(name, default, parse, f"a number greater than {minimum:g}")


# fmt: off
BROKER_URL = _redis_url("FANYI_BROKER_URL", "redis://127.0.0.1:6379/0")  # redis:// or rediss:// (TLS), password in URL
CACHE_URL = _redis_url("FANYI_CACHE_URL", BROKER_URL)  # progress counters and locks (Redis); losing it loses nothing
REDIS_TIMEOUT = _number("FANYI_REDIS_TIMEOUT", "5")  # seconds to connect to Redis and to read an answer
SOFT_TIME_LIMIT = _integer("FANYI_SOFT_TIME_LIMIT", "900", 1)  # seconds: the task is asked to stop and retried
TIME_LIMIT = _integer("FANYI_TIME_LIMIT", "1200", 1)  # seconds: the worker process is killed, the chunk requeued
VISIBILITY_TIMEOUT = _integer("FANYI_VISIBILITY_TIMEOUT", "1800", 1)  # seconds before an unacked chunk is redelivered
MAX_DEATHS = _integer("FANYI_MAX_DEATHS", "10", 1)  # deliveries of a chunk that died before its rest become error rows
RETRY_MAX_DELAY = _number("FANYI_RETRY_MAX_DELAY", "300", zero=True)  # seconds: cap of the backoff after faults
HEARTBEAT = _number("FANYI_HEARTBEAT", "10")  # seconds between watchdog passes; a delivery 3 beats silent is gone
HEALTH_FILE = _text("FANYI_HEALTH_FILE", "/tmp/fanyi-worker-health.json")  # what a readiness probe reads
ARTIFACT = _optional("FANYI_ARTIFACT")  # artifact a worker loads at start (jobs name theirs; this one is warm)
DEVICE = _choice("FANYI_DEVICE", "cpu", ("cpu", "cuda"))  # cpu or cuda
PRECISION = _optional("FANYI_PRECISION")  # default: fp32 on cuda; on cpu int8 if the artifact has it, else fp32
THREADS = _integer("FANYI_THREADS", "1", 1)  # ONNX Runtime threads per worker process (processes x threads = cores)
SESSIONS = _integer("FANYI_SESSIONS", "1", 1)  # session pairs per worker process
METRICS_PORT = _integer("FANYI_METRICS_PORT", "0", 0, 65535)  # worker's Prometheus port; 0 = none
CONCURRENCY = _integer("FANYI_CONCURRENCY", "0")  # worker processes; 0 = the cores this container may use / threads
OUTPUT = _optional("FANYI_OUTPUT")  # default output prefix of every jobs CLI verb that takes --output
MAX_DOCUMENT_CHARS = _integer("FANYI_MAX_DOCUMENT_CHARS", "1000000", 1)  # longer documents become error rows
S3_RETRIES = _integer("FANYI_S3_RETRIES", "8", 1)  # attempts per S3 request, with backoff between them
S3_TIMEOUT = _number("FANYI_S3_TIMEOUT", "20")  # seconds to connect to S3 and to read an answer
SCHEDULES = _optional("FANYI_SCHEDULES")  # folder of scheduled job specs that beat runs; unset = none
MEMORY_TTL = _number("FANYI_MEMORY_TTL", "259200")  # seconds a translation memory lives after its last write
MEMORY_ENTRIES = _integer("FANYI_MEMORY_ENTRIES", "100000")  # entries one memory keeps (job or shared); then no more
JOB_METRICS_RETENTION = _number("FANYI_JOB_METRICS_RETENTION", "86400", zero=True)  # s an ended job stays exported
# fmt: on
PRIORITY_STEPS = list(range(10))  # 0 = first; Redis keeps one list per step: "<queue>", "<queue>:1", ...
DEFAULT_PRIORITY = 5  # a job's priority unless its spec names one


def queue_for(device: str) -> str:
    """The queue of a device's workers: ``translate.cpu``, ``translate.gpu``."""
    return f"translate.{device}"


QUEUES = (queue_for("cpu"), queue_for("gpu"))


def check() -> None:
    """Raise ``SettingError`` (one line) for every setting that cannot be used, or limits out of order."""
    problems = list(PROBLEMS)
    if not SOFT_TIME_LIMIT < TIME_LIMIT < VISIBILITY_TIMEOUT:
        problems.append(
            "need FANYI_SOFT_TIME_LIMIT < FANYI_TIME_LIMIT < FANYI_VISIBILITY_TIMEOUT, got "
            f"{SOFT_TIME_LIMIT} < {TIME_LIMIT} < {VISIBILITY_TIMEOUT}: raise FANYI_VISIBILITY_TIMEOUT "
            "(or lower the limits)"
        )
    if not BROKER_URL.startswith(("redis://", "rediss://")):  # a test or a caller may have set it since
        problems.append(f"FANYI_BROKER_URL must be redis:// or rediss://, got {redact(BROKER_URL)}")
    if problems:
        raise SettingError("; ".join(problems))


def exit_if_invalid() -> None:
    """What every entry point calls first: a bad setting ends the process with one ``error:`` line on
    stderr and exit status 2 (a usage error, as argparse's), never a traceback."""
    try:
        check()
    except SettingError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


def s3_endpoint_url() -> str | None:
    """Read at each use (tests and ``jobs demo`` point it at their own server after import)."""
    return _optional("FANYI_S3_ENDPOINT_URL") or None  # MinIO or another S3-compatible store; unset for AWS


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


def priority_lists(queue: str) -> list[str]:
    """The Redis lists that hold ``queue``'s messages, one per priority step (kombu's naming)."""
    return [queue if step == 0 else f"{queue}:{step}" for step in PRIORITY_STEPS]
