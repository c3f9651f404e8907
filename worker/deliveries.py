"""A chunk's deliveries that died, and the document each was on (a hash per chunk in the cache).

A delivery *dies* when it stops without ending: its process was killed (SIGKILL, out of memory, the
hard time limit) or it ran past the soft time limit. A delivery records that it is running when it
starts and clears it when it ends, however it ends (a part written, a retry, a requeue); so the next
delivery that finds the record knows its predecessor died, and which document it was on if it was
translating document by document. Retries and requeues are not deaths.

A document is poison only after it was in progress in **two** deliveries that died: one death is a
node drain or an OOM kill of a neighbour as often as a crash. Losing the record loses nothing but
that memory: the chunk is then treated as delivered for the first time.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from redis import Redis

log = logging.getLogger(__name__)
TTL = 7 * 24 * 3600  # seconds a chunk's record is kept
STRIKES = 2  # deaths a document must have been in progress for before it is skipped as poison


class Deliveries:
    def __init__(self, job_id: str, chunk: int, hostname: str = ""):
        self.key = f"fanyi:chunk:{job_id}:{chunk}"
        self.me = f"{hostname}:{os.getpid()}:{time.time():.0f}"

    def start(self) -> tuple[int, set[str]]:
        """Record this delivery as running; the chunk's deaths so far, and its poison documents."""
        from worker.metrics import cache

        try:
            redis = cache()
            if redis.hget(self.key, "running"):
                self._died(redis)
            redis.hset(self.key, "running", self.me)
            redis.expire(self.key, TTL)
            record = {k.decode(): v.decode() for k, v in redis.hgetall(self.key).items()}
        except Exception as err:  # noqa: BLE001 - the cache is a convenience
            log.warning("delivery record unavailable (%s): translating the chunk as a first delivery", err)
            return 0, set()
        poisoned = {
            k.removeprefix("strikes:") for k, v in record.items() if k.startswith("strikes:") and int(v) >= STRIKES
        }
        return int(record.get("deaths", 0)), poisoned

    def _died(self, redis: Redis) -> None:
        suspect = redis.hget(self.key, "suspect")
        redis.hincrby(self.key, "deaths", 1)
        if suspect:
            document = suspect.decode() if isinstance(suspect, bytes) else str(suspect)
            redis.hincrby(self.key, f"strikes:{document}", 1)
        redis.hdel(self.key, "suspect", "running")

    def suspect(self, doc_id: str | None) -> None:
        """The document this delivery is now on (None: between documents)."""
        from worker.metrics import cache

        try:
            if doc_id is None:
                cache().hdel(self.key, "suspect")
            else:
                cache().hset(self.key, "suspect", doc_id)
        except Exception as err:  # noqa: BLE001
            log.warning("delivery record unavailable: %s", err)

    def timed_out(self) -> None:
        """This delivery ran past the soft time limit: it counts as one that died."""
        from worker.metrics import cache

        try:
            self._died(cache())
        except Exception as err:  # noqa: BLE001
            log.warning("delivery record unavailable: %s", err)

    def end(self) -> None:
        """This delivery ended (whatever the outcome): it did not die."""
        from worker.metrics import cache

        try:
            cache().hdel(self.key, "running", "suspect")
        except Exception as err:  # noqa: BLE001
            log.warning("delivery record unavailable: %s", err)
