"""The exporter: backlog per queue (every priority list plus unacknowledged), job progress labelled
``job_id``, ended jobs leaving after the retention, Redis down said in a series, nothing but its own."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.infra.manifests import scaled_objects, value_at
from tests.jobs.conftest import corpus, jobs_cli, metric, spec, wait
from tests.services import ROOT, RedisServer, free_port, wait_for


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def scrape(port: int) -> str:
    code, text = get(port, "/metrics")
    assert code == 200, text
    return text


@contextmanager
def exporter_process(env: dict[str, str]) -> Iterator[int]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "worker.exporter", "--port", str(port)],
        env={**os.environ, "PYTHONPATH": str(ROOT), **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(lambda: _answers(port), 120, "the exporter")
        yield port
    finally:
        process.kill()
        process.wait()


def _answers(port: int) -> bool:
    try:
        return get(port, "/healthz")[0] == 200
    except OSError:
        return False


@pytest.fixture
def redis_of_its_own(monkeypatch) -> Iterator[RedisServer]:
    """A Redis this test may stop, with this process's broker and cache pointed at it."""
    from contract import cache, settings
    from worker.monitoring import exporter

    server = RedisServer().start()
    monkeypatch.setattr(settings, "CACHE_URL", server.url)
    monkeypatch.setattr(settings, "BROKER_URL", server.url)
    cache.cache.cache_clear()
    exporter.broker.cache_clear()
    yield server
    server.stop()
    cache.cache.cache_clear()
    exporter.broker.cache_clear()


def enqueue(url: str, per_priority: dict[int, int], queue: str = "translate.cpu") -> None:
    """Real chunk messages, sent the way ``jobs submit`` sends them."""
    from worker.runtime.app import app

    with app.connection_for_write(url) as connection:
        for priority, count in per_priority.items():
            for n in range(count):
                app.send_task("fanyi.translate_chunk", args=["s3://b/p", "job", n], queue=queue, priority=priority,
                              connection=connection)  # fmt: skip


@contextmanager
def delivered(url: str, count: int, queue: str = "translate.cpu") -> Iterator[list[Any]]:
    """Take ``count`` messages off the queue without acknowledging them, as a busy worker holds them."""
    from worker.runtime.app import app

    with app.connection_for_read(url) as connection:
        channel = connection.default_channel
        held = [channel.basic_get(queue, no_ack=False) for _ in range(count)]
        assert all(held)
        yield held


def test_the_backlog_is_every_priority_list_plus_what_workers_hold(redis_of_its_own) -> None:
    from worker.monitoring.exporter import backlog, broker

    enqueue(redis_of_its_own.url, {p: 8 for p in range(10)})  # 80 chunks, 8 in each priority list
    enqueue(redis_of_its_own.url, {0: 3}, queue="translate.gpu")
    assert backlog(broker()) == {"translate.cpu": 80, "translate.gpu": 3}
    with delivered(redis_of_its_own.url, 5):
        assert backlog(broker()) == {"translate.cpu": 80, "translate.gpu": 3}  # 75 waiting + 5 running
        assert sum(broker().llen(name) for name in _lists("translate.cpu")) == 75


def _lists(queue: str) -> list[str]:
    from contract import settings

    return settings.priority_lists(queue)


def test_ended_jobs_are_exported_for_the_retention_then_leave_the_registry(redis_of_its_own) -> None:
    from contract import cache
    from jobs import api
    from worker.monitoring.exporter import QueueCollector

    now = [time.time()]  # record_ended stamps the real time
    collector = QueueCollector(retention=3600, clock=lambda: now[0])
    for job, total, done in (("finished", 10, 10), ("cancelled", 10, 4), ("running", 10, 4)):
        api._register(job, "/results", total)
        cache.cache().hset(cache.JOB_PROGRESS_KEY.format(job=job), "documents", done)
    cache.record_ended("cancelled")  # what `jobs cancel` does

    def series() -> dict[str, dict[str, float]]:
        found: dict[str, dict[str, float]] = {}
        for family in collector.collect():
            for sample in family.samples:
                if "job_id" in sample.labels:
                    found.setdefault(sample.name, {})[sample.labels["job_id"]] = sample.value
        return found

    first = series()
    assert first["fanyi_job_documents_done"] == {"finished": 10, "cancelled": 4, "running": 4}
    assert set(first["fanyi_job_ended_timestamp_seconds"]) == {"finished", "cancelled"}
    now[0] += 3601
    later = series()
    assert later["fanyi_job_documents_done"] == {"running": 4}
    assert set(cache.cache().hkeys(cache.JOBS_KEY)) == {b"running"}
    assert not cache.cache().exists(cache.JOB_PROGRESS_KEY.format(job="finished"))
    cache.record_ended("running")
    cache.record_ended("running", ended=False)  # cancelled, then resumed: running again
    now[0] += 7200
    assert series()["fanyi_job_documents_done"] == {"running": 4}


