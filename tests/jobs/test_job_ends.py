"""Every job ends, in a terminal state with reasons, whatever fails: real Redis, moto's S3 server, real
worker processes."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import redis

from contract.job import Job, part_key, write_head, write_job
from contract.settings import priority_lists
from contract.spec import JobSpec
from contract.storage import open_storage
from tests.faulty_proxy import FaultyProxy
from tests.jobs.conftest import (
    assert_each_id_once,
    corpus,
    damage_input,
    jobs_cli,
    metric,
    output_rows,
    queued,
    spec,
    submit,
    wait,
)
from tests.services import ROOT, RedisServer, free_port, wait_for
from tests.tcp_cutter import TcpCutter
from worker.engine.artifact import MANIFEST, seal


def health(worker) -> dict:
    return json.loads(worker.health_file.read_text()) if worker.health_file.exists() else {"healthy": True}


def test_a_chunk_whose_input_is_damaged_ends_as_error_rows_and_wait_says_which(
    tmp_path, services, demo_artifact, workers
):
    job_id = submit(tmp_path, services, demo_artifact, 60)  # 3 chunks of 20
    damage_input(services["output"], job_id, 1)
    workers()
    result = jobs_cli("wait", job_id, "--output", services["output"], "--timeout", "240", env=services["env"])
    assert result.returncode == 4, result.stdout + result.stderr  # completed with errors
    assert "completed_with_errors" in result.stdout and "chunk 1 failed" in result.stdout
    assert "resume" in result.stdout and "--retry-failed" in result.stdout
    rows = output_rows(services["output"], job_id)
    assert_each_id_once(rows, 60)
    errors = {r["id"]: r["error"] for r in rows if r["status"] == "error"}
    assert set(errors) == {f"doc-{n:05d}" for n in range(20, 40)}
    assert all("chunk 1 could not be translated" in e and "unreadable" in e for e in errors.values())


def test_a_worker_without_its_artifact_takes_no_chunk_and_says_so(tmp_path, services, demo_artifact, workers):
    bad = workers(FANYI_ARTIFACT=str(tmp_path / "no-such-artifact"))
    wait_for(lambda: not health(bad)["healthy"], 120, "the worker to find its artifact missing")
    probe = subprocess.run([sys.executable, "-m", "worker.health"], env={"FANYI_HEALTH_FILE": str(bad.health_file)},
                           capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert probe.returncode == 1 and "no-such-artifact" in probe.stdout
    workers()
    job_id = submit(tmp_path, services, demo_artifact, 100)
    assert wait(job_id, services)["state"] == "succeeded"
    assert_each_id_once(output_rows(services["output"], job_id), 100)
    assert "translate_chunk[" not in bad.log.read_text()  # it received none


def test_a_worker_whose_storage_refuses_it_puts_its_chunk_back_and_stops(
    tmp_path, services, demo_artifact, workers, s3_server
):
    with FaultyProxy(s3_server.port, refuse=lambda method, path: (403, "InvalidAccessKeyId")) as proxy:
        bad = workers(FANYI_S3_ENDPOINT_URL=f"http://127.0.0.1:{proxy.port}")
        job_id = submit(tmp_path, services, demo_artifact, 100)  # 5 chunks
        wait_for(lambda: not health(bad)["healthy"], 180, "the worker to meet the refusal")
        good = workers()
        status = wait(job_id, services)
    assert status["state"] == "succeeded" and status["errors"] == 0
    assert_each_id_once(output_rows(services["output"], job_id), 100)
    assert "InvalidAccessKeyId" in health(bad)["reason"]
    assert bad.log.read_text().count("translate_chunk[") <= 2 and good.log.read_text().count("succeeded in") >= 4


def test_storage_refusing_part_writes_for_a_while_turns_no_document_into_an_error(
    tmp_path, services, demo_artifact, workers, s3_server
):
    # The outage is counted in refusals, not seconds: the first 12 part writes are refused, whenever they come.
    # FANYI_S3_RETRIES=2 is botocore's retries after the first try: 3 attempts a write, so 4 deliveries in a row
    # meet it: more than one delivery's attempts, and more retries than Celery's default limit of 3.
    refusals, attempts = 12, 3
    with FaultyProxy(s3_server.port) as proxy:
        proxy.refuse = lambda method, path: (
            (503, "ServiceUnavailable") if method == "PUT" and "/parts/" in path and proxy.refused < refusals else None
        )
        worker = workers(FANYI_S3_ENDPOINT_URL=f"http://127.0.0.1:{proxy.port}", FANYI_S3_RETRIES=str(attempts - 1))
        job_id = submit(tmp_path, services, demo_artifact, 60)
        status = wait(job_id, services)
    assert proxy.refused == refusals  # the outage was met in full, then lifted
    retried = re.findall(rf"chunk \d+ of job {job_id}: .*ServiceUnavailable.*; retrying in", worker.log.read_text())
    assert len(retried) == refusals // attempts, retried  # each delivery that met it was retried, none failed
    assert status["state"] == "succeeded" and status["errors"] == 0
    rows = output_rows(services["output"], job_id)
    assert_each_id_once(rows, 60) and all(r["status"] == "ok" for r in rows)


def test_a_killed_workers_chunk_is_back_in_seconds_and_no_document_is_poison(
    tmp_path, services, demo_artifact, workers
):
    # 4 chunks of a second or two each, queued before any worker starts, so that the victim is seen at work
    # however long the submission takes to return on a busy machine. Without the memory: the corpus repeats
    # its texts, and chunks made of remembered windows end in less than a poll of ``running``.
    job_id = submit(tmp_path, services, demo_artifact, 200, chunk_documents=50, memory="off")
    slow = {"FANYI_VISIBILITY_TIMEOUT": "600"}  # the broker's own redelivery, past every wait below: out of the race
    victim = workers(**slow)
    cache = redis.Redis.from_url(services["redis"])
    running = lambda: [f.decode() for f, v in cache.hgetall("fanyi:running").items() if victim.name in v.decode()]
    fields = wait_for(running, 120, "the victim to start a chunk", interval=0.05)
    chunk = int(fields[0].rsplit("|", 1)[1])
    victim.kill()  # SIGKILL, main process and pool: a node drain
    port = free_port()
    rescuer = workers(FANYI_METRICS_PORT=str(port), **slow)
    storage = open_storage(services["output"])
    wait_for(lambda: storage.exists(part_key(job_id, chunk)), 300, "the chunk to be done by the other worker")
    status = wait(job_id, services)
    rows = output_rows(services["output"], job_id)
    assert status["state"] == "succeeded" and all(r["status"] == "ok" for r in rows)
    assert_each_id_once(rows, 200)
    # "In seconds" is by what it came back, not a stopwatch: the rescuer's watchdog put the very message back,
    # once, as a delivery three heartbeats old that no live worker holds; not the broker's visibility timeout
    # (600 s: past the waits above) nor the watchdog's pass over stalled jobs (a minute without a part).
    assert f"chunk {chunk} of job {job_id}: no live worker holds it; put back in its queue" in rescuer.log.read_text()
    scraped = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert metric(scraped, 'fanyi_chunks_requeued_total{reason="delivery_died"}') == 1
    lost = [line for line in scraped.splitlines() if line.startswith('fanyi_chunks_requeued_total{reason="lost"}')]
    assert all(float(line.split()[-1]) == 0 for line in lost), lost


def test_submit_with_the_broker_down_says_so_in_one_line_and_prints_no_job_id(tmp_path, services, demo_artifact):
    down = RedisServer()  # never started: nothing listens on its port
    env = {**services["env"], "FANYI_BROKER_URL": down.url}
    path = spec(tmp_path / "spec.json", inputs=[str(corpus(tmp_path / "in.jsonl", 5))], output=services["output"],
                artifact=demo_artifact)  # fmt: skip
    result = jobs_cli("submit", str(path), "--job-id", "down-1", env=env)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stdout == ""  # the job was not written: no id names it
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "job down-1 not submitted" in line and "broker" in line and "cannot be reached" in line
    assert open_storage(services["output"]).list("") == []  # nothing written: nothing to strand


def test_a_broker_lost_during_submit_leaves_a_job_that_resume_completes(tmp_path, services, demo_artifact, workers):
    broker = RedisServer().start()
    try:
        with TcpCutter(broker.port, cut_after_pushes=30) as cutter:
            env = {**services["env"], "FANYI_BROKER_URL": f"redis://127.0.0.1:{cutter.port}/0"}
            path = spec(tmp_path / "spec.json", inputs=[str(corpus(tmp_path / "in.jsonl", 120))],
                        output=services["output"], artifact=demo_artifact, chunk_documents=2)  # fmt: skip
            result = jobs_cli("submit", str(path), env=env)
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        job_id = result.stdout.splitlines()[0]
        assert f"job {job_id} is submitting" in result.stderr and f"jobs resume {job_id}" in result.stderr
        env = {**services["env"], "FANYI_BROKER_URL": broker.url}
        status = jobs_cli("status", job_id, "--output", services["output"], "--json", env=env)
        assert json.loads(status.stdout)["state"] == "submitting"
        workers(FANYI_BROKER_URL=broker.url)
        assert jobs_cli("resume", job_id, "--output", services["output"], env=env).returncode == 0
        finished = jobs_cli("wait", job_id, "--output", services["output"], "--timeout", "240", env=env)
        assert finished.returncode == 0, finished.stdout + finished.stderr
        assert_each_id_once(output_rows(services["output"], job_id), 120)
    finally:
        broker.stop()


def test_a_flushed_and_restarted_cache_does_not_keep_a_job_from_ending(tmp_path, services, demo_artifact, workers):
    cache = RedisServer().start()  # the cache apart from the broker, as FANYI_CACHE_URL allows
    try:
        env = {"FANYI_CACHE_URL": cache.url}
        services = {**services, "env": {**services["env"], **env}}
        worker = workers(**env)
        job_id = submit(tmp_path, services, demo_artifact, 200)  # 10 chunks
        storage = open_storage(services["output"])
        wait_for(lambda: storage.exists(part_key(job_id, 1)), 120, "two parts")
        redis.Redis.from_url(cache.url).flushall()
        wait_for(lambda: storage.exists(part_key(job_id, 4)), 120, "more parts")
        beats_failed = lambda: worker.log.read_text().count("watchdog: beat failed")
        before = beats_failed()
        cache.stop()  # a blip: down until the worker has met it, then back (with no key)
        wait_for(lambda: beats_failed() > before, 120, "the worker to find the cache down")
        cache.start()
        wait_for(lambda: storage.exists(f"{job_id}/_SUCCESS"), 180, "the job to end with nobody asking")
        summary = json.loads(storage.read(f"{job_id}/_SUCCESS"))
        assert summary["state"] == "succeeded" and summary["documents"] == 200
    finally:
        cache.stop()


def test_cancel_reports_what_was_really_written(tmp_path, services, demo_artifact, workers):
    workers()
    # Without the translation memory (the corpus repeats), and 50 chunks: the rest of the job takes far longer than
    # `jobs cancel` takes to start, however loaded the machine (both slow down alike).
    job_id = submit(tmp_path, services, demo_artifact, 1000, chunk_documents=20, memory="off")
    storage = open_storage(services["output"])
    wait_for(lambda: storage.exists(part_key(job_id, 0)), 120, "a first part")
    assert jobs_cli("cancel", job_id, "--output", services["output"], env=services["env"]).returncode == 0
    result = jobs_cli("wait", job_id, "--output", services["output"], "--timeout", "240", env=services["env"])
    assert result.returncode == 6  # cancelled
    client = redis.Redis.from_url(services["redis"])  # every chunk's message taken and acknowledged: none can write
    wait_for(lambda: queued(services["redis"]) == 0 and not client.hlen("unacked"), 120, "every message to be done")
    written = len(output_rows(services["output"], job_id))
    assert f"{written:,} of 1,000 documents written" in result.stdout


def test_cancel_takes_the_jobs_queued_messages_out_and_resume_puts_them_back(tmp_path, services, demo_artifact):
    """No worker: every chunk message waits in the broker. Cancel takes the job's out (the backlog drops at once),
    another job's stay; resume enqueues them again."""
    from worker.monitoring.exporter import backlog

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    job_id = submit(tmp_path / "a", services, demo_artifact, 100, chunk_documents=10)
    other = submit(tmp_path / "b", services, demo_artifact, 30, chunk_documents=10, priority=2)
    assert queued(services["redis"]) == 13
    cancelled = jobs_cli("cancel", job_id, "--output", services["output"], env=services["env"])
    assert cancelled.returncode == 0 and "(10 queued chunk(s) taken out of the queue)" in cancelled.stdout
    client = redis.Redis.from_url(services["redis"])
    assert queued(services["redis"]) == 3 and backlog(client)["translate.cpu"] == 3
    left = [json.loads(raw)["headers"]["argsrepr"] for name in priority_lists("translate.cpu")
            for raw in client.lrange(name, 0, -1)]  # fmt: skip
    assert len(left) == 3 and all(f"'{other}'" in args for args in left)
    resumed = jobs_cli("resume", job_id, "--output", services["output"], env=services["env"])
    assert "enqueued 10 chunk(s)" in resumed.stdout and queued(services["redis"]) == 13


