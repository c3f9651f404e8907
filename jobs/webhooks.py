"""Completion webhooks: when a job submitted with ``notify: {url, secret}`` ends, its final status is POSTed to
``url``, signed, retried with backoff for hours, at least once; each delivery of an event carries the same event
id and the same body.

    POST url
    Content-Type: application/json
    Fanyi-Event-Id: evt_6f1c...                    the same on every delivery of this event: deduplicate on it
    Fanyi-Signature: t=1765100000,v1=<hex>         HMAC-SHA256 with the secret of "<t>.<body>"; reject an old t
    {"id": "evt_6f1c...", "type": "job.ended", "job": {...GET /v1/jobs/{id}...}}

What is pending lives where a restart finds it: the URL and secret in the job's storage (``_notify.json``, never
in its manifest), the jobs watched and the events not yet delivered in Redis, and ``_NOTIFIED`` (or
``_NOTIFY_FAILED``, after ``give_up`` seconds of failures) in storage once done; a server starting up watches
again every job of its teams that has ``_notify.json`` and neither marker (Redis lost what it knew). The
``Deliverer`` runs in each ``python -m jobs serve`` process; servers share the work through Redis (an event is
claimed for ``LEASE`` seconds before it is sent).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from contract.cache import cache
from contract.job import TERMINAL, list_jobs
from contract.storage import open_storage

log = logging.getLogger("fanyi.webhooks")

WATCH_KEY = "fanyi:notify:watch"  # hash: job id -> output, jobs whose end is to be told
EVENTS_KEY = "fanyi:notify:events"  # hash: event id -> {"job", "output", "body", "created", "attempts"}
DUE_KEY = "fanyi:notify:due"  # sorted set: event id -> when to send it next
NOTIFY_FILE, NOTIFIED, FAILED = "_notify.json", "_NOTIFIED", "_NOTIFY_FAILED"
LEASE = 60.0  # seconds an event is held by the server sending it
TIMEOUT = 10.0  # seconds a receiver has to answer
FIRST_RETRY, MOST_BETWEEN = 2.0, 600.0  # backoff: 2 s, doubling, at most 10 minutes apart

_CLAIM = """
local found = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, member in ipairs(found) do redis.call('ZADD', KEYS[1], 'XX', ARGV[2], member) end
return found
"""


def watch(storage: Any, job_id: str, output: str, url: str, secret: str) -> None:
    """Tell ``url`` when job ``job_id`` ends: kept in its storage, watched through Redis."""
    storage.put(f"{job_id}/{NOTIFY_FILE}", json.dumps({"url": url, "secret": secret}).encode())
    cache().hset(WATCH_KEY, job_id, output)


def rearm(storage: Any, job_id: str, output: str) -> None:
    """A resumed job will end again: tell its ``url`` then too (a job without ``notify``: nothing)."""
    if storage.exists(f"{job_id}/{NOTIFY_FILE}"):
        storage.delete(f"{job_id}/{NOTIFIED}")
        storage.delete(f"{job_id}/{FAILED}")
        cache().hset(WATCH_KEY, job_id, output)


def forget(job_id: str) -> None:
    """A deleted job is not watched any more."""
    cache().hdel(WATCH_KEY, job_id)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The ``Fanyi-Signature`` header's value: what a receiver computes again to check a delivery."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


class Deliverer(threading.Thread):
    """Watches jobs and delivers their events, every ``poll`` seconds, until ``stop()``."""

    def __init__(
        self,
        outputs: Callable[[], Sequence[str]],
        status: Callable[[str, str], dict[str, Any]],
        *,
        poll: float = 2.0,
        give_up: float = 24 * 3600.0,
        clock: Callable[[], float] = time.time,
    ):
        super().__init__(name="webhooks", daemon=True)
        self.outputs, self.status, self.poll, self.give_up, self.clock = outputs, status, poll, give_up, clock
        self._stopping = threading.Event()

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        self._guarded(self.recover)
        while not self._stopping.wait(self.poll):
            self._guarded(self.once)

    def _guarded(self, step: Callable[[], None]) -> None:
        try:
            step()
        except Exception as err:  # noqa: BLE001 - Redis or storage away: what is pending waits for the next round
            log.warning("webhooks: %s (pending deliveries wait)", err)

    def recover(self) -> None:
        """Watch again every job with ``_notify.json`` and no marker (Redis may have lost what it knew)."""
        for output in self.outputs():
            storage = open_storage(output)
            for job_id in list_jobs(storage):
                if storage.exists(f"{job_id}/{NOTIFY_FILE}") and not _settled(storage, job_id):
                    cache().hsetnx(WATCH_KEY, job_id, output)

    def once(self) -> None:
        """One round: jobs that ended become events; events due are sent."""
        for job_id, output in list(cache().hgetall(WATCH_KEY).items()):
            self._look(job_id.decode(), output.decode())
        claim = cache().register_script(_CLAIM)
        now = self.clock()
        for event_id in claim(keys=[DUE_KEY], args=[now, now + LEASE, 20]):
            self._deliver(event_id.decode())

    def _look(self, job_id: str, output: str) -> None:
        status = self.status(job_id, output)
        if status["state"] not in TERMINAL:
            return
        event_id = "evt_" + hashlib.sha256(f"{output}|{job_id}|{status['state']}".encode()).hexdigest()[:24]
        body = json.dumps({"id": event_id, "type": "job.ended", "job": status}, sort_keys=True)
        record = {"job": job_id, "output": output, "body": body, "created": self.clock(), "attempts": 0}
        redis = cache()
        if redis.hsetnx(EVENTS_KEY, event_id, json.dumps(record)):
            redis.zadd(DUE_KEY, {event_id: self.clock()}, nx=True)
        redis.hdel(WATCH_KEY, job_id)

    def _deliver(self, event_id: str) -> None:
        redis = cache()
        raw = redis.hget(EVENTS_KEY, event_id)
        if raw is None:
            redis.zrem(DUE_KEY, event_id)
            return
        record = json.loads(raw)
        storage = open_storage(record["output"])
        target = json.loads(storage.read(f"{record['job']}/{NOTIFY_FILE}"))
        problem = _post(target["url"], target["secret"], event_id, record["body"].encode(), int(self.clock()))
        if problem is None:
            storage.put(f"{record['job']}/{NOTIFIED}", f"{event_id} delivered at {self.clock()}\n".encode())
            self._forget(event_id)
            return
        record["attempts"] += 1
        if self.clock() - record["created"] > self.give_up:
            storage.put(f"{record['job']}/{FAILED}", f"{event_id}: {problem}\n".encode())
            log.warning("webhooks: giving up on %s of job %s after %d attempts: %s", event_id, record["job"],
                        record["attempts"], problem)  # fmt: skip
            self._forget(event_id)
            return
        wait = min(MOST_BETWEEN, FIRST_RETRY * 2 ** (record["attempts"] - 1))
        log.info("webhooks: %s of job %s not delivered (%s): again in %.0f s", event_id, record["job"], problem, wait)
        redis.hset(EVENTS_KEY, event_id, json.dumps(record))
        redis.zadd(DUE_KEY, {event_id: self.clock() + wait})

    def _forget(self, event_id: str) -> None:
        redis = cache()
        redis.zrem(DUE_KEY, event_id)
        redis.hdel(EVENTS_KEY, event_id)


def _settled(storage: Any, job_id: str) -> bool:
    return bool(storage.exists(f"{job_id}/{NOTIFIED}") or storage.exists(f"{job_id}/{FAILED}"))


def _post(url: str, secret: str, event_id: str, body: bytes, timestamp: int) -> str | None:
    """Send one delivery; None if the receiver took it (2xx), else why not (never the secret)."""
    request = urllib.request.Request(url, data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    request.add_header("User-Agent", "fanyi-webhooks/1")
    request.add_header("Fanyi-Event-Id", event_id)
    request.add_header("Fanyi-Signature", signature(secret, timestamp, body))
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            return None if 200 <= answer.status < 300 else f"HTTP {answer.status}"
    except urllib.error.HTTPError as err:
        return f"HTTP {err.code}"
    except (OSError, ValueError) as err:
        return f"{type(err).__name__}: {err}"
