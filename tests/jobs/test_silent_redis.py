"""A Redis that accepts connections and never answers (a dead proxy, a firewall dropping replies, ``rediss://``
against a plain server) is one error line naming it, never a hang: every client has FANYI_REDIS_TIMEOUT."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from contract.job import read_job
from contract.storage import open_storage
from tests.jobs.conftest import corpus, jobs_cli, spec
from tests.services import ROOT
from tests.tcp_cutter import Blackhole

# seconds: a ceiling only a hang reaches, however loaded the machine (each command answers within a few of its
# 1-s timeouts, plus its start); what is asserted is the line that names the timeout
HANG = 300


@pytest.fixture
def silent_redis() -> Iterator[str]:
    with Blackhole() as hole:
        yield f"redis://:pw-never-shown@127.0.0.1:{hole.port}/0"


def only_error_line(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "pw-never-shown" not in result.stderr + result.stdout
    return lines[0]


def silent_env(services, url: str) -> dict[str, str]:
    return {**services["env"], "FANYI_BROKER_URL": url, "FANYI_CACHE_URL": url, "FANYI_REDIS_TIMEOUT": "1"}


@pytest.mark.parametrize("broker", ["blackhole", "rediss-to-plain"])
def test_submit_to_a_broker_that_never_answers_is_one_line_naming_it(
    broker, tmp_path, services, demo_artifact, silent_redis
) -> None:
    url = silent_redis if broker == "blackhole" else services["redis"].replace("redis://", "rediss://", 1)
    path = spec(tmp_path / "spec.json", inputs=[str(corpus(tmp_path / "in.jsonl", 3))], output=services["output"],
                artifact=demo_artifact)  # fmt: skip
    result = jobs_cli("submit", str(path), env=silent_env(services, url), timeout=HANG)
    line = only_error_line(result)
    shown = url.replace("pw-never-shown", "***")
    assert f"the broker at {shown} did not answer within 1 s (FANYI_REDIS_TIMEOUT)" in line, line
    assert "nothing was written" in line and open_storage(services["output"]).list("") == []


def test_the_other_commands_name_the_redis_that_never_answers_or_do_without_it(
    tmp_path, services, demo_artifact, silent_redis
) -> None:
    from jobs import api

    path = spec(tmp_path / "spec.json", inputs=[str(corpus(tmp_path / "in.jsonl", 3))], output=services["output"],
                artifact=demo_artifact)  # fmt: skip
    job_id = api.submit(api.load_spec(path), enqueue=False)  # written, not enqueued: no Redis needed
    env, output = silent_env(services, silent_redis), services["output"]
    shown = silent_redis.replace("pw-never-shown", "***")
    commands = {
        "resume": ["resume", job_id, "--output", output],
        "registry": ["status", job_id],  # where the job is: the registry is in Redis
        "memory": ["memory", "clear", "--output", output],
        **{verb: [verb, *([job_id] if verb != "list" else []), "--output", output] for verb in ("status", "list")},
    }  # each waits out its timeouts: all at once
    with ThreadPoolExecutor(len(commands)) as pool:
        results = dict(zip(commands, pool.map(lambda c: jobs_cli(*c, env=env, timeout=HANG), commands.values())))
    line = only_error_line(results["resume"])
    assert f"after 0 of 1 chunks the broker at {shown} did not answer" in line and f"jobs resume {job_id}" in line
    line = only_error_line(results["registry"])
    assert f"the registry of jobs, Redis at {shown} did not answer" in line and "pass --output" in line
    line = only_error_line(results["memory"])
    assert f"the cache at {shown} did not answer" in line and "nothing was cleared" in line
    for verb in ("status", "list"):  # storage is the system of record: these do without Redis
        assert results[verb].returncode == 0 and job_id in results[verb].stdout, results[verb].stderr
    assert read_job(open_storage(output), job_id).chunks == [3]


def test_beat_stops_on_a_redis_that_never_answers_instead_of_hanging(tmp_path, silent_redis) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FANYI_BROKER_URL": silent_redis, "FANYI_REDIS_TIMEOUT": "1",
           "FANYI_SCHEDULES": str(tmp_path)}  # fmt: skip
    command = [sys.executable, "-m", "celery", "-A", "worker.app", "beat", "-S", "jobs.schedules.SpecScheduler",
               "--pidfile=", "--schedule", str(tmp_path / "beat")]  # fmt: skip
    result = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=HANG)
    assert result.returncode != 0 and "TimeoutError" in result.stderr, result.stderr[-2000:]