def test_relative_paths_in_a_spec_are_made_absolute(tmp_path, services, demo_artifact) -> None:
    (tmp_path / "specs").mkdir()
    corpus(tmp_path / "in.jsonl", 3)
    body = {"name": "rel", "inputs": ["../in.jsonl"], "output": "../out", "artifact": str(demo_artifact)}
    (tmp_path / "specs" / "rel.json").write_text(json.dumps(body))
    result = jobs_cli("submit", str(tmp_path / "specs" / "rel.json"), env=services["env"])
    assert result.returncode == 0, result.stderr
    job = json.loads((tmp_path / "out" / result.stdout.splitlines()[0] / "_job.json").read_text())
    assert job["spec"]["inputs"] == [str(tmp_path / "in.jsonl")] and job["spec"]["output"] == str(tmp_path / "out")


def test_a_job_whose_artifact_is_gone_ends_failed_with_the_reason_and_the_worker_stays_healthy(
    tmp_path, services, demo_artifact, workers
):
    gone = Path(shutil.copytree(demo_artifact, tmp_path / "artifact-removed-later"))
    (tmp_path / "a").mkdir()
    job_id = submit(tmp_path / "a", services, gone, 40)  # 2 chunks
    shutil.rmtree(gone)  # the job's artifact is gone before any worker loads it
    worker = workers()
    result = jobs_cli("wait", job_id, "--output", services["output"], "--timeout", "240", env=services["env"])
    assert result.returncode == 5, result.stdout + result.stderr  # failed: every row an error, with the reason
    assert "chunk 0 failed" in result.stdout and "artifact-removed-later" in result.stdout
    assert health(worker)["healthy"]  # the job's artifact is the job's problem, not the worker's
    (tmp_path / "b").mkdir()
    other = submit(tmp_path / "b", services, demo_artifact, 20)
    assert wait(other, services)["state"] == "succeeded"  # the same worker goes on with other jobs


