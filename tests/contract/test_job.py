"""A job's folder read back: files that no chunk of the job could have written are ignored, inputs written
under an older name are read."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from contract.job import (
    Document,
    Job,
    chunk_ids,
    decode_input,
    documents_table,
    done_chunks,
    encode_inputs,
    failures,
    finalize,
    forget_summaries,
    group_key,
    part_key,
    read_input,
    result_keys,
    summary_key,
    write_job,
    write_part,
)
from contract.parquet import parquet_bytes
from contract.rows import Row, encode_rows
from contract.spec import JobSpec
from contract.storage import LocalStorage


def test_parts_and_failures_of_chunks_the_job_does_not_have_are_ignored(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    job = Job("job-1", JobSpec("job", ["in.jsonl"], "out", "a"), "id", [1, 1])
    write_job(storage, job)
    row = Row(job.id, "d", "s", "t", "ok", None, [], [], "a")
    for stray in ("part-09999", "part--0001", "part-00002", "part-0000x"):  # a damaged folder, before the fix
        storage.create(f"{job.id}/parts/{stray}.parquet", encode_rows([]))
    storage.put(f"{job.id}/_failures/chunk--0001.json", b'{"reason": "no such chunk"}')
    storage.create(part_key(job.id, 0), encode_rows([row]))
    assert done_chunks(storage, job) == {0} and finalize(storage, job) is None  # chunk 1 is not done
    storage.create(part_key(job.id, 1), encode_rows([replace(row, id="e")]))
    assert done_chunks(storage, job) == {0, 1} and failures(storage, job) == {}
    summary = finalize(storage, job)
    assert summary is not None and summary["state"] == "succeeded" and summary["documents"] == 2
    assert result_keys(storage, job) == [part_key(job.id, 0), part_key(job.id, 1)]


@pytest.mark.parametrize("older", [".pq", ".parquet"])
def test_inputs_of_jobs_submitted_before_input_files_are_still_read(tmp_path: Path, older: str) -> None:
    """A job without ``input_files`` kept each chunk input in a Parquet file of its own (named ``.parquet``, then
    ``.pq``); a job with them keeps several in one Arrow IPC file, one record batch each."""
    import pyarrow as pa

    storage = LocalStorage(tmp_path)
    job = Job("job-2", JobSpec("job", ["in.jsonl"], "out", "a"), "id", [1, 1])
    documents = [[Document("d", "Tom has 3 apples.", language="en")], [Document("e", "Hi.")]]
    for number, chunk in enumerate(documents):
        storage.put(f"{job.id}/_inputs/chunk-{number:05d}{older}", parquet_bytes(documents_table(chunk)))  # as then
    ids = pa.table({"chunk": pa.array([0, 1], pa.int32()), "id": ["d", "e"]})
    storage.put(f"{job.id}/_inputs/ids{older}", parquet_bytes(ids))
    assert [decode_input(*read_input(storage, job, n)) for n in (0, 1)] == documents
    assert chunk_ids(storage, job, 1) == ["e"]
    now = Job("job-3", job.spec, "id", [1, 1], input_files=[0])
    storage.put(now.key("_inputs/chunks-00000.arrow"), encode_inputs([documents_table(c) for c in documents]))
    assert [decode_input(*read_input(storage, now, n)) for n in (0, 1)] == documents


@pytest.mark.parametrize("group_summed", [True, False])
def test_finalize_sums_the_parts_summaries_and_keeps_success_small(tmp_path: Path, group_summed: bool) -> None:
    """finalize reads the sum of each group of summaries (written with the group's last part), or the group's part
    summaries where it is missing, never the parts (a part damaged after its summary was written still counts as
    written); a summary that is missing is made again from its part; the parts' list goes to ``_parts.json``, not
    ``_SUCCESS``."""
    storage = LocalStorage(tmp_path)
    job = Job("job-3", JobSpec("job", ["in.jsonl"], "out", "a"), "id", [2, 1, 1])
    write_job(storage, job)
    ok = Row(job.id, "d", "Hi.", "你好。", "ok", None, ["cleaned"], [], "a", source_language="en", target_language="zh")
    error = Row.failed(job.id, "a", "e", "its input is gone", target="zh")
    for chunk, rows in enumerate([[ok, replace(ok, id="d2")], [error], [replace(ok, id="d3")]]):
        assert not storage.exists(group_key(job.id, 0))  # not before the group's last part
        assert write_part(storage, job, chunk, rows) and not write_part(storage, job, chunk, rows)  # once
    assert storage.exists(group_key(job.id, 0))
    storage.put(part_key(job.id, 1), b"damaged after its summary was written")
    if not group_summed:
        forget_summaries(storage, job, 2)
    summary = finalize(storage, job)
    assert summary is not None and summary["state"] == "completed_with_errors" and summary["documents"] == 4
    assert summary["statuses"]["ok"] == 3 and summary["statuses"]["error"] == 1
    assert summary["languages"] == {"en": 3} and summary["targets"]["zh"]["ok"] == 3
    assert summary["parts"] == {"count": 3, "listed_in": "_parts.json"}
    parts = json.loads(storage.read(f"{job.id}/_parts.json"))
    assert [(p["key"], p["rows"]) for p in parts] == [(part_key(job.id, c), n) for c, n in enumerate([2, 1, 1])]
    assert storage.exists(summary_key(job.id, 2))  # made again, and kept
    assert len(storage.read(f"{job.id}/_SUCCESS")) < 4000


def test_one_finalizer_at_a_time_the_others_wait_for_its_success(tmp_path: Path, redis_url, monkeypatch) -> None:
    """While the job's finalize lock is held, finalize waits for the holder's ``_SUCCESS`` and returns it (it sums
    nothing itself); a holder that never writes it is waited for ``FINALIZE_WAIT`` seconds, then this caller sums."""
    import threading

    import redis

    from contract import cache
    from contract import job as contract_job

    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    monkeypatch.setattr(cache, "cache", lambda: client)
    storage = LocalStorage(tmp_path)
    job = Job("job-4", JobSpec("job", ["in.jsonl"], "out", "a"), "id", [1])
    write_job(storage, job)
    write_part(storage, job, 0, [Row(job.id, "d", "Hi.", "你好。", "ok", None, [], [], "a")])
    lock = cache.FINALIZE_LOCK.format(job=job.id)
    client.set(lock, "another finalizer")
    theirs = {"job": job.id, "state": "succeeded", "documents": 1, "written by": "the holder"}
    threading.Timer(0.5, lambda: storage.create(job.key("_SUCCESS"), json.dumps(theirs).encode())).start()
    assert finalize(storage, job) == theirs and not storage.exists(job.key("_parts.json"))
    storage.delete(job.key("_SUCCESS"))
    monkeypatch.setattr(contract_job, "FINALIZE_WAIT", 0.5)  # the holder died: after the wait, this caller sums
    summary = finalize(storage, job)
    assert summary is not None and summary["documents"] == 1 and "written by" not in summary
    assert client.get(lock) == b"another finalizer"  # another's lock is never released by this caller
