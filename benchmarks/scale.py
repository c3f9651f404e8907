"""What the producer side costs at scale: submit, status, list, finalize and cancel of jobs of 10k to 10M synthetic
short documents, on a local output or moto's S3 server, with a throwaway Redis and no worker.

    python -m benchmarks.scale                                    # 10k, 100k, 1M documents, local output
    python -m benchmarks.scale --documents 1000000 10000000 --s3  # on moto's S3 server
    python -m benchmarks.scale --documents 1000000 --vs /tmp/old  # submit paired against another checkout
    python -m benchmarks.scale --documents 10000000 --no-finalize # 10M: submit, status and cancel only

Each step runs as its own process (``python -m jobs ...``, as a user runs it): its wall time, its CPU time (user +
system, from ``wait4``) and its peak resident memory (``VmHWM``, read while it runs); Redis's memory is read before
and after the submit. A finalize needs every part: the job's parts and summaries are written synthetically
(``write_part`` of one row per document), then ``finalize`` is timed in this process, as the task that writes the
last part runs it. ``--list`` times ``jobs list`` over 100 jobs. ``cancel`` reports the job's messages still queued
once it returns. ``--vs PATH`` times the submit of this checkout and of the one at PATH in alternating pairs on the
same input and reports the ratio of each pair.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from benchmarks.documents import ARTIFACT, ensure_artifact
from jobs.embedded import ROOT, RedisServer

CORPORA = ROOT / "build" / "scale"
TEXTS = ("The meeting starts at 9 am.", "Tom has 3 apples and a bottle of water.", "Is the train late again today?")
LISTED_JOBS = 100


@dataclass
class Run:
    wall: float
    cpu: float
    peak_mib: float
    output: str

    def line(self) -> str:
        return f"{self.wall:6.1f} s wall, {self.cpu:6.1f} s CPU, peak {self.peak_mib:5.0f} MiB"


def corpus(documents: int) -> Path:
    """A JSON-lines corpus of ``documents`` short documents, made once under build/scale."""
    path = CORPORA / f"docs-{documents}.jsonl"
    if not path.exists():
        CORPORA.mkdir(parents=True, exist_ok=True)
        with open(f"{path}.tmp", "w", encoding="utf-8") as out:
            for n in range(documents):
                out.write(json.dumps({"id": f"doc-{n}", "text": f"{TEXTS[n % 3]} Number {n}."}) + "\n")
        os.replace(f"{path}.tmp", path)
    return path


def run(command: list[str], env: dict[str, str], cwd: Path = ROOT) -> Run:
    """One ``python -m jobs`` command as its own process; it must succeed. Its peak memory is its own ``VmHWM``,
    read while it runs (``ru_maxrss`` would carry this process's high-water mark through fork and exec)."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "jobs", *command], cwd=cwd, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    output: list[bytes] = []
    reader = threading.Thread(target=lambda: output.append(process.stdout.read() if process.stdout else b""))
    reader.start()
    peak = 0.0
    while True:
        pid, code, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, _vm_hwm(process.pid))
        time.sleep(0.05)
    process.returncode = os.waitstatus_to_exitcode(code)  # reaped here: Popen must not wait for it again
    reader.join()
    wall, text = time.perf_counter() - started, b"".join(output).decode()
    if process.returncode not in (0, 6):  # 6: a cancelled job's `wait`
        raise SystemExit(f"`python -m jobs {' '.join(command)}` failed:\n{text}")
    return Run(wall, usage.ru_utime + usage.ru_stime, peak, text)


