"""The Celery app. Start a worker the conventional way:

    celery -A worker.app worker -Q translate.cpu --concurrency 2 -l INFO

(``-l INFO``: a log line as each chunk is received and done; Celery's default level shows warnings only.)

Delivery is at-least-once: a chunk is acknowledged only after its part is in storage
(``task_acks_late``), requeued if its worker process dies (``task_reject_on_worker_lost``), and
redelivered after ``FANYI_VISIBILITY_TIMEOUT`` if the whole worker vanished. So every task is
idempotent (see ``worker.runtime.tasks``). Messages are JSON only: a pickled message is refused.
Settings and their environment variables: ``contract.settings``.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from celery import Celery
from celery.signals import task_received, worker_init, worker_process_init, worker_process_shutdown, worker_ready
from kombu import Queue

from contract import settings
from contract.job import TRANSLATE_CHUNK
from contract.messages import InvalidChunk, chunk_arguments
from worker.documents import languages
from worker.monitoring import fleet, health, metrics
from worker.monitoring.watchdog import Watchdog
from worker.runtime import messages

log = logging.getLogger(__name__)
settings.exit_if_invalid()  # one line and exit 2 for a bad FANYI_* setting: the worker's, beat's and flower's start
messages.use_transport()  # a payload that cannot be decoded is dropped, not the worker's death (runtime.messages)

app = Celery("fanyi", broker=settings.BROKER_URL, include=["worker.runtime.tasks"])
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],  # pickle refused: a message is data, never code
    event_serializer="json",
    task_ignore_result=True,  # results live in storage; the broker carries only work
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    task_acks_on_failure_or_timeout=False,  # the hard time limit requeues the chunk (acknowledged, it was lost)
    worker_prefetch_multiplier=1,
    worker_concurrency=settings.worker_processes(),  # `--concurrency` overrides; FANYI_CONCURRENCY or the cores
    worker_cancel_long_running_tasks_on_connection_loss=True,  # its redelivery would otherwise run twice
    broker_connection_retry_on_startup=True,
    broker_connection_max_retries=None,  # a restarted Redis is waited for, forever
    task_soft_time_limit=settings.SOFT_TIME_LIMIT,
    task_time_limit=settings.TIME_LIMIT,
    broker_transport_options={
        "visibility_timeout": settings.VISIBILITY_TIMEOUT,
        "priority_steps": settings.PRIORITY_STEPS,
        "sep": ":",
        "queue_order_strategy": "priority",
        "socket_connect_timeout": settings.REDIS_TIMEOUT,  # a broker that accepts and never answers is an error,
        "socket_timeout": settings.REDIS_TIMEOUT,  # not a hang (kombu's default is to wait forever)
    },
    broker_connection_timeout=settings.REDIS_TIMEOUT,
    task_queues=[Queue(name, routing_key=name) for name in settings.QUEUES],
    task_default_queue=settings.queue_for("cpu"),
    task_default_priority=settings.DEFAULT_PRIORITY,
    redbeat_redis_url=settings.CACHE_URL,
    redbeat_redis_options={"socket_timeout": settings.REDIS_TIMEOUT, "socket_connect_timeout": settings.REDIS_TIMEOUT},
    redbeat_lock_timeout=300,  # seconds a dead beat's lock outlives it before another beat takes over
    worker_send_task_events=True,  # Flower and the event monitor see tasks once a worker receives them
    # No "task-sent" event per message: a submit of 1M documents would publish 15,625 of them beside its chunk
    # messages (twice the broker round trips); the queue's depth is what counts the messages not yet received.
    task_send_sent_event=False,
    worker_consumer="worker.runtime.messages:Consumer",  # a message that is not a task: one line, counted, dropped
)


@worker_init.connect
def _serve_metrics(**_: object) -> None:
    if metrics.PROBLEM:  # PROMETHEUS_MULTIPROC_DIR unset and set too late: /metrics would be empty
        settings.PROBLEMS.append(metrics.PROBLEM)
        settings.exit_if_invalid()
    if settings.METRICS_PORT:
        metrics.serve_worker_metrics(settings.METRICS_PORT)


@worker_process_shutdown.connect
def _forget_process(pid: int | None = None, **_: object) -> None:
    if settings.METRICS_PORT and pid:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)


@worker_process_init.connect
def _warm(**_: object) -> None:
    """Build the worker's own engine in each process after fork (sessions are never shared across
    fork). One that cannot be built is an environment fault that every chunk meets again
    (``worker.runtime.engines.own_translator``): the worker then puts it back and stops consuming."""
    from worker.runtime.engines import own_translator
    from worker.runtime.faults import EnvironmentFault

    try:
        own_translator()
    except EnvironmentFault as err:
        log.error("%s", err)


_watchdog: Watchdog | None = None  # the main process's, from the worker's start
# What the chunk path and the watchdog import where they first need it. Imported in the main process before its
# watchdog thread starts: a process forked (at start, or to replace one) while that thread held a module's import
# lock would wait on that lock forever the first time it imported the module (a chunk past every time limit).
IMPORTED_BEFORE_FORK = (
    "jsonschema", "pyarrow", "pyarrow.parquet", "boto3", "boto3.s3.transfer", "botocore.config", "redis",
    "celery.schedules", "onnxruntime", "tokenizers", "sentencepiece", "prometheus_client",
)  # fmt: skip


@worker_init.connect
def _start_watchdog(sender: Any = None, **_: object) -> None:
    """In the main process, before it connects to the broker or forks its processes: this worker's
    instance (``worker.monitoring.fleet``) and its watchdog (liveness beat, heartbeat, chunks no live worker holds,
    a broker that lost its keys, completion, health), so a worker that waits for Redis or loads a model
    still beats."""
    global _watchdog
    for module in IMPORTED_BEFORE_FORK:
        importlib.import_module(module)
    languages.load()  # 0.8 s and ~60 MiB once, shared by the processes forked from here
    fleet.start_instance()
    health.mark_healthy()
    _watchdog = Watchdog(app, getattr(sender, "hostname", "") or "", [])
    _watchdog.start()


@worker_ready.connect
def _check_own_engine(sender: Any = None, **_: object) -> None:
    """In the main process: a worker whose own engine cannot be built takes no chunk until it can."""
    queues = [q.name for q in sender.task_consumer.queues] if sender is not None and sender.task_consumer else []
    if _watchdog is not None:
        _watchdog.queues = queues
    if sender is not None and not _own_engine_builds(queues):
        for queue in queues:
            sender.cancel_task_queue(queue)  # here, in the main thread: before any chunk is taken


def _own_engine_builds(queues: list[str]) -> bool:
    """Whether the worker's own engine builds (without sessions: those are made in each process after
    fork); if not, the worker is unhealthy until its check passes."""
    from worker.runtime.engines import own_translator
    from worker.runtime.faults import EnvironmentFault

    try:
        own_translator(sessions=False)
    except EnvironmentFault as err:
        health.mark_unhealthy(str(err), err.check, queues)
        return False
    return True


@task_received.connect
def _watch_job(request: Any = None, **_: object) -> None:
    """In the main process: this worker instance holds the chunk (``worker.monitoring.fleet.hold``), and the watchdog
    follows every job a chunk of which reaches this worker."""
    if _watchdog is not None and request is not None and request.name == TRANSLATE_CHUNK:
        try:
            output, job_id, _chunk = chunk_arguments(request.args, request.kwargs)
        except InvalidChunk:
            return  # a rogue message names no job to follow (the task drops it)
        fleet.hold(request.message.delivery_tag, _watchdog.hostname)
        _watchdog.saw(output, job_id)