def test_redis_down_is_a_series_not_an_error_and_the_backlog_says_503(redis_of_its_own) -> None:
    env = {"FANYI_BROKER_URL": redis_of_its_own.url}
    with exporter_process(env) as port:
        assert metric(scrape(port), "fanyi_exporter_redis_up") == 1
        assert json.loads(get(port, "/backlog")[1]) == {"translate.cpu": 0, "translate.gpu": 0}
        redis_of_its_own.stop()
        text = scrape(port)
        assert metric(text, "fanyi_exporter_redis_up") == 0 and "fanyi_queue_depth" not in text
        code, body = get(port, "/backlog")
        assert code == 503 and "Redis" in json.loads(body)["error"]


def test_progress_per_job_id_and_only_the_exporters_own_series(tmp_path, services, demo_artifact, workers) -> None:
    with exporter_process(services["env"]) as port:
        path = spec(
            tmp_path / "spec.json", inputs=[str(corpus(tmp_path / "in.jsonl", 60))], output=services["output"],
            artifact=demo_artifact, priority=3,
        )  # fmt: skip
        job_id = jobs_cli("submit", str(path), env=services["env"]).stdout.strip()
        text = scrape(port)
        assert metric(text, 'fanyi_queue_depth{priority="3",queue="translate.cpu"}') == 3
        assert metric(text, 'fanyi_queue_depth{priority="0",queue="translate.cpu"}') == 0
        assert metric(text, 'fanyi_backlog{queue="translate.cpu"}') == 3
        assert metric(text, "fanyi_workers_up") == 0
        names = {line.split("{")[0].split()[0] for line in text.splitlines() if line and not line.startswith("#")}
        assert all(name.startswith("fanyi_") for name in names), names  # no worker histograms, no process_*
        workers()
        wait(job_id, services)
        text = scrape(port)
        assert metric(text, f'fanyi_job_documents_done{{job_id="{job_id}"}}') == 60
        assert metric(text, f'fanyi_job_ended_timestamp_seconds{{job_id="{job_id}"}}') > 0
        assert metric(text, 'fanyi_backlog{queue="translate.cpu"}') == 0
        assert metric(text, "fanyi_workers_up") == 1
        import redis

        redis.Redis.from_url(services["redis"]).flushdb()  # the cache loses every counter ...
        text = scrape(port)  # ... and the exporter counts them again from storage
        assert metric(text, f'fanyi_job_documents_done{{job_id="{job_id}"}}') == 60
        assert metric(text, f'fanyi_job_documents{{job_id="{job_id}"}}') == 60


def desired_replicas(scaled_object: dict[str, Any], backlog: dict[str, Any]) -> int:
    """The replicas KEDA's HPA asks for from one metrics-api trigger of metricType AverageValue:
    ceil(value / targetValue) within [minReplicaCount, maxReplicaCount]; none while the value is not
    above the activation value (a ScaledObject may then scale to its minimum, zero included)."""
    scaling = scaled_object["spec"]
    (trigger,) = scaling["triggers"]
    assert (trigger["type"], trigger.get("metricType")) == ("metrics-api", "AverageValue")
    value = float(value_at(backlog, trigger["metadata"]["valueLocation"]))
    if value <= float(trigger["metadata"].get("activationTargetValue", 0)):
        return int(scaling.get("minReplicaCount", 0))
    wanted = math.ceil(value / float(trigger["metadata"]["targetValue"]))
    return min(max(wanted, int(scaling.get("minReplicaCount", 0))), int(scaling["maxReplicaCount"]))


def test_keda_asks_for_one_worker_per_eight_chunks_waiting_or_running(redis_of_its_own) -> None:
    """The rendered prod ScaledObjects, applied to what a real exporter serves at /backlog for real
    Redis lists: 72 chunks waiting across the priority lists plus 8 held by workers make 10 CPU pods."""
    objects = scaled_objects("prod")
    enqueue(redis_of_its_own.url, {0: 30, 4: 22, 9: 20})
    enqueue(redis_of_its_own.url, {5: 8})
    enqueue(redis_of_its_own.url, {0: 17}, queue="translate.gpu")
    with delivered(redis_of_its_own.url, 8), exporter_process({"FANYI_BROKER_URL": redis_of_its_own.url}) as port:
        code, body = get(port, "/backlog")
        assert code == 200, body
        backlog = json.loads(body)
        assert backlog == {"translate.cpu": 80, "translate.gpu": 17}
        assert desired_replicas(objects["fanyi-worker-cpu"], backlog) == 10
        assert desired_replicas(objects["fanyi-worker-gpu"], backlog) == 3
        assert desired_replicas(objects["fanyi-worker-cpu"], {"translate.cpu": 10_000}) == 50  # prod's maximum
        assert desired_replicas(objects["fanyi-worker-gpu"], {"translate.gpu": 0}) == 0  # idle GPUs go
