"""An output prefix means the same in every verb: a relative path is the absolute one, and FANYI_OUTPUT is the
default wherever --output is taken."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import redis

from contract.cache import MEMORY_KEY
from contract.job import Job, write_job
from contract.spec import JobSpec
from contract.storage import open_storage
from tests.services import ROOT


def cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "FANYI_OUTPUT"}
    return subprocess.run([sys.executable, "-m", "jobs", *args], env={**environment, "PYTHONPATH": str(ROOT), **env},
                          cwd=cwd, capture_output=True, text=True, timeout=120)  # fmt: skip


def test_relative_outputs_and_fanyi_output_mean_the_same_jobs_and_memories_in_every_verb(tmp_path, services):
    results = tmp_path / "results"
    job = Job("paths-1", JobSpec("paths", ["in.jsonl"], "out", "artifact"), "marian-x", [3])
    write_job(open_storage(str(results)), job)
    client = redis.Redis.from_url(services["redis"])

    def remember() -> None:  # what workers write: the memory of the job's output, which a spec made absolute
        client.hset(MEMORY_KEY.format(output=str(results), scope="shared"), mapping={"a": "1", "b": "2"})
        client.hset(MEMORY_KEY.format(output=str(results), scope=job.id), mapping={"c": "3"})

    env, default = services["env"], {**services["env"], "FANYI_OUTPUT": "results"}
    for how in (("--output", "results"), ("--output", "./results/"), ()):
        given = env if how else default
        status = cli("status", job.id, *how, cwd=tmp_path, env=given)
        assert status.returncode == 0 and f"output {results}/paths-1/parts/" in status.stdout, status.stderr
        listed = cli("list", *how, cwd=tmp_path, env=given)
        assert listed.returncode == 0 and listed.stdout.startswith("paths-1 "), listed.stderr
        assert listed.stdout.count("submitting") == 1, listed.stdout  # the state once
        remember()
        mine = cli("memory", "clear", *how, "--job", job.id, cwd=tmp_path, env=given)
        assert mine.returncode == 0 and mine.stdout.endswith(f"1 translation memory entries cleared under {results}\n")
        cleared = cli("memory", "clear", *how, cwd=tmp_path, env=given)
        assert cleared.returncode == 0 and f"2 translation memory entries cleared under {results}" in cleared.stdout

    for verb in (("list",), ("memory", "clear")):
        unsaid = cli(*verb, cwd=tmp_path, env=env)
        assert unsaid.returncode == 1 and unsaid.stderr.startswith("error: ") and "FANYI_OUTPUT" in unsaid.stderr
        assert len(unsaid.stderr.splitlines()) == 1, unsaid.stderr


def test_a_relative_memory_prefix_is_made_absolute_as_the_output_is(tmp_path) -> None:
    from contract.spec import JobSpec

    raw = {"name": "n", "inputs": ["in.jsonl"], "output": "results", "artifact": "art", "memory": "shared",
           "memory_prefix": "memories"}  # fmt: skip
    spec = JobSpec.from_dict(raw).resolved(tmp_path)
    assert spec.memory_prefix == str(tmp_path / "memories")  # the key `memory clear --output memories` clears
    assert JobSpec.from_dict({**raw, "memory_prefix": "s3://b/m"}).resolved(tmp_path).memory_prefix == "s3://b/m"
