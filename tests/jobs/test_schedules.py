"""Nightly schedules: beat entries from the specs, one run per date, none while the last is running: a night
that cannot start waits, is said (``jobs schedules``, the exporter) and runs once the earlier run ends."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.jobs.conftest import corpus, jobs_cli, queued, spec

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
    from contract.spec import SpecError
    from jobs.schedules import beat_schedule
    from jobs.spec import load_spec

    assert beat_schedule() == {} and beat_schedule(None) == {}
    entries = beat_schedule(str(ROOT / "examples" / "schedules"))
    entry = entries["fanyi.schedule.nightly-demo"]
    assert entry["task"] == "fanyi.run_schedule" and Path(entry["args"][0]).name == "nightly-demo.yaml"
    assert entry["schedule"].hour == {2} and entry["schedule"].minute == {0}
    catching_up = entries["fanyi.schedule.nightly-demo.catch-up"]  # a waiting night looked at every minute
    assert catching_up["task"] == "fanyi.catch_up_schedule" and catching_up["args"] == entry["args"]
    assert catching_up["schedule"] == 60
    demo = load_spec(entry["args"][0])
    assert Path(demo.inputs[0]) == ROOT / "examples" / "corpus.jsonl" and Path(demo.artifact) == ROOT / "artifacts/demo"
    with pytest.raises(SpecError, match="not a folder"):
        beat_schedule(str(ROOT / "no-such-folder"))


def test_beat_submits_a_due_run_itself_and_sends_the_workers_no_task(tmp_path, services, demo_artifact, producer):
    from jobs.schedules import CATCH_UP, RUN_SCHEDULE, SpecScheduler
    from worker.runtime.app import app

    assert RUN_SCHEDULE not in app.tasks and CATCH_UP not in app.tasks  # the workers know no such task: beat runs it
    path = spec(
        tmp_path / "nightly.json", inputs=[str(corpus(tmp_path / "in.jsonl", 5))], output=str(tmp_path / "out"),
        artifact=demo_artifact, schedule="0 2 * * *", name="nightly",
    )  # fmt: skip
    scheduler = object.__new__(SpecScheduler)  # what beat's apply_async calls for a task no app registers
    scheduler.send_task(RUN_SCHEDULE, [str(path)], {}, producer=None, headers={}).join(timeout=180)
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
    from contract.spec import SpecError
    from jobs import api
    from jobs.schedules import run_schedule

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


def schedule_series(name: str) -> dict[str, float]:
    """The exporter's series of schedule ``name``, as a scrape sees them."""
    from worker.monitoring import exporter

    exporter.broker.cache_clear()
    families = list(exporter.QueueCollector().collect())
    exporter.broker.cache_clear()
    return {s.name: s.value for f in families for s in f.samples if s.labels.get("schedule") == name}


def test_nights_blocked_by_a_stuck_run_wait_then_the_latest_runs_once_it_ends_and_the_others_are_listed_skipped(
    tmp_path, services, demo_artifact, producer
):
    from contract.cache import SCHEDULE_SUBMITTING_KEY, cache
    from jobs import api
    from jobs.schedules import catch_up, run_schedule, schedules

    out = tmp_path / "out"
    path = str(spec(tmp_path / "nightly.json", inputs=[str(corpus(tmp_path / "in.jsonl", 5))], output=str(out),
                    artifact=demo_artifact, schedule="0 2 * * *", name="nightly"))  # fmt: skip
    night = lambda day: datetime(2026, 12, day, 2, 0, tzinfo=UTC)
    stuck = run_schedule(path, now=night(4))  # no worker: it stays running, as a stuck run does
    assert stuck == "nightly-2026-12-04" and run_schedule(path, now=night(5)) is None
    (state,) = schedules()
    assert state.lines()[1].startswith("  waiting: 2026-12-05 because nightly-2026-12-04 is still running (since")
    assert schedule_series("nightly") == {"fanyi_schedule_blocked": 1, "fanyi_schedule_skipped_nights": 0}
    assert catch_up(path) is None  # still going: the night keeps waiting
    assert run_schedule(path, now=night(6)) is None and run_schedule(path, now=night(7)) is None
    lines = schedules()[0].lines()
    assert lines[1].startswith("  waiting: 2026-12-07 because nightly-2026-12-04 is still running")
    assert lines[2] == "  skipped: 2026-12-05, 2026-12-06 because nightly-2026-12-04 was still running"
    assert schedule_series("nightly") == {"fanyi_schedule_blocked": 1, "fanyi_schedule_skipped_nights": 2}

    api.cancel(stuck, str(out / "2026-12-04"))  # unstuck: it ends
    caught = catch_up(path)  # what beat does within a minute
    assert caught == "nightly-2026-12-07" and (out / "2026-12-07" / caught / "_job.json").exists()
    assert sorted(p.name for p in out.iterdir()) == ["2026-12-04", "2026-12-07"]
    assert queued(services["redis"]) == 1  # the caught-up night's; the cancel took the stuck run's out
    assert catch_up(path) is None and run_schedule(path, now=night(7)) is None  # nothing waits; the night ran
    shown = jobs_cli("schedules", env=services["env"], timeout=120)
    assert shown.returncode == 0 and "waiting" not in shown.stdout, shown.stderr
    assert shown.stdout.startswith("nightly: last run nightly-2026-12-07: 0/5 documents")
    assert "  skipped: 2026-12-05, 2026-12-06 because nightly-2026-12-04 was still running" in shown.stdout
    assert schedule_series("nightly") == {"fanyi_schedule_blocked": 0, "fanyi_schedule_skipped_nights": 2}

    api.cancel(caught, str(out / "2026-12-07"))
    cache().set(SCHEDULE_SUBMITTING_KEY.format(name="nightly"), "nightly-2026-12-08")  # a submission under way ...
    assert run_schedule(path, now=night(9)) is None  # ... blocks the next night like a run still going
    assert "waiting: 2026-12-09 because nightly-2026-12-08 is still running" in schedules()[0].lines()[1]


