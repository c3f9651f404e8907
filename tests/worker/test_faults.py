"""Whose fault it is, in one place; a chunk's deaths and poison documents; a worker's health."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError
from redis.exceptions import ConnectionError as RedisConnectionError

from worker import health
from worker.artifact import ArtifactError
from worker.deliveries import Deliveries
from worker.faults import ChunkFault, EnvironmentFault, Fault, classify


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

    from worker import metrics, settings

    monkeypatch.setattr(settings, "CACHE_URL", redis_url)
    metrics.cache.cache_clear()
    redis.Redis.from_url(redis_url).flushdb()
    yield
    metrics.cache.cache_clear()


def test_deliveries_that_end_are_not_deaths(cache) -> None:
    chunk = Deliveries("job", 0, "w1")
    assert chunk.start() == (0, set())
    chunk.end()
    assert Deliveries("job", 0, "w2").start() == (0, set())  # a retry or requeue is no death


def test_a_document_is_poison_only_after_two_deliveries_died_on_it(cache) -> None:
    first = Deliveries("job", 1, "w1")
    first.start()  # ... and the process is killed while translating the chunk as a whole
    second = Deliveries("job", 1, "w2")
    assert second.start() == (1, set())  # one death, no suspect yet: now document by document
    second.suspect("d7")  # ... killed on d7 (a node drain, say)
    third = Deliveries("job", 1, "w3")
    assert third.start() == (2, set())  # one strike: d7 is tried again
    third.suspect("d7")
    third.timed_out()  # past the soft time limit on d7 again: a second strike
    assert Deliveries("job", 1, "w4").start() == (3, {"d7"})


def test_health_records_the_fault_and_the_check_that_clears_it(tmp_path: Path, monkeypatch) -> None:
    from worker import settings

    monkeypatch.setattr(settings, "HEALTH_FILE", str(tmp_path / "health.json"))
    assert health.state() == {"healthy": True}
    missing = tmp_path / "not-yet"
    health.mark_unhealthy("disk gone", {"kind": "disk", "target": str(missing)}, ["translate.cpu"])
    current = health.state()
    assert not current["healthy"] and current["queues"] == ["translate.cpu"] and current["reason"] == "disk gone"
    assert not health.passes(current["check"])
    missing.mkdir()
    assert health.passes(current["check"])
    assert not health.passes({"kind": "artifact", "target": str(tmp_path)})  # no manifest there
