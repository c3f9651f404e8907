"""Results as data teams read them: one job or every job with one glob, and compaction into fewer files."""

from __future__ import annotations

from contract.job import read_job, result_keys
from contract.rows import read_rows
from contract.storage import open_storage
from tests.jobs.conftest import corpus, jobs_cli, spec, wait


def rows_of(storage, job_id: str) -> list[dict]:
    return [row for key in result_keys(storage, read_job(storage, job_id)) for row in read_rows(storage.read(key))]


def test_compaction_keeps_every_row_once_in_fewer_files_and_the_job_reads_the_same(
    tmp_path, services, demo_artifact, workers
) -> None:
    path = spec(
        tmp_path / "spec.json", inputs=[str(corpus(tmp_path / "in.jsonl", 90))], output=services["output"],
        artifact=demo_artifact, chunk_documents=6,
    )  # fmt: skip
    job_id = jobs_cli("submit", str(path), env=services["env"]).stdout.strip()
    early = jobs_cli("compact", job_id, "--output", services["output"], env=services["env"])
    assert early.returncode == 1 and "has not ended" in early.stderr  # only an ended job is compacted
    workers()
    before = wait(job_id, services)
    storage = open_storage(services["output"])
    rows = rows_of(storage, job_id)
    assert len(storage.list(f"{job_id}/parts")) == 15

    for _ in range(2):  # a second run (as after an interruption) changes nothing
        result = jobs_cli("compact", job_id, "--output", services["output"], "--target-mb", "0.01", env=services["env"])
        assert result.returncode == 0, result.stderr
    files = storage.list(f"{job_id}/parts")
    assert 1 < len(files) < 15 and all("/parts/compacted-" in key for key in files)
    assert sorted(rows_of(storage, job_id), key=lambda r: r["id"]) == sorted(rows, key=lambda r: r["id"])
    after = wait(job_id, services)
    assert {k: after[k] for k in ("state", "done", "chunks_done", "errors")} == {
        k: before[k] for k in ("state", "done", "chunks_done", "errors")
    }
    from worker.runtime.deliveries import Deliveries
    from worker.runtime.tasks import run_chunk

    assert run_chunk(services["output"], job_id, 3, Deliveries(job_id, 3)) == "exists"  # a late redelivery
    assert storage.list(f"{job_id}/parts") == files  # writes no part beside the compacted file
    resumed = jobs_cli("resume", job_id, "--output", services["output"], env=services["env"])
    assert "enqueued 0 chunk(s)" in resumed.stdout  # nothing looks missing
    retry = jobs_cli("resume", job_id, "--output", services["output"], "--retry-failed", env=services["env"])
    assert retry.returncode == 1 and "was compacted" in retry.stderr


def test_one_big_target_makes_one_file_in_chunk_order(tmp_path, services, demo_artifact, workers) -> None:
    from jobs import api

    path = spec(tmp_path / "spec.json", inputs=[str(corpus(tmp_path / "in.jsonl", 20))], output=services["output"],
                artifact=demo_artifact, chunk_documents=5)  # fmt: skip
    job_id = jobs_cli("submit", str(path), env=services["env"]).stdout.strip()
    workers()
    wait(job_id, services)
    assert api.compact(job_id, services["output"], target_mb=1000) == 1
    storage = open_storage(services["output"])
    (key,) = storage.list(f"{job_id}/parts")
    assert [r["id"] for r in read_rows(storage.read(key))] == [f"doc-{n:05d}" for n in range(20)]  # chunk order