def test_failed_chunks_retried_are_counted_as_they_are_now(tmp_path, services, demo_artifact, workers) -> None:
    """A job whose chunks failed (its artifact gone), then retried with the artifact back: the counts of the
    retried chunks replace those of their error rows (their part summaries go with the failed parts)."""
    gone = Path(shutil.copytree(demo_artifact, tmp_path / "artifact-back-later"))
    job_id = submit(tmp_path, services, gone, 40)  # 2 chunks
    shutil.rmtree(gone)
    workers()
    assert wait(job_id, services, exit_code=5)["state"] == "failed"
    shutil.copytree(demo_artifact, gone)
    retried = jobs_cli("resume", job_id, "--output", services["output"], "--retry-failed", env=services["env"])
    assert retried.returncode == 0 and "enqueued 2 chunk(s)" in retried.stdout, retried.stderr
    status = wait(job_id, services)
    assert (status["state"], status["errors"], status["done"]) == ("succeeded", 0, 40)
    summary = json.loads(open_storage(services["output"]).read(f"{job_id}/_SUCCESS"))
    assert summary["statuses"]["ok"] + summary["statuses"]["partial"] == 40 and summary["statuses"]["error"] == 0


def test_a_chunk_put_back_again_and_again_by_environment_faults_ends_as_error_rows(
    tmp_path, services, demo_artifact, workers, s3_server
):
    refuse = lambda method, path: (403, "AccessDenied") if method == "GET" and "/_inputs/chunks-" in path else None
    with FaultyProxy(s3_server.port, refuse=refuse) as proxy:
        # its storage lists (the health check passes) but refuses to read chunk inputs: it puts back every chunk
        workers(FANYI_S3_ENDPOINT_URL=f"http://127.0.0.1:{proxy.port}", FANYI_MAX_DEATHS="3")
        job_id = submit(tmp_path, services, demo_artifact, 20)
        result = jobs_cli("wait", job_id, "--output", services["output"], "--timeout", "300", env=services["env"])
    assert result.returncode == 5, result.stdout + result.stderr
    assert "chunk 0 failed" in result.stdout and "AccessDenied" in result.stdout
    assert "3 deliveries each met an environment fault" in result.stdout
    assert proxy.refused == 3
    assert_each_id_once(output_rows(services["output"], job_id), 20)


