"""A chunk's deliveries that died, and the document each was on (a hash per chunk in the cache).

A delivery *dies* when it stops without ending: its process was killed (SIGKILL, out of memory, the
hard time limit) or it ran past the soft time limit. A delivery records itself as the chunk's
``running`` one when it begins, keeps a lease (``fanyi:delivery:<id>``, refreshed by a thread of its
process every heartbeat, lapsing three heartbeats after that process is gone) and, however it ends
(a part written, a retry, a requeue, an early stop), erases only its own record. The next delivery
that finds another delivery's record waits for that lease: lapsed, the other one died (a death, and,
if it died alone, a strike for the document it recorded it was on); still refreshed after three heartbeats, it is a
live duplicate (the watchdog enqueued the chunk again during a Redis hiccup, or the broker
redelivered it): no death, no strike, both translate and the part is created once. Retries and
requeues are not deaths. Every read-and-change of the record is one Lua script, so a delivery never
erases or counts a record it did not read.

A document is poison only after it was in progress in **two** deliveries that died alone, their
worker still beating (``worker.monitoring.fleet``: the same instance, not one restarted under its name): a
worker killed as a whole (a node drain, an OOM kill of its container) is no document's doing, and
one death alone is an OOM kill of a neighbour as often as a crash. Every death counts towards
``FANYI_MAX_DEATHS``. Losing the record loses nothing but that memory: the chunk is then treated as
delivered for the first time.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from typing import Any

from contract import settings
from contract.cache import CHUNK_KEY, LEASE_KEY, best_effort, cache
from worker.monitoring import fleet

log = logging.getLogger(__name__)
TTL = 7 * 24 * 3600  # seconds a chunk's record is kept
STRIKES = 2  # deaths a document must have been in progress for before it is skipped as poison

# KEYS[1] the chunk's hash; ARGV[1] the delivery that died; ARGV[2] "1": only if it is still the running one;
# ARGV[3] "1": its document is struck. Counts the death, strikes the document it recorded it was on, erases
# its record.
_DIED = """
local running = redis.call('hget', KEYS[1], 'running')
if ARGV[2] == '1' and running ~= ARGV[1] then return 0 end
redis.call('hincrby', KEYS[1], 'deaths', 1)
local suspect = redis.call('hget', KEYS[1], 'suspect')
local prefix = ARGV[1] .. ' '
if suspect and string.sub(suspect, 1, #prefix) == prefix then
  if ARGV[3] == '1' then redis.call('hincrby', KEYS[1], 'strikes:' .. string.sub(suspect, #prefix + 1), 1) end
  redis.call('hdel', KEYS[1], 'suspect')
end
if running == ARGV[1] then redis.call('hdel', KEYS[1], 'running') end
return 1
"""
# KEYS[1] the chunk's hash; ARGV[1] a delivery; ARGV[2] "1": its suspect only. Erases that delivery's fields.
_ENDED = """
local prefix = ARGV[1] .. ' '
local suspect = redis.call('hget', KEYS[1], 'suspect')
if suspect and string.sub(suspect, 1, #prefix) == prefix then redis.call('hdel', KEYS[1], 'suspect') end
if ARGV[2] ~= '1' and redis.call('hget', KEYS[1], 'running') == ARGV[1] then redis.call('hdel', KEYS[1], 'running') end
return 1
"""


def _cache() -> Any:
    return cache()


def _alone(delivery: str) -> bool:
    """Whether a delivery that died died alone: its worker (the instance that made it) still beats, so
    its process was killed or crashed on its own. A worker killed as a whole (a node drain, an OOM kill
    of its container, a restart) is no document's doing. Unknown (no worker instance): alone."""
    try:
        hostname, instance, _pid, _since = delivery.rsplit(":", 3)
    except ValueError:
        return True  # recorded before deliveries named their worker's instance
    return not instance or fleet.instance_alive(hostname, instance)


class Deliveries:
    """This delivery of one chunk: ``start`` when it begins, ``end`` (or ``timed_out``) when it stops."""

    def __init__(self, job_id: str, chunk: int, hostname: str = ""):
        self.key = CHUNK_KEY.format(job=job_id, chunk=chunk)
        self.worker = hostname
        self.me = f"{hostname}:{fleet.INSTANCE}:{os.getpid()}:{time.time():.6f}"
        self.deaths = 0
        self.poisoned: set[str] = set()
        self._alive: threading.Event | None = None  # set when this delivery stops refreshing its lease

    @staticmethod
    def lease() -> float:
        """Seconds a delivery's lease outlives its last refresh: three heartbeats."""
        return 3 * settings.HEARTBEAT

    def start(self) -> tuple[int, set[str]]:
        """Record this delivery as running; the chunk's deaths so far, and its poison documents."""
        unavailable = "delivery record unavailable: translating the chunk as a first delivery"
        record: dict[str, str] = best_effort(unavailable, self._take, {})
        self.poisoned = {
            k.removeprefix("strikes:") for k, v in record.items() if k.startswith("strikes:") and int(v) >= STRIKES
        }
        self.deaths = int(record.get("deaths", 0))
        return self.deaths, self.poisoned

    def _take(self) -> dict[str, str]:
        """Record this delivery as the running one (counting the death of one it finds gone); the record."""
        redis = _cache()
        self._keep_alive(redis)  # first: the watchdog puts back a chunk whose delivery holds no lease
        found = redis.hget(self.key, "running")
        if found and found.decode() != self.me and self._gone(redis, found.decode()):
            redis.eval(_DIED, 1, self.key, found.decode(), "1", "1" if _alone(found.decode()) else "0")
        redis.hset(self.key, "running", self.me)
        redis.expire(self.key, TTL)
        return {k.decode(): v.decode() for k, v in redis.hgetall(self.key).items()}

    def _gone(self, redis: Any, other: str) -> bool:
        """Whether the delivery recorded as running died: its lease lapsed while it was still recorded.
        A lease still refreshed after three heartbeats is a live duplicate; a record erased meanwhile
        is a delivery that ended."""
        deadline = time.monotonic() + self.lease() + 1.0
        while True:
            if (redis.hget(self.key, "running") or b"").decode() != other:
                return False
            if not redis.exists(LEASE_KEY.format(delivery=other)):
                return True
            if time.monotonic() > deadline:
                log.warning("chunk %s is also being translated by %s, which is alive: no death", self.key, other)
                return False
            time.sleep(min(0.5, self.lease() / 6))

    def _keep_alive(self, redis: Any) -> None:
        """Take the lease and keep it, from a thread: also when this first take fails (a Redis hiccup)."""
        key, lease = LEASE_KEY.format(delivery=self.me), self.lease()
        stopped = self._alive = threading.Event()

        def refresh() -> None:
            while not stopped.wait(lease / 3):
                best_effort(
                    "delivery lease not refreshed", lambda: _cache().set(key, "1", px=math.ceil(lease * 1000)), 0
                )

        threading.Thread(target=refresh, name="fanyi-delivery-lease", daemon=True).start()
        redis.set(key, "1", px=math.ceil(lease * 1000))

    def _stop(self) -> None:
        if self._alive is not None:
            self._alive.set()
            self._alive = None
            lease = LEASE_KEY.format(delivery=self.me)
            best_effort("delivery lease not removed (it lapses on its own)", lambda: _cache().delete(lease), 0)

    def suspect(self, doc_id: str | None) -> None:
        """The document this delivery is now on (None: between documents)."""
        if doc_id is None:
            self._record(_ENDED, "1")
            return
        best_effort("delivery record unavailable", lambda: _cache().hset(self.key, "suspect", f"{self.me} {doc_id}"), 0)

    def timed_out(self) -> None:
        """This delivery ran past the soft time limit: it counts as one that died."""
        self._stop()
        self._record(_DIED, "0", "1")

    def end(self) -> None:
        """This delivery stopped (whatever the outcome): it did not die. Erases its own record only."""
        self._stop()
        self._record(_ENDED, "0")

    def _record(self, script: str, *flags: str) -> None:
        """Run one of the record's scripts (``_DIED``, ``_ENDED``) for this delivery."""
        best_effort("delivery record unavailable", lambda: _cache().eval(script, 1, self.key, self.me, *flags), 0)

    def count(self, what: str) -> int:
        """One more of ``what`` for this chunk (``put_back``: after an environment fault; ``job_gone``: its
        manifest was missing); how many so far, 0 when the cache cannot say."""

        def count() -> int:
            counted = int(_cache().hincrby(self.key, what, 1))
            _cache().expire(self.key, TTL)
            return counted

        return best_effort("delivery record unavailable: this chunk's tries are not bounded", count, 0)
