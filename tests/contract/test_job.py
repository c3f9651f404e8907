"""A job's folder read back: files that no chunk of the job could have written are ignored."""

from __future__ import annotations

from pathlib import Path

from contract.job import Job, done_chunks, encode_rows, failures, finalize, part_key, result_keys, write_job
from contract.storage import LocalStorage


def test_parts_and_failures_of_chunks_the_job_does_not_have_are_ignored(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    job = Job("job-1", {"artifact": "a"}, "id", [1, 1])
    write_job(storage, job)
    row = {"job_id": job.id, "id": "d", "source": "s", "translation": "t", "status": "ok", "flags": [],
           "sentences": [], "timings": {"prepare": 0.0, "translate": 0.0, "total": 0.0}}  # fmt: skip
    for stray in ("part-09999", "part--0001", "part-00002", "part-0000x"):  # a damaged folder, before the fix
        storage.create(f"{job.id}/parts/{stray}.parquet", encode_rows([]))
    storage.put(f"{job.id}/_failures/chunk--0001.json", b'{"reason": "no such chunk"}')
    storage.create(part_key(job.id, 0), encode_rows([row]))
    assert done_chunks(storage, job) == {0} and finalize(storage, job) is None  # chunk 1 is not done
    storage.create(part_key(job.id, 1), encode_rows([{**row, "id": "e"}]))
    assert done_chunks(storage, job) == {0, 1} and failures(storage, job) == {}
    summary = finalize(storage, job)
    assert summary is not None and summary["state"] == "succeeded" and summary["documents"] == 2
    assert result_keys(storage, job) == [part_key(job.id, 0), part_key(job.id, 1)]
