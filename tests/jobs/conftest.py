"""Fixtures for the job tests: a real Redis, a real S3 API, job specs over generated corpora."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from contract.rows import read_rows
from contract.settings import priority_lists
from contract.storage import open_storage
from tests.services import ROOT, S3_ENV, Worker

# Short limits so redelivery happens within a test: soft < hard < visibility, as settings.check() demands;
# a one-second heartbeat (a killed worker's chunk is enqueued again after three) and short retry backoff.
LIMITS = {
    "FANYI_SOFT_TIME_LIMIT": "10", "FANYI_TIME_LIMIT": "12", "FANYI_VISIBILITY_TIMEOUT": "15",
    "FANYI_HEARTBEAT": "1", "FANYI_RETRY_MAX_DELAY": "2",
}  # fmt: skip


@pytest.fixture
def services(redis_url, s3_server, monkeypatch, tmp_path):
    """Clean Redis database and a fresh bucket; the environment every process of the test shares."""
    import redis

    redis.Redis.from_url(redis_url).flushdb()
    for key, value in {**S3_ENV, "FANYI_S3_ENDPOINT_URL": s3_server.url}.items():
        monkeypatch.setenv(key, value)
    from contract.storage import s3_client

    bucket = f"fanyi-{tmp_path.name.lower().replace('_', '-')[-40:]}".rstrip("-")
    s3_client().create_bucket(Bucket=bucket)
    env = {"FANYI_BROKER_URL": redis_url, "FANYI_S3_ENDPOINT_URL": s3_server.url, **S3_ENV, **LIMITS}
    return {"env": env, "bucket": bucket, "output": f"s3://{bucket}/results", "redis": redis_url}


def corpus(path: Path, count: int, text: str = "Tom has {n} apples. The meeting starts at 9 am.") -> Path:
    with path.open("w") as f:
        for n in range(count):
            f.write(json.dumps({"id": f"doc-{n:05d}", "text": text.format(n=n % 90 + 2)}) + "\n")
    return path


def spec(path: Path, *, inputs: list[str], output: str, artifact: Path, **extra) -> Path:
    body = {"name": "test", "inputs": inputs, "output": output, "artifact": str(artifact), "chunk_documents": 20}
    path.write_text(json.dumps({**body, **extra}))
    return path


def jobs_cli(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jobs", *args],
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def workers(tmp_path, services):
    """Start worker processes for the test; every one is stopped (or killed) at its end."""
    started: list[Worker] = []

    def start(concurrency: int = 1, app: str = "worker.app", prefix: list[str] | None = None, **env: str) -> Worker:
        log = tmp_path / f"worker-{len(started)}.log"
        worker = Worker({**services["env"], **env}, log, concurrency, app, prefix=prefix or [])
        started.append(worker)
        return worker.start()

    yield start
    for worker in started:
        worker.kill()


def output_rows(output: str, job_id: str) -> list[dict]:
    storage = open_storage(output)
    rows = []
    for key in storage.list(f"{job_id}/parts"):
        rows += read_rows(storage.read(key))
    return rows


def submit(tmp_path, services, demo_artifact, count: int, **extra) -> str:
    path = spec(
        tmp_path / "spec.json",
        inputs=[str(corpus(tmp_path / "in.jsonl", count))],
        output=services["output"],
        artifact=demo_artifact,
        **extra,
    )
    result = jobs_cli("submit", str(path), env=services["env"])
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def wait(job_id: str, services, timeout: float = 240, exit_code: int = 0) -> dict:
    """``jobs wait --json`` until the job ends (exit 0: succeeded; 4: completed with errors): its final status."""
    command = ("wait", job_id, "--output", services["output"], "--timeout", str(timeout), "--json")
    result = jobs_cli(*command, env=services["env"], timeout=timeout + 60)  # jobs wait's own limit ends it first
    assert result.returncode == exit_code, result.stdout + result.stderr
    return json.loads(result.stdout)


def damage_input(output: str, job_id: str, number: int) -> None:
    """Chunk input ``number`` of a job made unreadable (its texts no longer UTF-8), the chunk inputs beside it in the
    same input file left as they were."""
    import pyarrow as pa

    from contract.job import read_job

    storage = open_storage(output)
    key, damaged = read_job(storage, job_id).input_file(number)
    reader = pa.ipc.open_file(pa.BufferReader(storage.read(key)))
    batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
    bad = batches[damaged or 0]
    texts = pa.array([b"\xff\xfe"] * bad.num_rows, pa.binary()).view(pa.string())
    batches[damaged or 0] = bad.set_column(1, "text", texts)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, reader.schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    storage.put(key, sink.getvalue().to_pybytes())


def assert_each_id_once(rows: list[dict], count: int) -> None:
    ids = collections.Counter(r["id"] for r in rows)
    assert set(ids) == {f"doc-{n:05d}" for n in range(count)}
    assert max(ids.values()) == 1


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in the scrape:\n{text[:2000]}")


def queued(url: str) -> int:
    """Messages waiting in translate.cpu, over all its priority lists."""
    client = redis.Redis.from_url(url)
    return sum(client.llen(name) for name in priority_lists("translate.cpu"))


@pytest.fixture
def server(tmp_path, services, demo_artifact):
    """Start ``python -m jobs serve`` processes on the test's bucket (teams under ``teams/``), the demo artifact's
    folder offered, inputs read from ``tmp_path/corpora``; each is stopped at the test's end."""
    from tests.jobs.http import Server

    started: list[Server] = []

    def start(*extra: str) -> Server:
        args = ["--output", f"s3://{services['bucket']}/teams", "--artifacts", str(Path(demo_artifact).parent),
                "--inputs", str(tmp_path / "corpora"), *extra]  # fmt: skip
        started.append(Server(tmp_path, services, *args))
        return started[-1]

    yield start
    for s in started:
        if s.process.poll() is None:
            s.stop()


@pytest.fixture
def listener():
    """A webhook receiver whose first delivery gets a 500."""
    from tests.jobs.http import Listener

    found = Listener(failures=1)
    yield found
    found.http.shutdown()
