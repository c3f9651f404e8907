"""Whose fault it is, in one place; a chunk's deaths and poison documents; a worker's health."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError
from redis.exceptions import ConnectionError as RedisConnectionError

from contract.job import Job, failure_key, part_key, write_failed_chunk, write_job
from contract.spec import JobSpec
from contract.storage import LocalStorage
from worker.engine.artifact import ArtifactError
from worker.monitoring import health
from worker.runtime.deliveries import Deliveries
from worker.runtime.faults import ChunkFault, EnvironmentFault, Fault, checks_for, classify

ROOT = Path(__file__).resolve().parents[3]
HEARTBEAT = 0.2  # seconds: a delivery's lease lapses after three


def s3_error(status: int, code: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject"
    )


@pytest.mark.parametrize(
    ("err", "fault"),
    [
        (s3_error(503, "ServiceUnavailable"), Fault.TRANSIENT),
        (s3_error(500, "InternalError"), Fault.TRANSIENT),
        (s3_error(429, "SlowDown"), Fault.TRANSIENT),
        (EndpointConnectionError(endpoint_url="http://s3"), Fault.TRANSIENT),
        (RedisConnectionError("refused"), Fault.TRANSIENT),
        (TimeoutError("slow"), Fault.TRANSIENT),
        (s3_error(403, "InvalidAccessKeyId"), Fault.ENVIRONMENT),
        (s3_error(403, "AccessDenied"), Fault.ENVIRONMENT),
        (s3_error(404, "NoSuchBucket"), Fault.ENVIRONMENT),
        (NoCredentialsError(), Fault.ENVIRONMENT),
        (ArtifactError("artifact missing"), Fault.ENVIRONMENT),
        (EnvironmentFault("x", {"kind": "disk", "target": "/tmp"}), Fault.ENVIRONMENT),
        (OSError(errno.ENOSPC, "No space left on device"), Fault.ENVIRONMENT),
        (OSError(errno.EROFS, "Read-only file system"), Fault.ENVIRONMENT),
        (ChunkFault("its input is unreadable"), Fault.CHUNK),
        (FileNotFoundError(errno.ENOENT, "no such key"), Fault.CHUNK),
        (s3_error(404, "NoSuchKey"), Fault.CHUNK),
        (ValueError("bad value"), Fault.CHUNK),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, Fault) else v.value,
)
def test_each_error_is_classified_once(err: BaseException, fault: Fault) -> None:
    assert classify(err) is fault


@pytest.fixture
def cache(redis_url, monkeypatch):
    import redis

    from contract import cache, settings

    monkeypatch.setattr(settings, "CACHE_URL", redis_url)
    monkeypatch.setattr(settings, "BROKER_URL", redis_url)
    monkeypatch.setattr(settings, "HEARTBEAT", HEARTBEAT)
    cache.cache.cache_clear()
    cache.broker.cache_clear()
    redis.Redis.from_url(redis_url).flushdb()
    yield
    cache.cache.cache_clear()
    cache.broker.cache_clear()


def test_deliveries_that_end_are_not_deaths(cache) -> None:
    chunk = Deliveries("job", 0, "w1")
    assert chunk.start() == (0, set())
    chunk.end()
    assert Deliveries("job", 0, "w2").start() == (0, set())  # a retry or requeue is no death


def killed_delivery(
    redis_url: str, job: str, chunk: int, hostname: str, suspect: str | None = None, instance: str = ""
) -> None:
    """A delivery in a process of its own (of worker ``instance``) that records itself (and the document it is
    on), then is SIGKILLed."""
    code = (
        "import os, signal\n"
        "from worker.monitoring import fleet\n"
        "from worker.runtime.deliveries import Deliveries\n"
        f"fleet.INSTANCE = {instance!r}\n"
        f"d = Deliveries({job!r}, {chunk}, {hostname!r})\n"
        "d.start()\n" + (f"d.suspect({suspect!r})\n" if suspect else "") + "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = {**os.environ, "FANYI_CACHE_URL": redis_url, "FANYI_BROKER_URL": redis_url, "FANYI_HEARTBEAT": str(HEARTBEAT)}
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == -signal.SIGKILL, result.stderr[-2000:]


def test_a_document_is_poison_only_after_two_deliveries_died_on_it(cache, redis_url) -> None:
    killed_delivery(redis_url, "job", 1, "w1")  # killed while translating the chunk as a whole
    killed_delivery(redis_url, "job", 1, "w2", suspect="d7")  # then document by document, killed on d7
    third = Deliveries("job", 1, "w3")
    assert third.start() == (2, set())  # one strike: d7 is tried again
    third.suspect("d7")
    third.timed_out()  # past the soft time limit on d7 again: a second strike
    assert Deliveries("job", 1, "w4").start() == (3, {"d7"})


def test_a_document_is_struck_only_when_its_delivery_died_and_its_worker_did_not(cache, redis_url) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    beats = lambda hostname, instance: client.set(f"fanyi:instance:{hostname}", instance)
    beats("w1", "w1-first")  # w1 still beats as the instance that made the delivery: its process died alone
    killed_delivery(redis_url, "job", 4, "w1", suspect="d3", instance="w1-first")
    beats("w2", "w2-second")  # w2 was killed as a whole and restarted under its name: another instance
    killed_delivery(redis_url, "job", 4, "w2", suspect="d3", instance="w2-first")
    killed_delivery(redis_url, "job", 4, "w3", suspect="d3", instance="w3-first")  # w3 beats no more
    again = Deliveries("job", 4, "w4")
    assert again.start() == (3, set())  # three deaths, one strike: d3 is tried again
    again.end()
    killed_delivery(redis_url, "job", 4, "w1", suspect="d3", instance="w1-first")
    assert Deliveries("job", 4, "w4").start() == (4, {"d3"})  # a second death alone on d3: poison


def test_an_early_exit_does_not_erase_the_record_of_another_delivery(cache, redis_url) -> None:
    killed_delivery(redis_url, "job", 3, "w1", suspect="d2")  # died on d2
    early = Deliveries("job", 3, "w2")
    early.end()  # a delivery that stopped before it began (part exists, job cancelled, a retry)
    assert Deliveries("job", 3, "w3").start() == (1, set())  # the death is still counted


def test_a_live_duplicate_delivery_is_no_death_and_strikes_nothing(cache) -> None:
    live = Deliveries("job", 2, "w1")
    live.start()
    live.suspect("d1")  # alive, working on d1 (its worker's heartbeat key lost in a Redis failover, say)
    duplicate = Deliveries("job", 2, "w2")  # the chunk enqueued again, or redelivered
    assert duplicate.start() == (0, set())
    duplicate.end()
    live.suspect(None)
    live.end()
    assert Deliveries("job", 2, "w3").start() == (0, set())  # nothing recorded: no death, no strike


def test_health_records_the_fault_and_the_check_that_clears_it(tmp_path: Path, monkeypatch) -> None:
    from contract import settings

    monkeypatch.setattr(settings, "HEALTH_FILE", str(tmp_path / "health.json"))
    assert health.state() == {"healthy": True}
    missing = tmp_path / "not-yet"
    health.mark_unhealthy("disk gone", {"kind": "disk", "target": str(missing)}, ["translate.cpu"])
    current = health.state()
    assert not current["healthy"] and current["queues"] == ["translate.cpu"] and current["reason"] == "disk gone"
    (fault,) = current["faults"]
    assert not health.passes(fault["check"])
    missing.mkdir()
    assert health.passes(fault["check"])
    assert not health.passes({"kind": "artifact", "target": str(tmp_path)})  # no manifest there


def test_a_disk_fault_without_a_file_name_is_checked_on_the_disks_not_on_storage(tmp_path: Path, monkeypatch) -> None:
    from contract import settings

    monkeypatch.setattr(settings, "HEALTH_FILE", str(tmp_path / "state" / "health.json"))
    checks = checks_for(OSError(errno.ENOSPC, "No space left on device"), "s3://bucket/results")
    assert {c["kind"] for c in checks} == {"disk"}
    assert {c["target"] for c in checks} == {tempfile.gettempdir(), str(tmp_path / "state")}
    named = checks_for(OSError(errno.EACCES, "Permission denied", str(tmp_path / "x" / "f.tmp")), "s3://b/r")
    assert named == [{"kind": "disk", "target": str(tmp_path / "x")}]
    refused = checks_for(s3_error(403, "AccessDenied"), "s3://bucket/results")
    assert refused == [{"kind": "storage", "target": "s3://bucket/results"}]


def test_a_worker_is_healthy_again_only_when_every_fault_it_met_is_fixed(tmp_path: Path, monkeypatch) -> None:
    from types import SimpleNamespace

    from contract import settings
    from worker.monitoring.watchdog import Watchdog

    monkeypatch.setattr(settings, "HEALTH_FILE", str(tmp_path / "health.json"))
    consumed: list[str] = []
    app = SimpleNamespace(control=SimpleNamespace(add_consumer=lambda queue, **_: consumed.append(queue)))
    watchdog = Watchdog(app, "w1@host", ["translate.cpu"])
    full, fine = tmp_path / "full", tmp_path / "fine"
    fine.mkdir()
    health.mark_unhealthy("disk full", {"kind": "disk", "target": str(full)}, ["translate.cpu"])
    health.mark_unhealthy("another fault", {"kind": "disk", "target": str(fine)}, ["translate.gpu"])
    watchdog.recover()
    current = health.state()
    assert not current["healthy"] and consumed == []  # the first fault is not fixed
    assert "disk full" in current["reason"]
    full.mkdir()
    watchdog.recover()
    assert health.state()["healthy"] and sorted(consumed) == ["translate.cpu", "translate.gpu"]


def test_a_failure_record_is_written_only_with_the_error_part_it_explains(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    job = Job("job-1", JobSpec("job", ["in.jsonl"], "out", "a"), "id", [3, 3])
    write_job(storage, job)
    assert len(write_failed_chunk(storage, job, 0, "first delivery: its input is gone")) == 3
    assert json.loads(storage.read(failure_key(job.id, 0)))["reason"] == "first delivery: its input is gone"
    good = storage.read(part_key(job.id, 0))
    storage.delete(failure_key(job.id, 0))  # as if this part were a good one another delivery wrote
    assert write_failed_chunk(storage, job, 0, "a late duplicate") == []
    assert not storage.exists(failure_key(job.id, 0)) and storage.read(part_key(job.id, 0)) == good
