"""What the workers know of each other, through the cache: who is alive and what it serves, and which
workers cannot load which artifact.

Each worker's watchdog writes its heartbeat (``fanyi:worker:<hostname>``: its health, the queues it
serves when healthy, and its ``INSTANCE``), expiring after three heartbeats. A worker restarted under
the same node name (a container restarted in its pod) is another instance under the same key. A
worker that cannot load a job's artifact adds itself to that artifact's list
(``fanyi:unloadable:<path>``); when every live worker of the job's queue is on it, no worker can load
the artifact, and that is the job's fault, not a worker's (``worker.tasks._translator``).
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

from contract.cache import UNLOADABLE_KEY, WORKER_KEY, cache

log = logging.getLogger(__name__)
UNLOADABLE_TTL = 3600  # seconds an artifact's list outlives the last worker added to it
INSTANCE = ""  # this worker's instance, set in its main process before the pool forks (``start_instance``)


def start_instance() -> str:
    """Name this worker's instance (its main process's pid and start), inherited by its pool processes."""
    global INSTANCE
    INSTANCE = f"{os.getpid()}.{time.time_ns()}"
    return INSTANCE


def beat(hostname: str, queues: list[str], health: dict[str, Any], interval: float) -> None:
    """This worker is alive, with its ``health``, serving ``queues`` when healthy."""
    record = json.dumps({**health, "serves": queues, "instance": INSTANCE})
    cache().set(WORKER_KEY.format(hostname=hostname), record, ex=max(1, int(3 * interval)))


def live_workers(queue: str) -> set[str]:
    """The workers whose heartbeat is current and who serve ``queue`` when healthy."""
    client, found = cache(), set()
    for key in client.scan_iter(match=WORKER_KEY.format(hostname="*"), count=500):
        raw = client.get(key)
        try:
            serves = json.loads(raw or b"{}").get("serves", [])
        except ValueError:
            continue
        if queue in serves:
            found.add(key.decode().removeprefix(WORKER_KEY.format(hostname="")))
    return found


def instance_alive(hostname: str, instance: str) -> bool:
    """Whether ``hostname``'s heartbeat is current and written by ``instance`` (True when the cache cannot tell)."""
    try:
        raw = cache().get(WORKER_KEY.format(hostname=hostname))
        return raw is not None and json.loads(raw).get("instance") == instance
    except ValueError:
        return False
    except Exception as err:  # noqa: BLE001 - a cache
        log.warning("cannot tell whether %s is alive (%s)", hostname, err)
        return True


def nobody_can_load(artifact: str, queue: str, worker: str | None = None) -> bool:
    """Whether every live worker of ``queue`` failed to load ``artifact`` (``worker`` just did). False
    when the cache cannot tell: the worker's fault then, put back a bounded number of times."""
    key = UNLOADABLE_KEY.format(artifact=artifact)
    try:
        client = cache()
        if worker:
            client.pipeline().hset(key, worker, time.time()).expire(key, UNLOADABLE_TTL).execute()
        failed = {name.decode() for name in client.hkeys(key)}
        live = live_workers(queue)
    except Exception as err:  # noqa: BLE001 - a cache
        log.warning("cannot tell which workers can load %s (%s)", artifact, err)
        return False
    return bool(live) and live <= failed  # no live worker known: the cache cannot tell


def can_load(artifact: str, worker: str) -> None:
    """``worker`` loaded ``artifact``: take it off the artifact's list, if it is on it."""
    try:
        cache().hdel(UNLOADABLE_KEY.format(artifact=artifact), worker)
    except Exception as err:  # noqa: BLE001 - a cache
        log.warning("cannot record that %s loads %s (%s)", worker, artifact, err)