def test_a_submission_lock_freed_under_a_night_is_looked_at_again_and_an_unreadable_waiting_night_is_dropped(
    tmp_path, services, demo_artifact, producer, monkeypatch, caplog
):
    from contract.cache import SCHEDULE_SUBMITTING_KEY, SCHEDULE_WAITING_KEY, cache
    from jobs import schedules
    from jobs.schedules import catch_up, run_schedule

    path = str(spec(tmp_path / "nightly.json", inputs=[str(corpus(tmp_path / "in.jsonl", 5))],
                    output=str(tmp_path / "out"), artifact=demo_artifact, schedule="0 2 * * *",
                    name="nightly"))  # fmt: skip
    redis, lock = cache(), SCHEDULE_SUBMITTING_KEY.format(name="nightly")

    class FreedBeforeGet:
        """The client beat uses, but the submission holding the lock ends between its SET NX and its GET."""

        def __getattr__(self, name: str):
            return getattr(redis, name)

        def get(self, key: str):
            if key == lock and redis.get(lock) == b"nightly-2026-12-04":
                redis.delete(lock)
            return redis.get(key)

    redis.set(lock, "nightly-2026-12-04")  # a submission under way, about to end
    monkeypatch.setattr(schedules, "cache", FreedBeforeGet)
    assert run_schedule(path, now=datetime(2026, 12, 5, 2, 0, tzinfo=UTC)) == "nightly-2026-12-05"  # looked again
    monkeypatch.undo()
    waiting = SCHEDULE_WAITING_KEY.format(name="nightly")
    assert not redis.exists(waiting) and catch_up(path) is None

    for unreadable in ("2026-12-06 a submission", "garbage", "2026-12-06  1765000000.0", "x y 1765000000.0"):
        redis.set(waiting, unreadable)  # what no code can read must not block the schedule for ever
        with caplog.at_level("ERROR", logger="jobs.schedules"):
            assert catch_up(path) is None
        assert not redis.exists(waiting) and "cannot be read; it is dropped" in caplog.text
        assert schedule_series("nightly") == {"fanyi_schedule_blocked": 0, "fanyi_schedule_skipped_nights": 0}
    redis.set(waiting, "2026-12-06 a submission 1765000000.0")  # what the race stored before: read from both ends
    (state,) = schedules.schedules()
    assert state.waiting == schedules.Waiting("2026-12-06", "a submission", 1765000000.0)
    shown = jobs_cli("schedules", env=services["env"], timeout=120)
    assert shown.returncode == 0 and "waiting: 2026-12-06 because a submission is still running" in shown.stdout


def test_a_night_whose_previous_run_cannot_be_read_waits_and_runs_once_storage_answers(
    tmp_path, services, demo_artifact, producer, monkeypatch
):
    from jobs import api
    from jobs.schedules import catch_up, run_schedule, schedules

    out = tmp_path / "out"
    path = str(spec(tmp_path / "nightly.json", inputs=[str(corpus(tmp_path / "in.jsonl", 5))], output=str(out),
                    artifact=demo_artifact, schedule="0 2 * * *", name="nightly"))  # fmt: skip
    first = run_schedule(path, now=datetime(2026, 12, 4, 2, 0, tzinfo=UTC))
    assert first
    api.cancel(first, str(out / "2026-12-04"))  # it ended: it blocks nothing ...
    read = api._status

    def storage_down(*args, **kwargs):
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(api, "_status", storage_down)  # ... but storage does not answer at the next night's time
    assert run_schedule(path, now=datetime(2026, 12, 5, 2, 0, tzinfo=UTC)) is None
    (state,) = schedules()
    assert state.waiting and state.waiting.date == "2026-12-05" and state.waiting.blocker == first
    assert catch_up(path) is None  # still down: the night still waits, looked at again every minute
    monkeypatch.setattr(api, "_status", read)
    assert catch_up(path) == "nightly-2026-12-05" and (out / "2026-12-05" / "nightly-2026-12-05").is_dir()
    assert schedules()[0].waiting is None and schedules()[0].skipped == {}


