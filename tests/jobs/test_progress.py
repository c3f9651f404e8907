"""What ``jobs status`` and ``wait`` say while a job runs: an ETA while it advances, "no progress for" once it
stalls, and storage that stops answering on the status line rather than silence or a traceback."""

from __future__ import annotations

import os
import socket
import time

from contract.job import Job, part_key, write_job
from contract.spec import JobSpec
from contract.storage import open_storage
from tests.jobs.conftest import jobs_cli


def running_job(output: str, *, submitted_ago: float, parts_written_ago: list[float]) -> str:
    """A running job of four chunks, submitted ``submitted_ago`` s ago, with parts written at those times."""
    storage = open_storage(output)
    job = Job(
        "stuck-1",
        JobSpec("stuck", ["in.jsonl"], "out", "artifact"),
        "marian-x",
        [10, 10, 10, 10],
        created=time.time() - submitted_ago,
    )
    write_job(storage, job)
    storage.put(job.key("_ENQUEUED"), b"4\n")
    for chunk, ago in enumerate(parts_written_ago):
        storage.put(part_key(job.id, chunk), b"rows")
        stamp = time.time() - ago
        os.utime(os.path.join(output, part_key(job.id, chunk)), (stamp, stamp))
    return job.id


def test_a_job_that_stopped_advancing_shows_no_eta_but_how_long_it_has_not(tmp_path, services) -> None:
    from jobs import api

    output = str(tmp_path / "out")
    job_id = running_job(output, submitted_ago=400, parts_written_ago=[370, 340])  # 30 s a chunk, then nothing
    stuck = api.status(job_id, output)
    assert stuck.state == "running" and stuck.eta is None and 339 < (stuck.stalled_for or 0) < 400
    assert "no progress for 5m4" in api.progress_line(stuck) and "ETA" not in api.progress_line(stuck)
    assert api.as_json(stuck).count('"eta": null') == 1

    advancing = running_job(str(tmp_path / "out2"), submitted_ago=400, parts_written_ago=[300, 5])
    going = api.status(advancing, str(tmp_path / "out2"))
    assert going.stalled_for is None and going.eta is not None and "ETA " in api.progress_line(going)
    slow = running_job(str(tmp_path / "out3"), submitted_ago=1000, parts_written_ago=[700, 400])
    assert api.status(slow, str(tmp_path / "out3")).stalled_for is None  # 400 s idle: under 3x its 300 s a chunk