def test_error_rows_that_cannot_be_written_yet_are_retried_and_the_chunk_is_not_dropped(
    tmp_path, services, demo_artifact, workers, s3_server
):
    job_id = submit(tmp_path, services, demo_artifact, 60)  # 3 chunks of 20
    damage_input(services["output"], job_id, 1)
    refusals = {"left": 3}

    def refuse(method: str, path: str):
        if method == "PUT" and "/parts/part-00001" in path and refusals["left"] > 0:
            refusals["left"] -= 1
            return 503, "ServiceUnavailable"  # the error part of chunk 1 cannot be written, for a while
        return None

    with FaultyProxy(s3_server.port, refuse=refuse) as proxy:
        workers(FANYI_S3_ENDPOINT_URL=f"http://127.0.0.1:{proxy.port}", FANYI_S3_RETRIES="1")
        result = jobs_cli("wait", job_id, "--output", services["output"], "--timeout", "240", env=services["env"])
    assert result.returncode == 4, result.stdout + result.stderr  # completed with errors: chunk 1's rows
    assert refusals["left"] == 0 and "chunk 1 failed" in result.stdout
    rows = output_rows(services["output"], job_id)
    assert_each_id_once(rows, 60)
    assert {r["id"] for r in rows if r["status"] == "error"} == {f"doc-{n:05d}" for n in range(20, 40)}


