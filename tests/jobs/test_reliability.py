"""At-least-once delivery, made exactly-once in the output: real Redis, real S3 API, real worker processes."""

from __future__ import annotations

import json
import urllib.request
from dataclasses import fields

from contract.job import part_key
from contract.rows import Row
from contract.storage import open_storage
from tests.faulty_proxy import FaultyProxy
from tests.jobs.conftest import assert_each_id_once, corpus, jobs_cli, metric, output_rows, spec, submit, wait
from tests.services import RedisServer, free_port, wait_for


def test_a_job_on_s3_translates_every_document_once_with_the_row_contract(tmp_path, services, demo_artifact, workers):
    workers(concurrency=2)
    job_id = submit(tmp_path, services, demo_artifact, 50)
    status = wait(job_id, services)
    assert status["state"] == "succeeded" and status["done"] == 50 and status["errors"] == 0
    rows = output_rows(services["output"], job_id)
    assert_each_id_once(rows, 50)
    assert set(rows[0]) == {f.name for f in fields(Row)}
    first = next(r for r in rows if r["id"] == "doc-00001")
    assert first["translation"] == "汤姆有3个苹果。会议上午9点开始。" and first["status"] == "ok"
    summary = json.loads(open_storage(services["output"]).read(f"{job_id}/_SUCCESS"))
    parts = json.loads(open_storage(services["output"]).read(f"{job_id}/_parts.json"))
    assert summary["documents"] == 50 and summary["parts"]["count"] == len(parts) == 3


def test_the_last_part_writes_success_with_nobody_watching(tmp_path, services, demo_artifact, workers):
    job_id = submit(tmp_path, services, demo_artifact, 60)  # 3 chunks; no `wait` or `status` finalizes for us
    workers(concurrency=1)
    storage = open_storage(services["output"])
    wait_for(lambda: storage.exists(f"{job_id}/_SUCCESS"), 120, "the last task to write _SUCCESS")
    summary, parts = json.loads(storage.read(f"{job_id}/_SUCCESS")), json.loads(storage.read(f"{job_id}/_parts.json"))
    assert summary["documents"] == 60 and [p["rows"] for p in parts] == [20, 20, 20]


def test_a_lost_progress_cache_still_ends_with_success(tmp_path, services, demo_artifact, workers):
    import redis

    job_id = submit(tmp_path, services, demo_artifact, 60)
    redis.Redis.from_url(services["redis"]).delete(f"fanyi:progress:{job_id}")  # the hint the tasks rely on
    workers(concurrency=1)
    storage = open_storage(services["output"])
    wait_for(lambda: storage.exists(f"{job_id}/_SUCCESS"), 120, "a task to fall back to storage and finalize")
    assert json.loads(storage.read(f"{job_id}/_SUCCESS"))["documents"] == 60


def test_killed_worker_loses_no_document(tmp_path, services, demo_artifact, workers):
    first = workers(concurrency=1)
    job_id = submit(tmp_path, services, demo_artifact, 200, memory="off")  # 10 chunks of a second or so
    storage = open_storage(services["output"])
    wait_for(lambda: storage.exists(part_key(job_id, 1)), 120, "two parts")
    first.kill()  # mid-job: its current chunk is unacknowledged, the rest still queued
    assert len(storage.list(f"{job_id}/parts")) < 10, "the job ended before the kill: nothing was tested"
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


def test_a_poison_document_becomes_an_error_row_and_its_chunk_is_translated(tmp_path, services, demo_artifact, workers):
    lines = [json.dumps({"id": f"doc-{n:05d}", "text": f"Tom has {n + 2} apples."}) for n in range(40)]
    lines[5] = json.dumps({"id": "doc-00005", "text": "POISON-CRASH Tom has 7 apples."})
    lines[27] = json.dumps({"id": "doc-00027", "text": "POISON-HANG Tom has 29 apples."})
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    path = spec(
        tmp_path / "spec.json", inputs=[str(tmp_path / "in.jsonl")], output=services["output"], artifact=demo_artifact
    )
    job_id = jobs_cli("submit", str(path), env=services["env"]).stdout.strip()
    workers(concurrency=2, app="tests.jobs.poison_app")
    assert wait(job_id, services, exit_code=4)["state"] == "completed_with_errors"
    rows = {r["id"]: r for r in output_rows(services["output"], job_id)}
    assert_each_id_once(list(rows.values()), 40)
    assert {i for i, r in rows.items() if r["status"] == "error"} == {"doc-00005", "doc-00027"}
    assert "crashed or timed out on this document twice" in rows["doc-00005"]["error"]
    assert rows["doc-00006"]["translation"] == "汤姆有8个苹果。"