def _vm_hwm(pid: int) -> float:
    """A running process's peak resident memory so far, MiB (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass
class Place:
    """Where the jobs go: an output prefix, the environment every command runs with, a throwaway Redis."""

    output: str
    env: dict[str, str]
    redis: RedisServer

    def redis_mib(self) -> float:
        import redis

        return float(redis.Redis.from_url(self.redis.url).info("memory")["used_memory"]) / 2**20

    def queued(self) -> int:
        import redis

        client = redis.Redis.from_url(self.redis.url)
        return sum(int(client.llen(key)) for key in client.scan_iter("fanyi*") if client.type(key) == b"list")


@contextmanager
def place(s3: bool) -> Iterator[Place]:
    folder = Path(tempfile.mkdtemp(prefix="fanyi-scale-"))
    redis = RedisServer().start()
    server = None
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FANYI_BROKER_URL": redis.url, "FANYI_CACHE_URL": redis.url}
    from contract import cache, settings

    settings.BROKER_URL = settings.CACHE_URL = redis.url  # what this process finalizes and lists with, too
    cache.cache.cache_clear()
    try:
        if s3:
            from tests.services import S3_ENV, S3Server

            server = S3Server().start()
            env |= {**S3_ENV, "FANYI_S3_ENDPOINT_URL": server.url}
            os.environ.update({**S3_ENV, "FANYI_S3_ENDPOINT_URL": server.url})
            from contract.storage import s3_client

            s3_client().create_bucket(Bucket="scale")
            output = "s3://scale/out"
        else:
            output = str(folder / "out")
        yield Place(output, env | {"FANYI_OUTPUT": output}, redis)
    finally:
        if server is not None:
            server.stop()
        redis.stop()
        shutil.rmtree(folder, ignore_errors=True)


def spec_file(where: Place, documents: int, name: str = "scale") -> Path:
    path = Path(tempfile.mkdtemp(prefix="fanyi-spec-")) / "spec.json"
    spec = {"name": name, "inputs": [str(corpus(documents))], "artifact": str(ARTIFACT.resolve()),
            "output": where.output}  # fmt: skip
    path.write_text(json.dumps(spec))
    return path


def submit(where: Place, documents: int, job_id: str, checkout: Path = ROOT) -> tuple[Run, float]:
    """The submit's run and the Redis memory it added (MiB)."""
    before = where.redis_mib()
    env = where.env | {"PYTHONPATH": str(checkout)}
    result = run(["submit", str(spec_file(where, documents)), "--job-id", job_id], env, checkout)
    return result, where.redis_mib() - before


def paired(where: Place, documents: int, other: Path, rounds: int) -> None:
    """Submit of this checkout (A) against the one at ``other`` (B), alternating A B, B A, ..."""
    ratios = []
    for number in range(rounds):
        order = [ROOT, other] if number % 2 == 0 else [other, ROOT]
        runs = {}
        for checkout in order:
            runs[checkout], _ = submit(where, documents, f"pair-{number}-{'a' if checkout == ROOT else 'b'}", checkout)
            where.redis.stop()  # its messages gone: every submit starts from an empty broker
            where.redis.start()
        ratios.append(runs[other].wall / runs[ROOT].wall)
        print(f"pair {number + 1}: this {runs[ROOT].line()} | {other}: {runs[other].line()} | "
              f"{ratios[-1]:.2f}x", flush=True)  # fmt: skip
    print(f"median: this checkout's submit {statistics.median(ratios):.2f}x faster than {other}'s", flush=True)


def measure(where: Place, documents: int, finalizing: bool) -> None:
    job_id = f"scale-{documents}"
    submitted, redis_mib = submit(where, documents, job_id)
    print(f"  submit    {submitted.line()}, Redis +{redis_mib:.1f} MiB", flush=True)
    print(f"  status    {run(['status', job_id], where.env).line()}", flush=True)
    cancelled = run(["cancel", job_id], where.env)
    print(f"  cancel    {cancelled.line()}, messages left queued: {where.queued():,}", flush=True)
    if not finalizing:
        return
    run(["resume", job_id], where.env)
    seconds = _write_parts(where, job_id)
    print(f"  finalize  {_finalized(where, job_id)} (in process; parts written in {seconds:.0f} s)", flush=True)
    finalized = run(["status", job_id], where.env)
    assert "succeeded" in finalized.output, finalized.output
    print(f"  status    {finalized.line()} (once finalized)", flush=True)