def broken_engine(demo_artifact: Path, where: Path) -> Path:
    """A copy of the artifact whose hashes match but whose encoder ONNX Runtime cannot load (as a CUDA or
    ORT failure would be): it passes verification and fails only when its sessions are made."""
    copy = Path(shutil.copytree(demo_artifact, where))
    manifest = json.loads((copy / MANIFEST).read_text())
    for precision in manifest["precisions"].values():
        (copy / precision["graphs"]["encoder"]).write_bytes(b"not an ONNX graph")
    seal(copy, manifest)
    return copy


def test_a_worker_whose_own_engine_fails_puts_chunks_back_and_turns_none_into_error_rows(
    tmp_path, services, demo_artifact, workers
):
    bad = workers(FANYI_ARTIFACT=str(broken_engine(demo_artifact, tmp_path / "own-artifact")))
    job_id = submit(tmp_path, services, demo_artifact, 60)
    wait_for(lambda: not health(bad)["healthy"], 180, "the worker to find its own engine broken")
    assert "own-artifact" in health(bad)["reason"]
    workers()
    status = wait(job_id, services)
    assert status["state"] == "succeeded" and status["errors"] == 0
    assert_each_id_once(output_rows(services["output"], job_id), 60)
    assert not health(bad)["healthy"]  # its engine is still broken: it does not come back


