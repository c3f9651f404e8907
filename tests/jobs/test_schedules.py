"""Nightly schedules: beat entries from the specs, one run per date, none while the last is running."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.jobs.conftest import corpus, queued, spec

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def producer(services, monkeypatch):
    """This process's producer (jobs.api) pointed at the test Redis."""
    from contract import cache, settings

    monkeypatch.setattr(settings, "CACHE_URL", services["redis"])
    monkeypatch.setattr(settings, "BROKER_URL", services["redis"])
    cache.cache.cache_clear()
    yield
    cache.cache.cache_clear()


def test_nothing_is_scheduled_unless_a_folder_is_named_and_the_demo_schedule_loads_from_its_own() -> None:
    from jobs.schedules import beat_schedule
    from jobs.spec import SpecError, load_spec

    assert beat_schedule() == {} and beat_schedule(None) == {}
    entries = beat_schedule(str(ROOT / "examples" / "schedules"))
    entry = entries["fanyi.schedule.nightly-demo"]
    assert entry["task"] == "fanyi.run_schedule" and Path(entry["args"][0]).name == "nightly-demo.yaml"
    assert entry["schedule"].hour == {2} and entry["schedule"].minute == {0}
    demo = load_spec(entry["args"][0])
    assert Path(demo.inputs[0]) == ROOT / "examples" / "corpus.jsonl" and Path(demo.artifact) == ROOT / "artifacts/demo"
    with pytest.raises(SpecError, match="not a folder"):
        beat_schedule(str(ROOT / "no-such-folder"))


def test_beat_submits_a_due_run_itself_and_sends_the_workers_no_task(tmp_path, services, demo_artifact, producer):
    from jobs.schedules import RUN_SCHEDULE, SpecScheduler
    from worker.app import app

    assert RUN_SCHEDULE not in app.tasks  # the workers know no such task: beat runs it
    path = spec(
        tmp_path / "nightly.json", inputs=[str(corpus(tmp_path / "in.jsonl", 5))], output=str(tmp_path / "out"),
        artifact=demo_artifact, schedule="0 2 * * *", name="nightly",
    )  # fmt: skip
    scheduler = object.__new__(SpecScheduler)  # what beat's apply_async calls for a task no app registers
    scheduler.send_task(RUN_SCHEDULE, [str(path)], {}, producer=None, headers={}).join(timeout=60)
    (written,) = (tmp_path / "out").glob("*/nightly-*/_job.json")
    assert written.parent.name == f"nightly-{written.parent.parent.name}"  # <name>-<date>, under <date>/
    assert queued(services["redis"]) == 1  # the job's one chunk, not a schedule task


def test_a_run_writes_under_its_date_and_never_overlaps_the_previous_one(tmp_path, services, demo_artifact, producer):
    from jobs import api
    from jobs.schedules import run_schedule

    path = spec(
        tmp_path / "nightly.json", inputs=[str(corpus(tmp_path / "in.jsonl", 5))], output=str(tmp_path / "out"),
        artifact=demo_artifact, schedule="0 2 * * *",
    )  # fmt: skip
    night = datetime(2026, 12, 2, 2, 0, tzinfo=UTC)
    first = run_schedule(str(path), now=night)
    assert first and (tmp_path / "out" / "2026-12-02" / first / "_job.json").exists()
    assert run_schedule(str(path), now=night) is None  # the same night again: once per date
    assert run_schedule(str(path), now=night.replace(day=3)) is None  # the previous run is still running
    assert queued(services["redis"]) == 1
    api.cancel(first, str(tmp_path / "out" / "2026-12-02"))  # no longer running
    second = run_schedule(str(path), now=night.replace(day=3))
    assert second and (tmp_path / "out" / "2026-12-03" / second / "_job.json").exists()
    manifests = [
        json.loads((tmp_path / "out" / f"2026-12-0{d}" / j / "_job.json").read_text())
        for d, j in ((2, first), (3, second))
    ]
    # Every night's shared translation memory is the schedule's, not its date's.
    assert {m["spec"]["memory_prefix"] for m in manifests} == {str(tmp_path / "out")}


def test_a_night_after_a_failed_run_starts_and_a_failed_submission_can_try_again(
    tmp_path, services, demo_artifact, producer, workers
):
    from jobs import api
    from jobs.schedules import run_schedule
    from jobs.spec import SpecError

    rows = tmp_path / "in.jsonl"
    path = spec(tmp_path / "nightly.json", inputs=[str(rows)], output=str(tmp_path / "out"), artifact=demo_artifact,
                schedule="0 2 * * *")  # fmt: skip
    night = datetime(2026, 12, 2, 2, 0, tzinfo=UTC)
    with pytest.raises(SpecError, match="matches no file"):
        run_schedule(str(path), now=night)  # the input is not there yet: this try fails ...
    rows.write_text('{"id": "a", "text": null}\n{"id": "b", "text": 7}\n')  # ... and every row of it is bad
    first = run_schedule(str(path), now=night)  # ... the same night may try again
    assert first
    workers()
    ended = api.wait(first, str(tmp_path / "out" / "2026-12-02"), timeout=120)
    assert ended.state == "failed"  # every row an error: not "succeeded"
    assert run_schedule(str(path), now=night.replace(day=3))  # a failed run does not block the next night


def test_a_run_that_failed_after_writing_its_job_is_completed_by_the_retry_not_submitted_twice(
    tmp_path, services, demo_artifact, producer, monkeypatch
):
    from contract.job import list_jobs
    from contract.storage import open_storage
    from jobs import api
    from jobs.schedules import run_schedule

    path = spec(tmp_path / "nightly.json", inputs=[str(corpus(tmp_path / "in.jsonl", 30))],
                output=str(tmp_path / "out"), artifact=demo_artifact, schedule="0 2 * * *")  # fmt: skip
    night = datetime(2026, 12, 2, 2, 0, tzinfo=UTC)
    enqueue = api._enqueue

    def broker_breaks_off(job, output, chunks):
        raise api.SubmitError(f"job {job.id} is submitting: the broker broke off after 0 chunks")

    monkeypatch.setattr(api, "_enqueue", broker_breaks_off)
    with pytest.raises(api.SubmitError):
        run_schedule(str(path), now=night)  # the manifest and inputs are written, enqueueing broke off
    monkeypatch.setattr(api, "_enqueue", enqueue)
    again = run_schedule(str(path), now=night)  # the task's retry, the same night
    dated = str(tmp_path / "out" / "2026-12-02")
    assert list_jobs(open_storage(dated)) == [again]  # one job for the night, completed rather than made twice
    assert api.status(again, dated).state == "running" and queued(services["redis"]) == 2
    assert run_schedule(str(path), now=night) is None  # and the night is used up
