"""``python -m jobs compact JOB_ID``: merge an ended job's parts into fewer, larger files.

A part holds one chunk (64 documents by default): a million documents make 15,000 small files,
slow to list and to read. Compaction reads the parts in chunk order and writes
``parts/compacted-NNNNN.parquet`` files of about ``target_mb`` each, records which chunks each
holds in ``_COMPACTED``, and only then deletes the parts it merged. Every step is create-if-absent
or idempotent: an interrupted compaction run again finishes the same way. Run it when nobody
reads the job: a reader during the deletions may see rows of a part and of its compacted file.
``jobs status`` and the exporter's counts read compacted jobs as before; ``resume --retry-failed``
refuses one (the failed chunks' rows are inside compacted files).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from contract.job import COMPACTED, Job, compacted_chunks, part_key, read_job
from contract.parquet import parquet_bytes, read_parquet
from contract.rows import read_table
from contract.spec import SpecError
from contract.storage import Storage


def compact(
    storage: Storage, job_id: str, *, target_mb: float = 64, on_progress: Callable[[str], None] | None = None
) -> int:
    """Compact the job's parts; how many compacted files hold its rows."""
    say = on_progress or (lambda _: None)
    job = read_job(storage, job_id)
    if not storage.exists(job.key("_SUCCESS")):
        raise SpecError(f"job {job_id} has not ended: compact it once `python -m jobs wait {job_id}` returns")
    if not storage.exists(job.key(COMPACTED)):
        files = _merge(storage, job, int(target_mb * 2**20), say)
        storage.create(job.key(COMPACTED), json.dumps({"files": files}, indent=1).encode())
    merged = compacted_chunks(storage, job)
    for chunk in sorted(merged):
        storage.delete(part_key(job_id, chunk))
    count = len(set(merged.values()))
    say(f"{len(job.chunks):,} parts of {job_id} are now {count:,} file(s) under {job_id}/parts/")
    return count


def _merge(storage: Storage, job: Job, target_bytes: int, say: Callable[[str], None]) -> list[dict[str, Any]]:
    files: list[dict[str, Any]] = []
    group: list[tuple[int, bytes]] = []
    size = 0  # bytes of the parts in ``group``
    for chunk in range(len(job.chunks)):
        group.append((chunk, storage.read(part_key(job.id, chunk))))
        size += len(group[-1][1])
        if size >= target_bytes or chunk == len(job.chunks) - 1:
            files.append(_write(storage, job, len(files), group))
            say(f"{files[-1]['key']}: chunks {group[0][0]}-{group[-1][0]}, {files[-1]['rows']:,} rows")
            group, size = [], 0
    return files


def _write(storage: Storage, job: Job, index: int, group: list[tuple[int, bytes]]) -> dict[str, Any]:
    import pyarrow as pa

    # Each part in this row format (``contract.rows``): one written before a column existed gets it as nulls.
    table = pa.concat_tables([read_table(data) for _, data in group])
    key = job.key(f"parts/compacted-{index:05d}.parquet")
    data = parquet_bytes(table)
    if not storage.create(key, data):  # an interrupted run wrote it: it must hold the same rows
        data = storage.read(key)
        if read_parquet(data, columns=["id"]).column("id").to_pylist() != table.column("id").to_pylist():
            raise SpecError(f"{key} exists with other rows: delete it and run `jobs compact {job.id}` again")
    return {
        "key": key, "chunks": [chunk for chunk, _ in group], "rows": table.num_rows,
        "sha256": hashlib.sha256(data).hexdigest(),
    }  # fmt: skip
