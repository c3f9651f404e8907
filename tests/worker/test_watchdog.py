"""The watchdog's loops: one bad entry never stalls the others, and a requeue never erases a newer record.
Real Redis, real (local) storage; the watchdog runs in this process."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import redis

from contract.cache import RUNNING_KEY
from contract.job import Job, write_failed_chunk, write_job
from contract.storage import LocalStorage
from worker.watchdog import Watchdog, chunk_field, record_running


@pytest.fixture
def cache(redis_url, monkeypatch):
    from contract import cache, settings

    monkeypatch.setattr(settings, "CACHE_URL", redis_url)
    cache.cache.cache_clear()
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    cache.cache.cache_clear()


def watchdog() -> Watchdog:
    app = SimpleNamespace(control=SimpleNamespace(add_consumer=lambda *_, **__: None))
    return Watchdog(app, "me@host", ["translate.cpu"], interval=0.2)


def job(storage: LocalStorage, job_id: str, chunks: int = 2) -> Job:
    made = Job(job_id, {"artifact": "a"}, "id", [1] * chunks)
    write_job(storage, made)
    return made


def test_a_job_that_is_gone_or_cancelled_is_forgotten_and_does_not_stall_the_others(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    job(storage, "gone")
    (tmp_path / "gone" / "_job.json").unlink()  # the job's prefix was deleted
    cancelled = job(storage, "cancelled")
    storage.put(cancelled.key("_CANCELLED"), b"cancelled\n")
    done = job(storage, "done")
    for chunk in range(2):
        write_failed_chunk(storage, done, chunk, "its input is gone")
    pending = job(storage, "pending")
    dog = watchdog()
    for job_id in ("gone", "cancelled", "done", "pending"):
        dog.saw(str(tmp_path), job_id)
    dog.finalize_jobs()
    assert storage.exists("done/_SUCCESS")
    assert set(dog.jobs) == {(str(tmp_path), "pending")}  # gone, cancelled and ended jobs are forgotten
    assert not storage.exists(pending.key("_SUCCESS"))


def test_one_bad_running_record_does_not_stall_requeueing_the_others(cache, monkeypatch) -> None:
    old = time.time() - 100
    cache.hset(RUNNING_KEY, "not a record", b"{not json")
    cache.hset(RUNNING_KEY, chunk_field("/out", "gone", 0), json.dumps({"worker": "dead@host", "since": old}))
    cache.hset(RUNNING_KEY, chunk_field("/out", "alive", 3), json.dumps({"worker": "dead@host", "since": old}))
    enqueued = []

    def enqueue(output: str, job_id: str, chunk: int) -> None:
        if job_id == "gone":
            raise FileNotFoundError("no job 'gone' under /out")
        enqueued.append((output, job_id, chunk))

    dog = watchdog()
    monkeypatch.setattr(dog, "_enqueue", enqueue)
    dog.requeue_orphans()
    assert enqueued == [("/out", "alive", 3)]
    assert cache.hkeys(RUNNING_KEY) == []  # the bad record and the gone job's are dropped, the requeued one too


def test_requeueing_an_orphan_keeps_the_record_its_new_delivery_wrote(cache, monkeypatch) -> None:
    field = chunk_field("/out", "job", 0)
    cache.hset(RUNNING_KEY, field, json.dumps({"worker": "dead@host", "since": time.time() - 100}))
    dog = watchdog()
    # the chunk enqueued again starts at once on another worker, before the watchdog clears the old record
    new_delivery = lambda output, job_id, chunk: record_running(output, job_id, chunk, "new@host")
    monkeypatch.setattr(dog, "_enqueue", new_delivery)
    dog.requeue_orphans()
    assert json.loads(cache.hget(RUNNING_KEY, field))["worker"] == "new@host"
