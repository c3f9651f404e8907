"""A job ends by itself, every document once, whatever happens to its workers, its broker or its artifact:
a worker restarted under its own name, a broker restarted with or without persistence or flushed, a
worker that cannot see the job's artifact, an artifact changed under a running worker. Real Redis,
moto's S3 server, real worker processes. The broker's visibility timeout is ten minutes here, past every
wait below: nothing below ends by waiting it out. The waits are ceilings, not measures: what brought a
chunk back is read from the workers' logs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import redis

from contract.job import part_key
from contract.storage import open_storage
from tests.jobs.conftest import assert_each_id_once, jobs_cli, output_rows, submit, wait
from tests.services import RedisServer, wait_for
from worker.engine.artifact import MANIFEST, file_entries

SLOW_REDELIVERY = {"FANYI_VISIBILITY_TIMEOUT": "600"}
ENDS_WITHIN = 300  # seconds: a ceiling for a loaded machine, under the visibility timeout


def health(worker) -> dict:
    return json.loads(worker.health_file.read_text()) if worker.health_file.exists() else {"healthy": True}


def ends_by_itself(services, job_id: str, timeout: float = ENDS_WITHIN) -> None:
    """``_SUCCESS`` written by the workers (``jobs status`` and ``wait`` would finalize a job themselves)."""
    storage = open_storage(services["output"])
    wait_for(lambda: storage.exists(f"{job_id}/_SUCCESS"), timeout, f"job {job_id} to end by itself")


def test_a_worker_killed_mid_chunk_and_restarted_under_its_name_leaves_no_chunk_behind(
    tmp_path, services, demo_artifact, workers
):
    job_id = submit(tmp_path, services, demo_artifact, 200, chunk_documents=50, memory="off")
    worker = workers(**SLOW_REDELIVERY)  # after the submit: a loaded machine's slow `jobs submit` exit cannot hide
    cache = redis.Redis.from_url(services["redis"])  # the whole job (four chunks of a second or two) from the poll
    wait_for(lambda: any(worker.name in v.decode() for v in cache.hvals("fanyi:running")), 60, "a chunk under way")
    worker.restart()  # SIGKILL, then the same node name: a heartbeat under that name comes back at once
    ends_by_itself(services, job_id)
    assert_each_id_once(output_rows(services["output"], job_id), 200)
    assert "no live worker holds it; put back in its queue" in worker.log.read_text()  # its watchdog, not a timeout


def test_a_worker_killed_while_it_finalizes_and_restarted_under_its_name_ends_the_job(
    tmp_path, services, demo_artifact, workers
):
    killed = tmp_path / "killed"
    worker = workers(app="tests.jobs.poison_app", FANYI_TEST_KILL_IN_FINALIZE=str(killed), **SLOW_REDELIVERY)
    job_id = submit(tmp_path, services, demo_artifact, 40)
    wait_for(lambda: killed.exists() and worker.died(), 120, "the worker to be killed after the last part")
    storage = open_storage(services["output"])
    assert storage.exists(part_key(job_id, 1)) and not storage.exists(f"{job_id}/_SUCCESS")
    worker.restart()
    ends_by_itself(services, job_id)
    assert_each_id_once(output_rows(services["output"], job_id), 40)


@pytest.mark.parametrize("fault", ["restart", "restart with an append-only file", "FLUSHALL"])
def test_a_broker_that_restarts_or_is_flushed_mid_job_gets_the_job_done_by_itself(
    fault, tmp_path, services, demo_artifact, workers
):
    (tmp_path / "aof").mkdir()
    server = RedisServer(aof=tmp_path / "aof" if "append-only" in fault else None).start()
    try:
        services = {**services, "env": {**services["env"], "FANYI_BROKER_URL": server.url}, "redis": server.url}
        worker = workers(FANYI_BROKER_URL=server.url, **SLOW_REDELIVERY)
        job_id = submit(tmp_path, services, demo_artifact, 200, memory="off")  # 10 chunks of a second or so
        storage = open_storage(services["output"])
        wait_for(lambda: storage.exists(part_key(job_id, 0)), 120, "a first part")
        redis.Redis.from_url(server.url).flushall() if fault == "FLUSHALL" else server.restart()
        assert len(storage.list(f"{job_id}/parts")) < 10, "the job ended before the fault: nothing was tested"
        ends_by_itself(services, job_id)
        assert_each_id_once(output_rows(services["output"], job_id), 200)
        assert "the broker restarted or lost its keys: enqueueing again what it lost" in worker.log.read_text()
    finally:
        server.stop()


def can_unshare() -> bool:
    return shutil.which("unshare") is not None and subprocess.run(["unshare", "-m", "true"]).returncode == 0


@pytest.mark.skipif(not can_unshare(), reason="needs `unshare -m` (root, or CAP_SYS_ADMIN) to hide a folder")
def test_a_worker_that_cannot_see_the_jobs_artifact_leaves_its_chunks_to_one_that_can(
    tmp_path, services, demo_artifact, workers
):
    artifact = Path(shutil.copytree(demo_artifact, tmp_path / "mounted-artifact"))
    hidden = f'mount -t tmpfs none {artifact} && exec "$@"'  # an empty folder over it: a volume not mounted
    blind = workers(prefix=["unshare", "-m", "sh", "-c", hidden, "sh"])
    workers()
    job_id = submit(tmp_path, services, artifact, 400)  # 20 chunks
    status = wait(job_id, services)
    assert status["state"] == "succeeded" and status["errors"] == 0
    assert_each_id_once(output_rows(services["output"], job_id), 400)
    assert not health(blind)["healthy"] and "mounted-artifact" in health(blind)["reason"]


def flip_a_byte(path: Path) -> None:
    with open(path, "r+b") as f:  # in place, as a copy over the file or a bit flip on its disk does
        f.seek(path.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))


@pytest.mark.parametrize("change", ["a byte", "a byte and its hash in the manifest"])
def test_an_artifact_changed_under_a_running_worker_translates_nothing(
    change, tmp_path, services, demo_artifact, workers
):
    artifact = Path(shutil.copytree(demo_artifact, tmp_path / "changed-artifact"))
    workers()
    (tmp_path / "clean").mkdir()
    reference = submit(tmp_path / "clean", services, demo_artifact, 200, memory="off")
    wait(reference, services)
    job_id = submit(tmp_path, services, artifact, 200, memory="off")  # 10 chunks of a second or so
    storage = open_storage(services["output"])
    wait_for(lambda: storage.exists(part_key(job_id, 0)), 120, "a first part")
    flip_a_byte(artifact / "int8" / "weights.bin")
    if "manifest" in change:
        manifest = json.loads((artifact / MANIFEST).read_text())
        manifest["files"] = file_entries(artifact)
        (artifact / MANIFEST).write_text(json.dumps(manifest))
    assert len(storage.list(f"{job_id}/parts")) < 10, "the job ended before the change: nothing was tested"
    assert wait(job_id, services, exit_code=4)["state"] == "completed_with_errors"
    rows = output_rows(services["output"], job_id)
    assert_each_id_once(rows, 200)
    clean = {r["id"]: r["translation"] for r in output_rows(services["output"], reference)}
    errors = [r for r in rows if r["status"] == "error"]
    assert errors and all("changed-artifact" in r["error"] for r in errors)
    assert all(r["translation"] == clean[r["id"]] for r in rows if r["status"] != "error")


def test_a_chunk_past_the_hard_time_limit_is_requeued_not_dropped(tmp_path, services, demo_artifact, workers):
    lines = [json.dumps({"id": f"doc-{n:05d}", "text": f"Tom has {n + 2} apples."}) for n in range(20)]
    lines[3] = json.dumps({"id": "doc-00003", "text": "POISON-STUBBORN Tom has 5 apples."})
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    body = {"name": "t", "inputs": [str(tmp_path / "in.jsonl")], "output": services["output"],
            "artifact": str(demo_artifact), "chunk_documents": 20}  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(body))
    job_id = jobs_cli("submit", str(tmp_path / "spec.json"), env=services["env"]).stdout.strip()
    worker = workers(app="tests.jobs.poison_app", **SLOW_REDELIVERY)  # killed at 12 s, twice: then it is poison
    ends_by_itself(services, job_id)
    rows = {r["id"]: r for r in output_rows(services["output"], job_id)}
    assert len(rows) == 20 and [i for i, r in rows.items() if r["status"] == "error"] == ["doc-00003"]
    log = worker.log.read_text()
    assert log.count("Hard time limit (12") >= 2, log[-3000:]
    # Requeued by the worker as it was killed, not acknowledged: an acknowledged chunk comes back only when the
    # watchdog finds the job stalled (a minute without a part) and enqueues again the chunk it has no message of.
    assert not re.search(rf"job {job_id}: [1-9]\d* chunks without a part or a message enqueued again", log)
