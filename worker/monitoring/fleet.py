"""What the workers know of each other, through the cache: who is alive and what it serves, and which
workers cannot load which artifact.

Each worker's watchdog writes its heartbeat (``fanyi:worker:<hostname>``: its health and the queues it
serves when healthy), expiring after three heartbeats, and in the broker which instance of the worker
beats under its name and on which of its connections to the broker (``fanyi:instance:<hostname>``,
``holder``): a worker restarted under the same node name (a container restarted in its pod) is another
``INSTANCE``, and a worker that lost its connection and made a new one no longer holds what it
received on the old one (Celery cancels those tasks; kombu cannot acknowledge them). Each message a
worker receives is recorded with its holder (``hold``, ``fanyi:held``), beside kombu's unacknowledged
messages and lost with them: a message is held while its holder beats (``held_alive``). A
worker that cannot load a job's artifact adds itself to that artifact's list
(``fanyi:unloadable:<path>``); when every live worker of the job's queue is on it, no worker can load
the artifact, and that is the job's fault, not a worker's (``worker.runtime.engines.job_translator``).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from contract import settings
from contract.cache import HELD_KEY, INSTANCE_KEY, UNLOADABLE_KEY, WORKER_KEY, WORKERS_KEY, best_effort, broker, cache

UNLOADABLE_TTL = 3600  # seconds an artifact's list outlives the last worker added to it
INSTANCE = ""  # this worker's instance, set in its main process before the pool forks (``start_instance``)
CONNECTION = 0  # the main process's connections to the broker so far (``connected``)


def start_instance() -> str:
    """Name this worker's instance (its main process's pid and start), inherited by its pool processes."""
    global INSTANCE
    INSTANCE = f"{os.getpid()}.{time.time_ns()}"
    return INSTANCE


def beat(hostname: str, queues: list[str], health: dict[str, Any], interval: float) -> None:
    """This worker is alive, with its ``health``, serving ``queues`` when healthy, as ``INSTANCE``."""
    expiry = max(1, int(3 * interval))
    record = json.dumps({**health, "serves": queues})
    pipeline = cache().pipeline().set(WORKER_KEY.format(hostname=hostname), record, ex=expiry)
    pipeline.sadd(WORKERS_KEY, hostname).execute()
    broker().set(INSTANCE_KEY.format(hostname=hostname), holder(), ex=expiry)


def holder() -> str:
    """This worker instance on its current connection to the broker."""
    return f"{INSTANCE}/{CONNECTION}"


def connected(hostname: str) -> None:
    """The main process (re)connected to the broker: what it received before is held by nobody. Unrecorded
    (the broker does not answer), the next heartbeat writes it."""
    global CONNECTION
    CONNECTION += 1
    key, seconds = INSTANCE_KEY.format(hostname=hostname), max(1, int(3 * settings.HEARTBEAT))
    best_effort("cannot record the new connection", lambda: broker().set(key, holder(), ex=seconds), None)


def hold(tag: str, hostname: str) -> None:
    """This worker instance received the message ``tag``: it holds it until it is acknowledged. Unrecorded,
    the message is put back once its grace is over."""
    record = json.dumps({"worker": hostname, "holder": holder()})
    best_effort("cannot record the message received", lambda: broker().hset(HELD_KEY, tag, record), None)


def held_alive(record: bytes | None) -> bool:
    """Whether a ``hold`` record names the holder that beats under its worker's name (True when the broker
    cannot tell)."""
    try:
        held = json.loads(record or b"null")
        beating = _beating(str(held["worker"]))
    except (ValueError, KeyError, TypeError):
        return False
    return beating is None or beating == held["holder"]


def live_workers(queue: str) -> set[str]:
    """The workers whose heartbeat is current and who serve ``queue`` when healthy; the others are taken
    off the list of workers."""
    client = cache()
    names = sorted(name.decode() for name in client.smembers(WORKERS_KEY))
    beats = client.mget([WORKER_KEY.format(hostname=name) for name in names]) if names else []
    gone = [name for name, raw in zip(names, beats) if raw is None]
    if gone:
        client.srem(WORKERS_KEY, *gone)
    return {name for name, raw in zip(names, beats) if raw is not None and queue in _serves(raw)}


def _serves(raw: bytes) -> list[str]:
    try:
        return list(json.loads(raw).get("serves", []))
    except (ValueError, AttributeError):
        return []


def instance_alive(hostname: str, instance: str) -> bool:
    """Whether ``instance`` is the one beating under ``hostname`` (True when the broker cannot tell)."""
    beating = _beating(hostname)
    return beating is None or beating.split("/")[0] == instance


def _beating(hostname: str) -> str | None:
    """The holder beating under ``hostname`` ("" when none does), None when the broker cannot tell."""
    key = INSTANCE_KEY.format(hostname=hostname)
    return best_effort(f"cannot tell whether {hostname} is alive", lambda: (broker().get(key) or b"").decode(), None)


def nobody_can_load(artifact: str, queue: str, worker: str | None = None) -> bool:
    """Whether every live worker of ``queue`` failed to load ``artifact`` (``worker`` just did). False
    when the cache cannot tell: the worker's fault then, put back a bounded number of times."""
    key = UNLOADABLE_KEY.format(artifact=artifact)

    def everyone_failed() -> bool:
        client = cache()
        if worker:
            client.pipeline().hset(key, worker, time.time()).expire(key, UNLOADABLE_TTL).execute()
        live = live_workers(queue)
        return bool(live) and live <= {name.decode() for name in client.hkeys(key)}  # none live: cannot tell

    return best_effort(f"cannot tell which workers can load {artifact}", everyone_failed, False)


def can_load(artifact: str, worker: str) -> None:
    """``worker`` loaded ``artifact``: take it off the artifact's list, if it is on it."""
    key = UNLOADABLE_KEY.format(artifact=artifact)
    best_effort(f"cannot record that {worker} loads {artifact}", lambda: cache().hdel(key, worker), None)