def test_storage_that_stops_answering_is_said_on_the_status_line_and_waited_out(services, monkeypatch) -> None:
    from contract import settings
    from contract.storage import _s3_client
    from jobs import api

    output = services["output"]
    storage = open_storage(output)
    job = Job("outage-1", JobSpec("outage", ["in.jsonl"], "out", "artifact"), "marian-x", [10, 10])
    write_job(storage, job)
    storage.put(job.key("_ENQUEUED"), b"2\n")
    monkeypatch.setattr(settings, "S3_RETRIES", 1)
    monkeypatch.setattr(settings, "S3_TIMEOUT", 1.0)
    _s3_client.cache_clear()
    live, dead = os.environ["FANYI_S3_ENDPOINT_URL"], f"http://127.0.0.1:{closed_port()}"
    heard: list[api.JobStatus] = []

    def hear(s: api.JobStatus) -> None:
        heard.append(s)
        if len(heard) == 1:
            monkeypatch.setenv("FANYI_S3_ENDPOINT_URL", dead)  # the outage starts
        elif s.trouble:
            monkeypatch.setenv("FANYI_S3_ENDPOINT_URL", live)  # and ends; meanwhile the job is cancelled
            storage.put(job.key("_CANCELLED"), b"cancelled\n")

    ended = api.wait(job.id, output, poll=0.1, timeout=60, on_progress=hear)
    assert ended.state == "cancelled" and ended.trouble is None
    (outage,) = [s for s in heard if s.trouble]
    line = api.progress_line(outage)
    assert f"storage {output} cannot be reached (" in line and "still waiting" in line and "ETA" not in line

    env = {**services["env"], "FANYI_S3_ENDPOINT_URL": dead, "FANYI_S3_RETRIES": "1", "FANYI_S3_TIMEOUT": "1"}
    result = jobs_cli("status", job.id, "--output", output, env=env, timeout=120)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: storage {output} cannot be reached (")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_job_whose_files_cannot_be_read_ends_wait_with_one_error_line_not_still_waiting(tmp_path, services) -> None:
    import subprocess
    import sys

    from jobs import api
    from tests.jobs.conftest import ROOT

    output = str(tmp_path / "out")
    storage = open_storage(output)
    job = Job("corrupt-1", JobSpec("corrupt", ["in.jsonl"], "out", "artifact"), "marian-x", [10, 10])
    write_job(storage, job)
    storage.put(job.key("_ENQUEUED"), b"2\n")
    storage.put(part_key(job.id, 1), b"garbage, not parquet")  # chunk 0 to come: the job runs

    polls: list[api.JobStatus] = []

    def corrupt(s: api.JobStatus) -> None:
        polls.append(s)
        storage.put(part_key(job.id, 0), b"garbage too")  # every part there: wait reads them, and cannot

    try:
        api.wait(job.id, output, poll=0.1, timeout=120, on_progress=corrupt)
        raise AssertionError("a corrupt job was waited for as if it ran")
    except api.StorageError as err:
        assert f"job {job.id} under {output} cannot be read (ArrowInvalid: " in str(err)
    assert len(polls) == 1  # counted in polls, not seconds: the first poll that met the garbage raised

    storage.delete(part_key(job.id, 0))  # the same through the CLI: it sees the job run, then its parts unreadable
    command = [sys.executable, "-m", "jobs", "wait", job.id, "--output", output, "--timeout", "120"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), **services["env"]}
    with subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as cli:
        assert cli.stderr is not None
        first = cli.stderr.readline()
        assert first.startswith("10/20 documents"), first  # seen running
        storage.put(part_key(job.id, 0), b"garbage too")
        out, err = cli.communicate(timeout=180)  # a ceiling: had it waited its 120 s out, it would exit 3
    lines = [first, *err.splitlines()]
    errors = [line for line in lines if line.startswith("error:")]
    assert cli.returncode == 1 and "still waiting" not in err and "Traceback" not in err, err
    assert len(errors) == 1 and errors[0].startswith(f"error: job {job.id} under {output} cannot be read (ArrowInvalid")


def test_the_rate_is_over_the_time_the_job_advanced_and_unknown_counts_say_counting(tmp_path, services) -> None:
    from jobs import api

    output = str(tmp_path / "out")
    job_id = running_job(output, submitted_ago=400, parts_written_ago=[300, 200])  # 20 documents in 200 s
    s = api.status(job_id, output)
    assert abs(s.rate - 0.1) < 0.005, s.rate  # not 20 / 400 s: the 200 s it stood still are not its pace
    line = api.progress_line(s)  # no counters in the cache: the counts are not known yet, and it says so
    assert "partial counting  errors counting" in line and "?" not in line and "counting partial" in api.report(s)
    assert line.count("running") == 1


def test_status_and_its_report_agree_after_a_cancel(tmp_path, services) -> None:
    from jobs import api

    output = str(tmp_path / "out")
    job_id = running_job(output, submitted_ago=60, parts_written_ago=[])
    open_storage(output).put(f"{job_id}/_CANCELLED", b"cancelled\n")
    result = jobs_cli("status", job_id, "--output", output, env=services["env"])
    line, report = result.stdout.splitlines()[:2]
    assert "cancelled  partial 0  errors 0" in line and "0 partial, 0 errors" in report, result.stdout
    assert api.status(job_id, output).rate == 0.0


def test_progress_in_a_log_comes_every_ten_seconds_and_at_every_change_of_state(capsys, monkeypatch) -> None:
    from jobs import api

    now = [1000.0]
    monkeypatch.setattr(api.time, "monotonic", lambda: now[0])
    progress = api.Progress(tty=False)

    def at(seconds: float, state: str = "running", done: int = 0, **extra) -> str:
        now[0] = 1000.0 + seconds
        progress(api.JobStatus("j", state, 200, done, None, 10, 0, 0.0, "out", **extra))
        return capsys.readouterr().err

    assert at(0, "submitting").startswith("0/200 documents")
    assert at(1).count("running") == 1  # a new state: at once
    assert at(5, done=20) == "" and at(10.9, done=20) == ""
    assert "20/200" in at(11.1, done=20)  # ten seconds since the last line
    assert "no progress for" in at(12, done=20, stalled_for=75.0)
    assert "cancelled" in at(12.5, "cancelled", done=20)
