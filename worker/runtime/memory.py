"""The translation memory a job's chunks share (``worker.engine.memory`` is what the engine calls): one
Redis hash per scope, by the job spec's ``memory`` (``job``, ``shared`` or ``off``) and ``memory_prefix``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from contract import cache, settings
from contract.spec import JobSpec
from worker.engine.memory import Memory

log = logging.getLogger(__name__)


class RedisMemory(Memory):
    """One Redis hash per namespace (``contract.cache.memory_namespace``): it expires ``ttl`` seconds after its
    last use and stops growing at about ``capacity`` entries (later text is translated, not kept). A Redis
    that fails is a memory that is empty, for the rest of this object's life (one chunk): the chunk is
    translated all the same, and waits for Redis once, not at every call."""

    def __init__(self, client: Any, namespace: str, *, ttl: float, capacity: int) -> None:
        self.client, self.namespace, self.ttl, self.capacity = client, namespace, int(ttl), capacity
        self.failed = False

    def get(self, keys: Sequence[str]) -> list[str | None]:
        found = self._call("read", self._read, keys) if keys and not self.failed else None
        return [None] * len(keys) if found is None else [None if raw is None else raw.decode() for raw in found]

    def put(self, entries: Mapping[str, str]) -> None:
        if not self.failed:
            self._call("written", self._write, entries)

    def _read(self, keys: Sequence[str]) -> list[bytes | None]:
        found, _ = self.client.pipeline().hmget(self.namespace, list(keys)).expire(self.namespace, self.ttl).execute()
        return list(found)

    def _write(self, entries: Mapping[str, str]) -> None:
        if self.client.hlen(self.namespace) < self.capacity:  # two writers may pass together: about the cap
            self.client.pipeline().hset(self.namespace, mapping=dict(entries)).expire(
                self.namespace, self.ttl
            ).execute()

    def _call(self, what: str, action: Callable[[Any], Any], argument: Any) -> Any:
        import redis

        try:
            return action(argument)
        except redis.RedisError as err:  # only Redis's own: a task's time limit must reach the task
            self.failed = True
            log.warning("translation memory %s cannot be %s (%s): translating without it", self.namespace, what, err)
            return None


def job_memory(output: str, job_id: str, spec: JobSpec) -> Memory | None:
    """The memory a job's chunks share, by its spec's ``memory`` scope (and ``memory_prefix``); None when
    it is ``off``."""
    namespace = cache.memory_namespace(output, job_id, spec.memory, spec.memory_prefix)
    if namespace is None:
        return None
    return RedisMemory(cache.cache(), namespace, ttl=settings.MEMORY_TTL, capacity=settings.MEMORY_ENTRIES)


def forget_job_memory(output: str, job_id: str, spec: JobSpec) -> None:
    """Free an ended job's own memory now rather than after its TTL (a shared one stays for later jobs)."""
    if spec.memory == "job":
        unkept = f"the translation memory of job {job_id} cannot be cleared: it expires on its own"
        cache.best_effort(unkept, lambda: cache.clear_memory(output, job_id), None)
