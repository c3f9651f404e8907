"""The watchdog's loops: one bad entry never stalls the others, a chunk goes back only when its delivery died,
a broker that lost its keys gets what it lost once.
Real Redis, real (local) storage; the watchdog runs in this process."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import redis

from contract.cache import LEASE_KEY, RUNNING_KEY
from contract.job import TRANSLATE_CHUNK, Job, write_failed_chunk, write_job
from contract.spec import JobSpec
from contract.storage import LocalStorage
from worker.monitoring.watchdog import Watchdog, chunk_field, record_running


@pytest.fixture
def cache(redis_url, monkeypatch):
    from contract import cache, settings

    monkeypatch.setattr(settings, "CACHE_URL", redis_url)
    cache.cache.cache_clear()
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    cache.cache.cache_clear()


def watchdog(app=None) -> Watchdog:
    app = app or SimpleNamespace(control=SimpleNamespace(add_consumer=lambda *_, **__: None))
    dog = Watchdog(app, "me@host", ["translate.cpu"], interval=0.2)
    dog.adopted = time.time()  # the cache's registry of jobs is read only where a test asks for it
    return dog


def job(storage: LocalStorage, job_id: str, chunks: int = 2) -> Job:
    made = Job(job_id, JobSpec("job", ["in.jsonl"], "out", "a"), "id", [1] * chunks)
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


@pytest.fixture
def app(cache, redis_url, monkeypatch):
    """The worker's Celery app, its broker this test's Redis database."""
    from contract import cache as cache_module
    from contract import settings
    from worker.runtime.app import app

    monkeypatch.setattr(settings, "BROKER_URL", redis_url)
    cache_module.broker.cache_clear()
    yield app
    cache_module.broker.cache_clear()


def delivered(app, job_id: str, chunk: int, **options) -> bytes:
    """A chunk message taken off its queue and never acknowledged, as a worker that was killed leaves it."""
    from contract import settings

    with app.connection_for_write(settings.BROKER_URL) as connection:
        app.send_task(TRANSLATE_CHUNK, args=["/out", job_id, chunk], queue="translate.cpu", connection=connection,
                      **options)  # fmt: skip
        channel = connection.default_channel
        message = channel.basic_get("translate.cpu", no_ack=False)
        channel.qos.restore_at_shutdown = False  # closing this connection is no acknowledgement either
        return message.delivery_tag.encode()


def queued(client: redis.Redis) -> list[int]:
    lists = [name for name in client.keys("translate.cpu*") if client.type(name) == b"list"]
    messages = [json.loads(raw) for name in lists for raw in client.lrange(name, 0, -1)]
    return sorted(json.loads(base64.b64decode(m["body"]))[0][2] for m in messages)


def test_a_chunk_no_live_worker_holds_is_put_back_and_no_other_is(app, cache) -> None:
    tags = {chunk: delivered(app, "job", chunk) for chunk in (0, 1, 3, 4)}
    tags[2] = delivered(app, "job", 2, countdown=3600)  # a retry waiting for its countdown
    cache.hset("unacked", b"garbage", b"{not json")
    for tag in [*tags.values(), b"garbage"]:
        cache.zadd("unacked_index", {tag: time.time() - 100})  # delivered long ago
    cache.set("fanyi:instance:live@host", "i-1/2")  # instance i-1, on its second connection to the broker
    cache.set("fanyi:instance:restarted@host", "i-3/1")  # restarted under its name: another instance beats
    held = {1: ("live@host", "i-1/2"), 2: ("live@host", "i-1/2"), 3: ("restarted@host", "i-2/1"),
            4: ("live@host", "i-1/1")}  # 0: nobody's; 4: received before the live worker reconnected  # fmt: skip
    for chunk, (worker, holder) in held.items():
        cache.hset("fanyi:held", tags[chunk], json.dumps({"worker": worker, "holder": holder}))
    cache.hset("fanyi:held", b"acknowledged-since", json.dumps({"worker": "live@host", "holder": "i-1/2"}))
    record_running("/out", "job", 1, "live@host", "delivery-1")
    cache.set(LEASE_KEY.format(delivery="delivery-1"), "1")
    dead = {"worker": "gone@host", "delivery": "delivery-5", "since": time.time() - 100}
    cache.hset(RUNNING_KEY, chunk_field("/out", "job", 5), json.dumps(dead))  # a delivery long gone
    cache.hset(RUNNING_KEY, "not a record", b"{not json")
    watchdog(app).restore_stale()
    assert queued(cache) == [0, 3, 4]
    assert set(cache.hkeys("unacked")) == {tags[1], tags[2], b"garbage"}
    assert b"acknowledged-since" not in cache.hkeys("fanyi:held")
    assert cache.hkeys(RUNNING_KEY) == [chunk_field("/out", "job", 1).encode()]  # the live one's record stays


def test_a_broker_that_lost_its_keys_gets_every_chunk_without_a_part_once(app, cache, tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    made = job(storage, "job", chunks=3)
    write_failed_chunk(storage, made, 1, "its input is gone")  # chunk 1 has its part
    first, second = watchdog(app), watchdog(app)
    for dog in (first, second):
        dog.saw(str(tmp_path), "job")
        dog.check_broker()  # the broker's mark, as it is
    first.saw(str(tmp_path), "gone")  # a job whose prefix was deleted meanwhile
    assert queued(cache) == []
    cache.flushdb()  # FLUSHALL, or a restart without persistence
    for dog in (first, second):
        dog.check_broker()
    assert queued(cache) == [0, 2]  # once, by one of the two
    assert first.lost == second.lost == set()  # the gone job is not tried again and again
    first.check_broker()
    assert queued(cache) == [0, 2]  # the same mark: nothing more
    first.broker_mark = "a mark from before a restart that kept its queues (an append-only file)"
    cache.delete(*cache.keys("fanyi:reenqueue:*"))  # so that this watchdog looks at what is queued itself
    first.check_broker()
    assert queued(cache) == [0, 2]  # what is queued is not enqueued twice


def test_a_job_that_stalls_gets_the_chunks_that_have_neither_a_part_nor_a_message(app, cache, tmp_path) -> None:
    storage = LocalStorage(tmp_path)
    made = job(storage, "job", chunks=3)
    write_failed_chunk(storage, made, 1, "its input is gone")  # chunk 1 has its part
    from contract import settings

    with app.connection_for_write(settings.BROKER_URL) as connection:  # chunk 0 waits in the queue
        app.send_task(TRANSLATE_CHUNK, **made.chunk_message(str(tmp_path), 0), connection=connection)
    dog = watchdog(app)  # chunk 2's message was lost: taken off the queue by a worker killed at once
    dog.adopted = 0.0  # and no chunk of the job reached this worker: it learns of it from the registry
    cache.hset("fanyi:jobs", "job", str(tmp_path))
    cache.hset("fanyi:progress:job", mapping={"total": 3, "documents": 1})
    dog.finalize_jobs()
    assert queued(cache) == [0]  # a first look: progress so far
    dog.jobs[(str(tmp_path), "job")] = (0.0, 1)  # a minute later, still one part
    dog.finalize_jobs()
    assert queued(cache) == [0, 2]