def live(worker) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FANYI_HEALTH_FILE": str(worker.health_file), "FANYI_HEARTBEAT": "1"}
    return subprocess.run([sys.executable, "-m", "worker.health", "--live"], env=env, capture_output=True, text=True,
                          cwd=ROOT)  # fmt: skip


def test_liveness_holds_through_a_dead_cache_and_fails_when_the_worker_hangs(tmp_path, services, workers):
    helps = subprocess.run([sys.executable, "-m", "worker.health", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert helps.returncode == 0 and "--live" in helps.stdout and "readiness" in helps.stdout
    assert "liveness" in helps.stdout
    with socket.create_server(("127.0.0.1", 0)) as blackhole:  # accepts connections, never answers
        # Each cache call of the watchdog waits out FANYI_REDIS_TIMEOUT, 4 s: one call is under the liveness
        # limit of six 1-s heartbeats, a pass (beat, then restore_stale: two calls at least) over it. A watchdog
        # that beat once a pass would be seen hung in every pass; one that beats before each duty, never.
        worker = workers(FANYI_CACHE_URL=f"redis://127.0.0.1:{blackhole.getsockname()[1]}/0", FANYI_REDIS_TIMEOUT="4")
        first = live(worker)
        assert first.returncode == 0, first.stdout + first.stderr
        failed = lambda: worker.log.read_text().count("watchdog: beat failed")  # once a pass, after its timeout
        seen, probes = failed(), []

        def probed_through_a_pass() -> bool:
            probes.append(live(worker))
            return failed() >= seen + 2  # a whole pass of the watchdog between those two lines

        wait_for(probed_through_a_pass, 180, "two more passes of the watchdog on a dead cache", interval=0)
        hung = [p.stdout for p in probes if p.returncode != 0]
        assert not hung, hung  # a cache that does not answer is no reason to restart
    os.killpg(worker.process.pid, signal.SIGSTOP)  # the worker hangs
    try:
        wait_for(lambda: live(worker).returncode == 1, 120, "liveness to fail")
        hung = live(worker)
        assert "last beat" in hung.stdout and len(hung.stdout.strip().splitlines()) == 1
    finally:
        os.killpg(worker.process.pid, signal.SIGCONT)
    wait_for(lambda: live(worker).returncode == 0, 120, "liveness to pass again")


def test_delete_removes_an_ended_job_and_what_redis_holds_of_it_and_refuses_a_running_one(
    tmp_path, services, demo_artifact, workers
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    done = submit(tmp_path / "a", services, demo_artifact, 30, chunk_documents=10)
    running = submit(tmp_path / "b", services, demo_artifact, 20, chunk_documents=10)
    refused = jobs_cli("delete", running, "--output", services["output"], env=services["env"])
    assert refused.returncode == 1 and f"job {running} is running: cancel it first" in refused.stderr
    jobs_cli("cancel", running, "--output", services["output"], env=services["env"])
    workers()
    wait(done, services)
    client = redis.Redis.from_url(services["redis"])
    assert client.exists(f"fanyi:progress:{done}") and client.hget("fanyi:jobs", done)
    deleted = jobs_cli("delete", done, "--output", services["output"], env=services["env"])
    assert deleted.returncode == 0 and f"deleted job {done}:" in deleted.stdout, deleted.stderr
    storage = open_storage(services["output"])
    assert storage.list(done) == [] and not client.exists(
        f"fanyi:progress:{done}", f"fanyi:memory:{services['output']}|{done}"
    )
    assert client.hget("fanyi:jobs", done) is None and not list(client.scan_iter(match=f"fanyi:chunk:{done}:*"))
    listed = jobs_cli("list", "--output", services["output"], env=services["env"])
    assert done not in listed.stdout and running in listed.stdout
    assert jobs_cli("delete", running, "--output", services["output"], env=services["env"]).returncode == 0
    assert storage.folders() == []


def test_a_list_of_jobs_reads_one_small_object_per_job(tmp_path, services) -> None:
    """`jobs list` tells each job's state from its folder's files and its numbers from its head or its
    ``_SUCCESS`` (a job without a head, submitted before them, from its manifest): no part is listed or read."""
    from jobs import api

    storage = open_storage(services["output"])
    listed_spec = JobSpec("listed", ["in.jsonl"], services["output"], "a")
    made = {name: Job(f"job-{name}", listed_spec, "id", [3, 2]) for name in ("running", "cancelled", "ended", "old")}
    for name, job in made.items():
        write_job(storage, job)
        if name != "old":
            write_head(storage, job)
        storage.put(job.key("_ENQUEUED"), b"2\n")
    storage.put(made["cancelled"].key("_CANCELLED"), b"x 1\n")
    ended = {"state": "completed_with_errors", "documents": 5, "statuses": {"error": 1, "partial": 0},
             "finished": made["ended"].created + 10}  # fmt: skip
    storage.put(made["ended"].key("_SUCCESS"), json.dumps(ended).encode())
    storage.put(made["running"].key("parts/part-00000.parquet"), b"never read by a listing")
    storage.put("not-a-job/readme.txt", b"a folder without a manifest")
    listed = {s.id: s for s in api.jobs(services["output"])}
    assert sorted(listed) == sorted(job.id for job in made.values())
    states = ["running", "cancelled", "completed_with_errors", "running"]
    assert [listed[f"job-{name}"].state for name in made] == states
    assert listed["job-ended"].done == 5 and listed["job-ended"].errors == 1 and listed["job-ended"].rate == 0.5
    assert listed["job-old"].documents == 5 and listed["job-old"].name == "listed"
    page = api.jobs(services["output"], after="job-cancelled", keep=lambda s: s.state == "running", limit=1)
    assert [s.id for s in page] == ["job-old"]


def test_wait_ends_with_no_job_when_the_job_is_deleted_while_it_waits(services) -> None:
    """`jobs wait` reads the job's manifest once (it never changes), then its markers at each poll: a job
    deleted meanwhile ends the wait with "no job", not with a wait for a job that looks as if never enqueued."""
    from jobs import api

    storage = open_storage(services["output"])
    job = Job("job-waited", JobSpec("waited", ["in.jsonl"], services["output"], "a"), "id", [3, 2])
    write_job(storage, job)
    storage.put(job.key("_ENQUEUED"), b"2\n")
    seen: list[str] = []

    def deleted_after_first_poll(status: api.JobStatus) -> None:
        seen.append(status.state)
        for key in storage.list(job.id):
            storage.delete(key)

    with pytest.raises(FileNotFoundError, match="no job 'job-waited' .* any more"):
        api.wait(job.id, services["output"], poll=0.01, timeout=5, on_progress=deleted_after_first_poll)
    assert seen == ["running"]
