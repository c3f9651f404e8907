"""End-to-end benchmark: documents/s through Redis + a Celery worker + S3, against the engine alone.

    python -m benchmarks.end_to_end [--documents 2000]

Same demo artifact (INT8), same documents (two demo-domain sentences each), same chunking (64
documents per engine call) and the same two threads: once in this process with
``DocumentTranslator`` (the engine alone), once as a job: submitted to a throwaway Redis, run by one
warm worker process (``FANYI_THREADS=2``), inputs and results in moto's S3 server. The job's time
runs from ``submit`` to ``_SUCCESS``, so it includes copying the chunk inputs to S3, the queue,
Parquet encoding and the finalizer.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.documents import ARTIFACT, ensure_artifact
from export_tools.fixtures import demo_corpus

CHUNK = 64


def documents(count: int) -> list[tuple[str, str]]:
    rng = random.Random(0)
    return [(f"doc-{n}", f"{demo_corpus.sentence(rng).en} {demo_corpus.sentence(rng).en}") for n in range(count)]


def engine_alone(docs: list[tuple[str, str]]) -> float:
    from worker.documents import DocumentTranslator
    from worker.engine.translator import Translator

    engine = DocumentTranslator(Translator(ARTIFACT, precision="int8", threads=2))
    engine.translate(docs[:CHUNK])  # warm-up
    started = time.perf_counter()
    for i in range(0, len(docs), CHUNK):
        engine.translate(docs[i : i + CHUNK])
    return time.perf_counter() - started


def through_the_queue(docs: list[tuple[str, str]], root: Path) -> float:
    from tests.services import S3_ENV, RedisServer, S3Server, Worker

    redis, s3 = RedisServer().start(), S3Server().start()
    env = {"FANYI_BROKER_URL": redis.url, "FANYI_S3_ENDPOINT_URL": s3.url, **S3_ENV}
    os.environ.update(env)
    from worker.storage import s3_client

    s3_client().create_bucket(Bucket="bench")
    with (root / "in.jsonl").open("w") as f:
        f.writelines(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs)
    spec = {"name": "bench", "inputs": [str(root / "in.jsonl")], "output": "s3://bench/out",
            "artifact": str(ARTIFACT.resolve()), "chunk_documents": CHUNK}  # fmt: skip
    (root / "spec.json").write_text(json.dumps(spec))
    worker = Worker({**env, "FANYI_THREADS": "2", "FANYI_ARTIFACT": str(ARTIFACT.resolve())}, root / "worker.log")
    worker.start()
    try:
        warm = subprocess.run([sys.executable, "-m", "jobs", "submit", str(root / "spec.json"), "--wait"],
                              env={**os.environ, **env}, capture_output=True, text=True)  # fmt: skip
        assert warm.returncode == 0, warm.stderr
        started = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "jobs", "submit", str(root / "spec.json"), "--wait"],
                             env={**os.environ, **env}, capture_output=True, text=True)  # fmt: skip
        assert run.returncode == 0, run.stderr
        return time.perf_counter() - started
    finally:
        worker.stop()
        redis.stop()
        s3.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=2000, help="documents per run")
    args = parser.parse_args()
    ensure_artifact()
    docs = documents(args.documents)
    alone = engine_alone(docs)
    with tempfile.TemporaryDirectory() as tmp:
        queued = through_the_queue(docs, Path(tmp))
    print("| path | documents | seconds | documents/s | overhead |")
    print("| --- | ---: | ---: | ---: | ---: |")
    print(f"| engine alone (DocumentTranslator) | {len(docs)} | {alone:.1f} | {len(docs) / alone:.1f} | |")
    overhead = 100 * (queued - alone) / alone
    print(f"| submit -> Redis -> worker -> S3 -> _SUCCESS | {len(docs)} | {queued:.1f} | {len(docs) / queued:.1f} "
          f"| {overhead:+.1f}% |")  # fmt: skip


if __name__ == "__main__":
    main()
