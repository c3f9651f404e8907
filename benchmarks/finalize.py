"""What finalize costs a large job: ``--chunks`` parts of ``--rows`` synthetic rows each, written with their
summaries (``contract.job.write_part``), then ``finalize`` timed in pairs of rounds whose order alternates:
summing the summaries (as workers write them now), and with the summaries gone (it reads every part, as before
them). Local storage, or moto's S3 server with ``--s3``. No Redis, no model.

    python -m benchmarks.finalize                          # 15,625 parts of 64 rows: a 1M-document job, local
    python -m benchmarks.finalize --chunks 2000 --s3       # on moto's S3 server
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from contract.job import PARTS, Job, finalize, forget_summaries, write_job, write_part
from contract.rows import Row
from contract.spec import JobSpec
from contract.storage import Storage, open_storage


def _job(storage: Storage, chunks: int, rows: int) -> Job:
    job = Job(f"bench-{secrets.token_hex(3)}", JobSpec("bench", ["in.jsonl"], "out", "a"), "id", [rows] * chunks)
    write_job(storage, job)
    row = Row(job.id, "d", "The meeting starts at 9 am.", "会议上午9点开始。", "ok", None, [], [], "a",
              source_language="en", target_language="zh")  # fmt: skip
    parts = [[Row(**{**row.to_dict(), "id": f"d{c}-{r}"}) for r in range(rows)] for c in range(chunks)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda c: write_part(storage, job, c, parts[c]), range(chunks)))
    return job


def _timed(storage: Storage, job: Job, summaries: bool) -> float:
    """One finalize from scratch: its markers removed, and its summaries too unless ``summaries``."""
    for key in (job.key("_SUCCESS"), job.key(PARTS)):
        storage.delete(key)
    if not summaries:
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda c: forget_summaries(storage, job, c), range(len(job.chunks))))
    started = time.perf_counter()
    summary = finalize(storage, job)
    assert summary is not None and summary["documents"] == job.documents
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=15_625, help="parts (default 15,625: 1M documents of 64)")
    parser.add_argument("--rows", type=int, default=64, help="rows a part")
    parser.add_argument("--rounds", type=int, default=3, help="pairs of rounds")
    parser.add_argument("--s3", action="store_true", help="on moto's S3 server instead of a local folder")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    server = None
    try:
        if args.s3:
            from tests.services import S3_ENV, S3Server

            server = S3Server().start()
            os.environ.update({**S3_ENV, "FANYI_S3_ENDPOINT_URL": server.url})
            storage = open_storage("s3://bench/out")
            storage.client.create_bucket(Bucket="bench")  # type: ignore[attr-defined]
        else:
            storage = open_storage(str(folder / "out"))
        started = time.perf_counter()
        job = _job(storage, args.chunks, args.rows)
        print(f"{args.chunks:,} parts of {args.rows} rows written in {time.perf_counter() - started:.1f} s", flush=True)
        ratios = []
        for number in range(args.rounds):
            order = (True, False) if number % 2 == 0 else (False, True)
            seconds = {summaries: _timed(storage, job, summaries) for summaries in order}
            ratios.append(seconds[False] / seconds[True])
            print(f"pair {number + 1}: summaries {seconds[True]:.2f} s, every part read {seconds[False]:.2f} s; "
                  f"ratio {ratios[-1]:.1f}", flush=True)  # fmt: skip
        size = len(storage.read(job.key("_SUCCESS")))
        print(f"median ratio {statistics.median(ratios):.1f}; _SUCCESS is {size:,} bytes")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