def _write_parts(where: Place, job_id: str) -> float:
    """Every chunk's part and summary as workers write them, one synthetic row per document, and each group's sum
    (written once here: a worker lists its group's summaries after each part, which moto's S3 does in a time that
    grows with the bucket)."""
    from contract import job as contract_job
    from contract.job import SUMMARY_GROUP, read_job, write_part
    from contract.rows import Row
    from contract.storage import open_storage

    started = time.perf_counter()
    storage = open_storage(where.output)
    job = read_job(storage, job_id)
    row = Row(job.id, "d", "The meeting starts at 9 am.", "会议上午9点开始。", "ok", None, [], [], job.artifact_id,
              source_language="en", target_language="zh")  # fmt: skip
    fields = row.to_dict()

    def write(chunk: int) -> None:
        rows = [Row(**{**fields, "id": f"c{chunk}-{n}"}) for n in range(job.chunks[chunk])]
        write_part(storage, job, chunk, rows)

    summing, contract_job._sum_group = contract_job._sum_group, lambda *_: None  # each group summed once, below
    try:
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(write, range(len(job.chunks))))
            list(pool.map(lambda group: summing(storage, job, group), range(-(-len(job.chunks) // SUMMARY_GROUP))))
    finally:
        contract_job._sum_group = summing
    return time.perf_counter() - started


def _finalized(where: Place, job_id: str) -> str:
    """One finalize of the job, timed in this process (what the task that writes the last part runs)."""
    from contract.job import finalize, read_job
    from contract.storage import open_storage

    storage = open_storage(where.output)
    job = read_job(storage, job_id)
    started, cpu = time.perf_counter(), time.process_time()
    summary = finalize(storage, job)
    assert summary is not None and summary["documents"] == job.documents
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return f"{wall:6.2f} s wall, {cpu:6.2f} s CPU, _SUCCESS {len(storage.read(job.key('_SUCCESS'))):,} bytes"


def listing(where: Place) -> None:
    """``jobs list`` over ``LISTED_JOBS`` jobs of 10 documents (every third one finished): the listing in this
    process (as the API server runs it), and the CLI."""
    from jobs import api

    submitted = []
    for n in range(LISTED_JOBS):
        job_id = f"listed-{n:03d}"
        run(["submit", str(spec_file(where, 10, name=f"listed{n}")), "--job-id", job_id], where.env)
        submitted.append(job_id)
    for job_id in submitted[::3]:
        _write_parts(where, job_id)
        _finalized(where, job_id)
    started, cpu = time.perf_counter(), time.process_time()
    listed = api.jobs(where.output)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert len(listed) == LISTED_JOBS and sum(s.state == "succeeded" for s in listed) == len(submitted[::3])
    print(f"  list      {wall:6.2f} s wall, {cpu:6.2f} s CPU (in process, {LISTED_JOBS} jobs)", flush=True)
    print(f"  list      {run(['list'], where.env).line()} (the CLI)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, nargs="+", default=[10_000, 100_000, 1_000_000],
                        help="corpus sizes (default 10k 100k 1M)")  # fmt: skip
    parser.add_argument("--s3", action="store_true", help="on moto's S3 server instead of a local folder")
    parser.add_argument("--vs", type=Path, help="only the submit, paired against the checkout at this path")
    parser.add_argument("--rounds", type=int, default=3, help="pairs of rounds with --vs (default 3)")
    parser.add_argument("--list", action="store_true", help="also time `jobs list` over 100 jobs")
    parser.add_argument("--no-finalize", action="store_true", help="skip writing every part and finalizing")
    args = parser.parse_args()
    ensure_artifact()
    for documents in args.documents:
        corpus(documents)
        with place(args.s3) as where:
            print(f"{documents:,} documents, {'S3 (moto)' if args.s3 else 'local'} output", flush=True)
            if args.vs:
                paired(where, documents, args.vs.resolve(), args.rounds)
            else:
                measure(where, documents, finalizing=not args.no_finalize)
    if args.list:
        with place(args.s3) as where:
            listing(where)


if __name__ == "__main__":
    main()
