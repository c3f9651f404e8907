"""At-least-once delivery, made exactly-once in the output: real Redis, real S3 API, real worker processes."""

from __future__ import annotations

import collections
import json

from tests.jobs.conftest import corpus, jobs_cli, spec
from tests.services import wait_for
from worker.job import ROW_FIELDS, part_key, read_rows
from worker.storage import open_storage


def output_rows(output: str, job_id: str) -> list[dict]:
    storage = open_storage(output)
    rows = []
    for key in storage.list(f"{job_id}/parts"):
        rows += read_rows(storage.read(key))
    return rows


def submit(tmp_path, services, demo_artifact, count: int, **extra) -> str:
    path = spec(
        tmp_path / "spec.json",
        inputs=[str(corpus(tmp_path / "in.jsonl", count))],
        output=services["output"],
        artifact=demo_artifact,
        **extra,
    )
    result = jobs_cli("submit", str(path), env=services["env"])
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def wait(job_id: str, services, timeout: float = 240) -> dict:
    result = jobs_cli("wait", job_id, "--output", services["output"], "--timeout", str(timeout), env=services["env"])
    assert result.returncode == 0, result.stdout + result.stderr
    status = jobs_cli("status", job_id, "--output", services["output"], "--json", env=services["env"])
    return json.loads(status.stdout)


def assert_each_id_once(rows: list[dict], count: int) -> None:
    ids = collections.Counter(r["id"] for r in rows)
    assert set(ids) == {f"doc-{n:05d}" for n in range(count)}
    assert max(ids.values()) == 1


def test_a_job_on_s3_translates_every_document_once_with_the_row_contract(tmp_path, services, demo_artifact, workers):
    workers(concurrency=2)
    job_id = submit(tmp_path, services, demo_artifact, 50)
    status = wait(job_id, services)
    assert status["state"] == "succeeded" and status["done"] == 50 and status["errors"] == 0
    rows = output_rows(services["output"], job_id)
    assert_each_id_once(rows, 50)
    assert set(rows[0]) == set(ROW_FIELDS)
    first = next(r for r in rows if r["id"] == "doc-00001")
    assert first["translation"] == "汤姆有3个苹果。会议上午9点开始。" and first["status"] == "ok"
    summary = json.loads(open_storage(services["output"]).read(f"{job_id}/_SUCCESS"))
    assert summary["documents"] == 50 and len(summary["parts"]) == 3


def test_killed_worker_loses_no_document(tmp_path, services, demo_artifact, workers):
    first = workers(concurrency=1)
    job_id = submit(tmp_path, services, demo_artifact, 200)
    storage = open_storage(services["output"])
    wait_for(lambda: storage.exists(part_key(job_id, 1)), 120, "two parts")
    first.kill()  # mid-job: its current chunk is unacknowledged, the rest still queued
    workers(concurrency=1)
    status = wait(job_id, services)
    assert status["state"] == "succeeded"
    assert_each_id_once(output_rows(services["output"], job_id), 200)


def test_the_same_chunk_delivered_twice_at_once_gives_one_object(tmp_path, services, demo_artifact, workers):
    job_id = submit(tmp_path, services, demo_artifact, 20)  # one chunk, enqueued once by submit
    from celery import Celery

    app = Celery(broker=services["redis"])
    app.send_task("fanyi.translate_chunk", args=[services["output"], job_id, 0], queue="translate.cpu")
    workers(concurrency=2)  # both deliveries start together
    wait(job_id, services)
    storage = open_storage(services["output"])
    assert storage.list(f"{job_id}/parts") == [part_key(job_id, 0)]
    assert_each_id_once(output_rows(services["output"], job_id), 20)