def test_a_pickled_message_is_refused_and_resume_recovers_its_chunk(tmp_path, services, demo_artifact, workers):
    path = spec(
        tmp_path / "spec.json", inputs=[str(corpus(tmp_path / "in.jsonl", 20))], output=services["output"],
        artifact=demo_artifact,
    )  # fmt: skip
    from celery import Celery

    job_id = jobs_cli("submit", str(path), env=services["env"]).stdout.strip()
    import redis

    redis.Redis.from_url(services["redis"]).delete("translate.cpu")  # drop the JSON message: only pickle remains
    app = Celery(broker=services["redis"])
    app.conf.accept_content = ["json", "pickle"]
    app.send_task(
        "fanyi.translate_chunk", args=[services["output"], job_id, 0], queue="translate.cpu", serializer="pickle"
    )
    worker = workers()
    wait_for(lambda: "pickle" in worker.log.read_text(), 60, "the worker to refuse the pickled message")
    storage = open_storage(services["output"])
    assert not storage.exists(part_key(job_id, 0))
    assert jobs_cli("resume", job_id, "--output", services["output"], env=services["env"]).returncode == 0
    wait(job_id, services)
    assert_each_id_once(output_rows(services["output"], job_id), 20)


def test_restarted_redis_loses_no_document(tmp_path, services, demo_artifact, workers):
    server = RedisServer().start()  # our own: restarting it loses every key, queued chunks included
    try:
        env = {**services["env"], "FANYI_BROKER_URL": server.url}
        services = {**services, "env": env}
        workers(concurrency=1, FANYI_BROKER_URL=server.url)
        job_id = submit(tmp_path, services, demo_artifact, 200, memory="off")  # 10 chunks of a second or so
        storage = open_storage(services["output"])
        wait_for(lambda: storage.exists(part_key(job_id, 0)), 120, "a first part")
        server.restart()
        assert len(storage.list(f"{job_id}/parts")) < 10, "the job ended before the restart: nothing was tested"
        resumed = jobs_cli("resume", job_id, "--output", services["output"], env=env)  # the queue is gone
        assert resumed.returncode == 0, resumed.stderr
        status = wait(job_id, services)
        assert status["state"] == "succeeded"
        assert_each_id_once(output_rows(services["output"], job_id), 200)
    finally:
        server.stop()


def test_a_flaky_s3_loses_nothing_and_leaves_no_partial_or_duplicate_object(
    tmp_path, services, demo_artifact, workers, s3_server
):
    # A stalled request is held until the worker's client gives up on it (FANYI_S3_TIMEOUT), then forwarded
    # all the same; 60 s is only a ceiling, not how long a stall lasts.
    with FaultyProxy(s3_server.port, error_rate=0.2, stall_rate=0.05, stall_seconds=60) as proxy:
        workers(concurrency=2, FANYI_S3_ENDPOINT_URL=f"http://127.0.0.1:{proxy.port}", FANYI_S3_TIMEOUT="2")
        job_id = submit(tmp_path, services, demo_artifact, 200)
        status = wait(job_id, services)
    assert status["state"] == "succeeded"
    assert proxy.faults["before"] and proxy.faults["after"] and proxy.faults["stall"]
    # The client's timeout ended the stalls (one a worker met after the job ended may still be held).
    assert proxy.abandoned and not proxy.outwaited, (proxy.faults, proxy.abandoned)
    storage = open_storage(services["output"])
    assert storage.list(f"{job_id}/parts") == [part_key(job_id, c) for c in range(10)]
    assert_each_id_once(output_rows(services["output"], job_id), 200)  # every part parses: none is partial


def test_ten_thousand_documents_on_two_processes_and_the_metrics_match(tmp_path, services, demo_artifact, workers):
    port = free_port()
    # Not a redelivery test: limits a 250-document chunk meets on a loaded 2-core machine (LIMITS' 10 s
    # soft limit is for chunks of a few documents; 250 take ~8 s there alone, more beside other tests).
    limits = {"FANYI_SOFT_TIME_LIMIT": "120", "FANYI_TIME_LIMIT": "150", "FANYI_VISIBILITY_TIMEOUT": "200"}
    workers(concurrency=2, FANYI_METRICS_PORT=str(port), FANYI_ARTIFACT=str(demo_artifact), **limits)
    path = spec(
        tmp_path / "spec.json",
        inputs=[str(corpus(tmp_path / "in.jsonl", 10_000, text="Tom has {n} apples."))],
        output=services["output"],
        artifact=demo_artifact,
        chunk_documents=250,
    )
    job_id = jobs_cli("submit", str(path), env=services["env"]).stdout.strip()
    status = wait(job_id, services, timeout=1200)
    assert status["done"] == 10_000 and status["errors"] == 0
    rows = output_rows(services["output"], job_id)
    assert_each_id_once(rows, 10_000)
    scraped = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert metric(scraped, 'fanyi_documents_translated_total{status="ok"}') == 10_000
    assert metric(scraped, "fanyi_sentences_translated_total") == sum(len(r["sentences"]) for r in rows)
    assert metric(scraped, "fanyi_task_duration_seconds_count") == 40
    # 90 distinct texts: the job's translation memory gives all but the first of each (two processes may
    # both translate one before either has stored it), and the engine ran a batch for those.
    reused = sum(r["reused_windows"] for r in rows)
    assert metric(scraped, 'fanyi_windows_translated_total{by="memory"}') == reused >= 10_000 - 2 * 90
    assert metric(scraped, 'fanyi_windows_translated_total{by="engine"}') == 10_000 - reused
    assert metric(scraped, "fanyi_batch_fill_ratio_count") >= 1
