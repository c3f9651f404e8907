"""The chaos loop: a job ends, every document once, while its workers are killed and restarted under their names.

    python -m benchmarks.chaos [--documents 10000] [--workers 2] [--kill-every 5 10] [--heartbeat 3] [--seed 0]

A throwaway Redis, moto's S3 server and ``--workers`` worker processes with fixed node names. The same
job runs twice: once undisturbed (the reference), then while a loop SIGKILLs a random worker (main
process and pool at once: an OOM kill of its container) every 5-10 s and starts it again under the
same node name, as a container restarted in its pod comes back, until the job's ``_SUCCESS``. The
broker's visibility timeout is the default (30 minutes): nothing ends by waiting it out.

Prints the time each run took to end, the kills, and whether every document is there exactly once with
the reference's translation; exits 1 if not.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.documents import ARTIFACT, ensure_artifact
from benchmarks.end_to_end import documents

CHUNK = 20  # documents per chunk: chunks of a second or so, so that kills land in the middle of some


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=10000, help="documents in the job (default 10000)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--kill-every", type=float, nargs=2, default=(5.0, 10.0), metavar=("MIN", "MAX"),
                        help="seconds between kills, drawn uniformly (default 5 10)")  # fmt: skip
    parser.add_argument("--heartbeat", type=float, default=3.0, help="FANYI_HEARTBEAT of the workers (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill schedule (default 0)")
    args = parser.parse_args()
    ensure_artifact()
    with tempfile.TemporaryDirectory(prefix="fanyi-chaos-") as folder:
        ok = run(Path(folder), args)
    sys.exit(0 if ok else 1)


def run(root: Path, args: argparse.Namespace) -> bool:
    from tests.services import S3_ENV, RedisServer, S3Server, Worker

    redis, s3 = RedisServer().start(), S3Server().start()
    env = {"FANYI_BROKER_URL": redis.url, "FANYI_S3_ENDPOINT_URL": s3.url, "FANYI_HEARTBEAT": str(args.heartbeat),
           **S3_ENV}  # fmt: skip
    os.environ.update(env)
    workers = [Worker(dict(env), root / f"worker-{n}.log") for n in range(args.workers)]
    try:
        from contract.storage import s3_client

        s3_client().create_bucket(Bucket="chaos")
        for worker in workers:
            worker.start()
        job(write_spec(root, 2 * CHUNK, "warm-up"), "warm-up", [], args)  # sessions made, caches warm
        spec = write_spec(root, args.documents, "in")
        reference, clean_s = job(spec, "reference", [], args)
        print(f"reference run: ended in {clean_s:.1f} s", flush=True)
        rows, chaos_s = job(spec, "chaos", workers, args)
    finally:
        for worker in workers:
            worker.kill()
        redis.stop()
        s3.stop()
    return verdict(rows, reference, args.documents, chaos_s, clean_s)


def write_spec(root: Path, count: int, name: str) -> Path:
    with (root / f"{name}.jsonl").open("w") as f:
        f.writelines(json.dumps({"id": i, "text": t}) + "\n" for i, t in documents(count))
    spec = {"name": "chaos", "inputs": [str(root / f"{name}.jsonl")], "output": "s3://chaos/out",
            "artifact": str(ARTIFACT.resolve()), "chunk_documents": CHUNK}  # fmt: skip
    (root / f"{name}.json").write_text(json.dumps(spec))
    return root / f"{name}.json"


def job(spec: Path, job_id: str, victims: list, args: argparse.Namespace) -> tuple[list[dict], float]:
    """Submit the job and wait for its ``_SUCCESS`` (written by the workers, not by this process), killing
    and restarting one of ``victims`` at random intervals meanwhile; its rows and the seconds it took."""
    from contract.rows import read_rows
    from contract.storage import open_storage

    storage, rng = open_storage("s3://chaos/out"), random.Random(args.seed)
    started = time.monotonic()
    command = [sys.executable, "-m", "jobs", "submit", str(spec), "--job-id", job_id]
    subprocess.run(command, env=os.environ, check=True, capture_output=True)
    kills, next_kill = 0, started + rng.uniform(*args.kill_every)
    while not storage.exists(f"{job_id}/_SUCCESS"):
        if victims and time.monotonic() >= next_kill:
            victim = rng.choice(victims)
            victim.restart()  # SIGKILL, then the same node name
            kills += 1
            done = len(storage.list(f"{job_id}/parts"))
            print(f"  {time.monotonic() - started:6.1f} s: killed and restarted {victim.name} "
                  f"({done} parts written)", flush=True)  # fmt: skip
            next_kill = time.monotonic() + rng.uniform(*args.kill_every)
        time.sleep(0.2)
    took = time.monotonic() - started
    if victims:
        print(f"chaos run: {kills} kills, ended in {took:.1f} s", flush=True)
    rows = [row for key in storage.list(f"{job_id}/parts") for row in read_rows(storage.read(key))]
    return rows, took


def verdict(rows: list[dict], reference: list[dict], count: int, chaos_s: float, clean_s: float) -> bool:
    ids = collections.Counter(r["id"] for r in rows)
    clean = {r["id"]: r["translation"] for r in reference}
    missing = count - len(ids)
    duplicated = sum(n - 1 for n in ids.values() if n > 1)
    differ = sum(1 for r in rows if r["translation"] != clean.get(r["id"]))
    errors = sum(1 for r in rows if r["status"] == "error")
    print(f"documents: {len(ids)}/{count} ({missing} missing, {duplicated} duplicated, {errors} errors), "
          f"{differ} translations differ from the reference; time to end {chaos_s:.1f} s "
          f"({chaos_s / clean_s:.2f}x the undisturbed run's {clean_s:.1f} s)")  # fmt: skip
    for reason in sorted({r["error"] for r in rows if r["status"] == "error"})[:5]:
        print(f"  error: {reason}")
    return missing == duplicated == differ == errors == 0


if __name__ == "__main__":
    main()
