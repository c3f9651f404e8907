"""End-to-end benchmark: a job through Redis, a Celery worker and storage, against the engine alone.

    python -m benchmarks.end_to_end [--documents 2000] [--repeat 3] [--threads 1] [--outputs local s3]

Same demo artifact at the worker's default precision, same documents (two demo-domain sentences each),
same chunking (64 documents per engine call) and the same threads: once in this process with
``DocumentTranslator`` (the engine alone), once as a job: submitted to a throwaway Redis and run by one
warm worker process (``--concurrency 1``, ``FANYI_THREADS``), its output on local disk or in moto's S3
server. Runs alternate (engine, then a job on each output), ``--repeat`` times; medians.

The job's wall time runs from ``jobs submit --wait`` starting to its exit (reading and planning the
corpus, the queue, chunk inputs and Parquet parts in storage, the finalizer, the CLI's own start); its
CPU time is the worker's (its main process and pool child, also shown alone) plus the submitting CLI's;
Redis's and moto's are not counted (moto stands in for a remote store). The engine alone: this
process's CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from benchmarks.documents import ARTIFACT, ensure_artifact
from export_tools.fixtures import demo_corpus

CHUNK = 64


@dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float
    worker_cpu: float = 0.0  # of ``cpu``: the worker's (the rest: the submitting CLI's)


def documents(count: int) -> list[tuple[str, str]]:
    rng = random.Random(0)
    return [(f"doc-{n}", f"{demo_corpus.sentence(rng).en} {demo_corpus.sentence(rng).en}") for n in range(count)]


def engine_alone(docs: list[tuple[str, str]], threads: int) -> Callable[[], Timing]:
    from worker.documents.translator import DocumentTranslator
    from worker.engine.translator import Translator

    engine = DocumentTranslator(Translator(ARTIFACT, threads=threads))
    engine.translate(docs[:CHUNK])  # warm-up

    def run() -> Timing:
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(0, len(docs), CHUNK):
            engine.translate(docs[i : i + CHUNK])
        return Timing(time.perf_counter() - wall, time.process_time() - cpu)

    return run


def _tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its live children."""
    root = psutil.Process(pid)
    total = 0.0
    for process in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def job_system(
    docs: list[tuple[str, str]], root: Path, threads: int, outputs: list[str]
) -> Iterator[dict[str, Callable[[], Timing]]]:
    """Redis, moto's S3 and one warm worker; per output, a run of the whole job."""
    from tests.services import S3_ENV, RedisServer, S3Server, Worker

    redis, s3 = RedisServer().start(), S3Server().start()
    env = {"FANYI_BROKER_URL": redis.url, "FANYI_S3_ENDPOINT_URL": s3.url, **S3_ENV}
    os.environ.update(env)
    from contract.storage import s3_client

    s3_client().create_bucket(Bucket="bench")
    with (root / "in.jsonl").open("w") as f:
        f.writelines(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs)
    worker_env = {**env, "FANYI_THREADS": str(threads), "FANYI_ARTIFACT": str(ARTIFACT.resolve())}
    worker = Worker(worker_env, root / "worker.log")
    worker.start()
    assert worker.process is not None

    def job(output: str) -> Callable[[], Timing]:
        spec = root / f"spec-{output}.json"
        target = "s3://bench/out" if output == "s3" else str(root / "out")
        spec.write_text(json.dumps({"name": "bench", "inputs": [str(root / "in.jsonl")], "output": target,
                                    "artifact": str(ARTIFACT.resolve()), "chunk_documents": CHUNK}))  # fmt: skip

        def run() -> Timing:
            assert worker.process is not None
            worker_cpu, cli_cpu = _tree_cpu(worker.process.pid), _children_cpu()
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "jobs", "submit", str(spec), "--wait"],
                                  env={**os.environ, **env}, capture_output=True, text=True)  # fmt: skip
            wall = time.perf_counter() - started
            assert done.returncode == 0, done.stderr
            in_worker = _tree_cpu(worker.process.pid) - worker_cpu
            return Timing(wall, in_worker + _children_cpu() - cli_cpu, in_worker)

        return run

    try:
        runs = {output: job(output) for output in outputs}
        for run in runs.values():
            run()  # warm-up: the worker loads its sessions, moto its bucket
        yield runs
    finally:
        worker.stop()
        redis.stop()
        s3.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=2000, help="documents per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each path, alternating; medians reported")
    parser.add_argument("--threads", type=int, default=1, help="ONNX Runtime threads, engine and worker alike")
    parser.add_argument("--outputs", nargs="+", default=["local", "s3"], choices=["local", "s3"])
    args = parser.parse_args()
    ensure_artifact()
    docs = documents(args.documents)
    alone_run = engine_alone(docs, args.threads)
    timings: dict[str, list[Timing]] = {"engine": [], **{output: [] for output in args.outputs}}
    with tempfile.TemporaryDirectory() as tmp, job_system(docs, Path(tmp), args.threads, args.outputs) as jobs:
        for n in range(args.repeat):
            timings["engine"].append(alone_run())
            for output, run in jobs.items():
                timings[output].append(run())
            said = ", ".join(f"{k} {v[-1].wall:.1f} s ({v[-1].cpu:.1f} s CPU)" for k, v in timings.items())
            print(f"run {n + 1}/{args.repeat}: {said}", file=sys.stderr, flush=True)
    print(_table(timings, len(docs)))


def _table(timings: dict[str, list[Timing]], count: int) -> str:
    """Medians, and each job's ratio to the engine run of the same round (median of the per-round ratios)."""
    engine = timings["engine"]
    lines = ["| path | documents | wall s | CPU s | documents/s | wall / engine | CPU / engine | worker CPU / engine |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for path, runs in timings.items():
        wall, cpu = statistics.median(r.wall for r in runs), statistics.median(r.cpu for r in runs)
        if path == "engine":
            speed = count / wall
            lines.append(f"| engine alone (DocumentTranslator) | {count} | {wall:.1f} | {cpu:.1f} | {speed:.1f} ||||")
            continue
        by_wall = statistics.median(r.wall / e.wall for r, e in zip(runs, engine))
        by_cpu = statistics.median(r.cpu / e.cpu for r, e in zip(runs, engine))
        by_worker = statistics.median(r.worker_cpu / e.cpu for r, e in zip(runs, engine))
        lines.append(f"| job, {path} output (`jobs submit --wait`) | {count} | {wall:.1f} | {cpu:.1f} | "
                     f"{count / wall:.1f} | {by_wall:.3f} | {by_cpu:.3f} | {by_worker:.3f} |")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    main()