def scheduled(folder: Path, schedule: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "nightly.yaml"
    path.write_text(f'name: nightly\nschedule: "{schedule}"\ninputs: [in.jsonl]\noutput: out\nartifact: art\n')
    return path


@pytest.mark.parametrize(
    "schedule,minute,hour,day,month,weekday",
    [
        ("@daily", {0}, {0}, set(range(1, 32)), set(range(1, 13)), set(range(7))),
        ("@midnight", {0}, {0}, set(range(1, 32)), set(range(1, 13)), set(range(7))),
        ("@hourly", {0}, set(range(24)), set(range(1, 32)), set(range(1, 13)), set(range(7))),
        ("@weekly", {0}, {0}, set(range(1, 32)), set(range(1, 13)), {0}),
        ("@monthly", {0}, {0}, {1}, set(range(1, 13)), set(range(7))),
        ("@yearly", {0}, {0}, {1}, {1}, set(range(7))),
        ("@annually", {0}, {0}, {1}, {1}, set(range(7))),
        ("30 4 15 * *", {30}, {4}, {15}, set(range(1, 13)), set(range(7))),  # the 15th, not Mondays
        ("0 2 * * mon-fri", {0}, {2}, set(range(1, 32)), set(range(1, 13)), {1, 2, 3, 4, 5}),
        ("0 2 * * 7", {0}, {2}, set(range(1, 32)), set(range(1, 13)), {0}),  # cron's other Sunday
        ("0 2 * * 5-7", {0}, {2}, set(range(1, 32)), set(range(1, 13)), {5, 6, 0}),
    ],
)
def test_cron_macros_and_fields_are_read_as_cron_reads_them(tmp_path, schedule, minute, hour, day, month, weekday):
    from jobs.schedules import beat_schedule

    scheduled(tmp_path / "specs", schedule)
    cron = beat_schedule(str(tmp_path / "specs"))["fanyi.schedule.nightly"]["schedule"]
    assert (cron.minute, cron.hour, cron.day_of_month, cron.month_of_year, cron.day_of_week) == (
        minute, hour, day, month, weekday
    )  # fmt: skip


@pytest.mark.parametrize("schedule", ["@daly", "0 2 * *", "61 * * * *", "0 0 31 2 *", "0 2 * * * *", ""])
def test_a_schedule_cron_cannot_read_is_refused_when_the_spec_loads_naming_the_file(tmp_path, schedule) -> None:
    from contract.spec import SpecError
    from jobs.spec import load_spec

    path = scheduled(tmp_path, schedule)
    with pytest.raises(SpecError, match=rf"^{path}: schedule: .*"):
        load_spec(path)


def test_beat_with_a_bad_schedule_exits_with_one_line_naming_the_spec(tmp_path, services) -> None:
    import os
    import subprocess
    import sys

    path = scheduled(tmp_path / "specs", "@daly")
    env = {**os.environ, **services["env"], "FANYI_SCHEDULES": str(path.parent), "PYTHONPATH": str(ROOT)}
    beat = [sys.executable, "-m", "celery", "-A", "worker.app", "beat", "-S", "jobs.schedules.SpecScheduler"]
    result = subprocess.run(beat, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"{path}: schedule: '@daly'" in result.stderr and "@daily" in result.stderr


def test_beat_records_its_ticks_for_the_liveness_probe(tmp_path, services) -> None:
    import os
    import subprocess
    import sys

    from tests.services import wait_for

    path = scheduled(tmp_path / "specs", "@yearly")
    health = tmp_path / "beat-health.json"
    env = {**os.environ, **services["env"], "FANYI_SCHEDULES": str(path.parent), "PYTHONPATH": str(ROOT),
           "FANYI_HEALTH_FILE": str(health)}  # fmt: skip
    live = lambda: subprocess.run([sys.executable, "-m", "worker.health", "--live"], env=env, capture_output=True)
    assert live().returncode == 1  # no beat yet: not started
    beat = [sys.executable, "-m", "celery", "-A", "worker.app", "beat", "-S", "jobs.schedules.SpecScheduler"]
    process = subprocess.Popen(beat, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: live().returncode == 0, 180, "beat's first tick")
    finally:
        process.kill()
        process.wait()
