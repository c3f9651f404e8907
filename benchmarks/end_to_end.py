"""End-to-end benchmark: documents/s through Redis + a Celery worker + S3, against the engine alone.

    python -m benchmarks.end_to_end [--documents 2000] [--repeat 3]

Same demo artifact (INT8), same documents (two demo-domain sentences each), same chunking (64
documents per engine call) and the same two threads: once in this process with
``DocumentTranslator`` (the engine alone), once as a job: submitted to a throwaway Redis, run by one
warm worker process (``FANYI_THREADS=2``), inputs and results in moto's S3 server. The job's time
runs from ``submit`` to ``_SUCCESS``, so it includes copying the chunk inputs to S3, the queue,
Parquet encoding and the finalizer.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from benchmarks.documents import ARTIFACT, ensure_artifact
from export_tools.fixtures import demo_corpus

CHUNK = 64


def documents(count: int) -> list[tuple[str, str]]:
    rng = random.Random(0)
    return [(f"doc-{n}", f"{demo_corpus.sentence(rng).en} {demo_corpus.sentence(rng).en}") for n in range(count)]


def engine_alone(docs: list[tuple[str, str]]) -> Callable[[], float]:
    from worker.documents.translator import DocumentTranslator
    from worker.engine.translator import Translator

    engine = DocumentTranslator(Translator(ARTIFACT, precision="int8", threads=2))
    engine.translate(docs[:CHUNK])  # warm-up

    def run() -> float:
        started = time.perf_counter()
        for i in range(0, len(docs), CHUNK):
            engine.translate(docs[i : i + CHUNK])
        return time.perf_counter() - started

    return run


@contextlib.contextmanager
def job_system(docs: list[tuple[str, str]], root: Path) -> Iterator[Callable[[], tuple[float, float]]]:
    """Redis, moto's S3 and one warm worker; yields a run: (seconds from submit to the CLI's exit,
    seconds from the job's manifest to its ``_SUCCESS``)."""
    from contract.job import read_job
    from contract.storage import open_storage
    from tests.services import S3_ENV, RedisServer, S3Server, Worker

    redis, s3 = RedisServer().start(), S3Server().start()
    env = {"FANYI_BROKER_URL": redis.url, "FANYI_S3_ENDPOINT_URL": s3.url, **S3_ENV}
    os.environ.update(env)
    from contract.storage import s3_client

    s3_client().create_bucket(Bucket="bench")
    with (root / "in.jsonl").open("w") as f:
        f.writelines(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs)
    spec = {"name": "bench", "inputs": [str(root / "in.jsonl")], "output": "s3://bench/out",
            "artifact": str(ARTIFACT.resolve()), "chunk_documents": CHUNK}  # fmt: skip
    (root / "spec.json").write_text(json.dumps(spec))
    worker = Worker({**env, "FANYI_THREADS": "2", "FANYI_ARTIFACT": str(ARTIFACT.resolve())}, root / "worker.log")
    worker.start()

    def run() -> tuple[float, float]:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "jobs", "submit", str(root / "spec.json"), "--wait"],
                              env={**os.environ, **env}, capture_output=True, text=True)  # fmt: skip
        seconds = time.perf_counter() - started
        assert done.returncode == 0, done.stderr
        storage = open_storage("s3://bench/out")
        job_id = done.stdout.split()[0]
        summary = json.loads(storage.read(f"{job_id}/_SUCCESS"))
        return seconds, summary["finished"] - read_job(storage, job_id).created

    try:
        run()  # warm-up: the worker loads its sessions
        yield run
    finally:
        worker.stop()
        redis.stop()
        s3.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=2000, help="documents per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each path, alternating; medians reported")
    args = parser.parse_args()
    ensure_artifact()
    docs = documents(args.documents)
    alone_run = engine_alone(docs)
    alone, queued, inside = [], [], []
    with tempfile.TemporaryDirectory() as tmp, job_system(docs, Path(tmp)) as job_run:
        for n in range(args.repeat):
            alone.append(alone_run())
            total, manifest_to_success = job_run()
            queued.append(total)
            inside.append(manifest_to_success)
            print(f"run {n + 1}/{args.repeat}: engine {alone[-1]:.1f} s, job {total:.1f} s", file=sys.stderr)
    a, q, i = statistics.median(alone), statistics.median(queued), statistics.median(inside)
    print("| path | documents | seconds (median) | documents/s | overhead |")
    print("| --- | ---: | ---: | ---: | ---: |")
    print(f"| engine alone (DocumentTranslator) | {len(docs)} | {a:.1f} | {len(docs) / a:.1f} | |")
    print(f"| job: manifest written -> `_SUCCESS` | {len(docs)} | {i:.1f} | {len(docs) / i:.1f} | {_pct(i, a)} |")
    print(f"| job: `jobs submit --wait`, CLI start to exit | {len(docs)} | {q:.1f} | {len(docs) / q:.1f} "
          f"| {_pct(q, a)} |")  # fmt: skip


def _pct(value: float, base: float) -> str:
    return f"{100 * (value - base) / base:+.1f}%"


if __name__ == "__main__":
    main()
