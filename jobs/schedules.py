"""Nightly jobs: specs with a ``schedule`` (cron, UTC) in the folder ``FANYI_SCHEDULES`` names, run by Celery beat.

    FANYI_SCHEDULES=/etc/fanyi/schedules celery -A worker.app beat -S jobs.schedules.SpecScheduler

Nothing is scheduled unless the operator names a folder (``examples/schedules/`` holds the demo's).
Beat submits each run itself, in a thread of its own process (the producer side: it reads the corpus
and the artifact's tokenizer, as ``jobs submit`` does); no task goes to the workers, which never
import ``jobs``.

RedBeat keeps the schedule and a lock in Redis, so a second beat process waits instead of
firing too. A run submits its spec with the output under a dated prefix (``<output>/<date>``),
and only if no earlier run of that schedule is still going (an earlier run that ended in any way,
failed included, does not block it). A run's job id is ``<name>-<date>``, and ``submit`` with a job
id that exists resumes that job (enqueues the chunks it lacks) instead of submitting another: a try
that failed part-way (after the manifest and inputs were written, say) is completed by the next try,
never submitted twice. A Redis ``SET NX`` on (schedule, date) keeps two messages for the same date
from running at once; a submission that failed frees the date for the next try.

**A night whose earlier run is still going** waits, as Kubernetes CronJobs do with
``concurrencyPolicy: Forbid`` and a starting deadline, or Airflow with ``catchup=False``: runs never
overlap, a waiting night starts as soon as that run ends, and only the latest missed night runs.

- The night is *waiting*: ``python -m jobs schedules`` says "waiting: 2026-12-05 because
  nightly-2026-12-04 is still running", the exporter's ``fanyi_schedule_blocked{schedule}`` is 1,
  and after an hour the FanyiScheduleBlocked alert fires. Beat logs a warning.
- Beat looks every minute (a second entry per schedule, ``<name>.catch-up``) and starts the waiting
  night, under its own date and job id, once the run it waited for has ended in any way (finished,
  failed, cancelled, or ended after it was unstuck).
- A later night that comes while one waits takes its place: the earlier one is *skipped* for good, and
  so is a waiting night whose successor's own time comes first. ``jobs schedules`` lists skipped
  nights with the run that blocked them ("skipped: 2026-12-05, 2026-12-06 because nightly-2026-12-04
  was still running"), ``fanyi_schedule_skipped_nights{schedule}`` counts them (the record is kept
  30 days after the latest), and beat logs each one.
- A submission under way counts as a run still going (a per-schedule lock), so a night's run and a
  catch-up never submit at once. So does an earlier run whose state cannot be read (storage does not
  answer, its files are unreadable): the night waits, and is looked at again every minute.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from redbeat import RedBeatScheduler

from contract import settings
from contract.cache import (
    SCHEDULE_LAST_KEY,
    SCHEDULE_RUN_KEY,
    SCHEDULE_SKIPPED_KEY,
    SCHEDULE_SUBMITTING_KEY,
    SCHEDULE_WAITING_KEY,
    SCHEDULES_KEY,
    cache,
)
from contract.spec import JobSpec, SpecError, crontab
from jobs.spec import load_spec
from worker.monitoring import health

log = logging.getLogger(__name__)
RUN_SCHEDULE = "fanyi.run_schedule"  # a beat entry's name for "submit this spec": run by beat, never sent
CATCH_UP = "fanyi.catch_up_schedule"  # "start this spec's waiting night if it may start now": beat's too
CATCH_UP_EVERY = 60.0  # seconds between two looks at a schedule's waiting night
RUN_KEPT = 7 * 24 * 3600  # seconds a night's run key (its job id) is kept
SKIPPED_KEPT = 30 * 24 * 3600  # seconds the skipped nights are kept after the latest
SUBMITTING_LIMIT = 6 * 3600  # seconds a submission holds its schedule's lock at most (beat died under it)


def scheduled_specs(folder: Path) -> list[tuple[Path, JobSpec]]:
    if not folder.is_dir():
        raise SpecError(f"FANYI_SCHEDULES={folder} is not a folder: name the folder of scheduled specs, or unset it")
    specs = [(path, load_spec(path)) for path in sorted(folder.glob("*.yaml"))]
    missing = [str(path) for path, spec in specs if not spec.schedule]
    if missing:
        raise SpecError(f"{missing[0]} has no 'schedule': specs in {folder} need a cron schedule")
    return specs


def beat_schedule(folder: str | None = settings.SCHEDULES) -> dict[str, dict[str, Any]]:
    """Celery beat entries, one per scheduled spec; none without a folder."""
    if not folder:
        log.warning("no schedules: FANYI_SCHEDULES names no folder of scheduled specs")
        return {}
    entries = {}
    for path, spec in scheduled_specs(Path(folder)):
        entries[f"fanyi.schedule.{spec.name}"] = {
            "task": RUN_SCHEDULE,
            "schedule": crontab(str(spec.schedule)),  # checked when the spec loaded
            "args": [str(path)],
        }
        entries[f"fanyi.schedule.{spec.name}.catch-up"] = {"task": CATCH_UP, "schedule": CATCH_UP_EVERY,
                                                             "args": [str(path)]}  # fmt: skip
    return entries


class SpecScheduler(RedBeatScheduler):
    """RedBeat (schedule and lock in Redis) with the entries read from the scheduled specs. Each tick is
    recorded next to ``FANYI_HEALTH_FILE``, so beat's liveness probe is the workers' own:
    ``python -m worker.health --live`` fails once no tick came for six of beat's longest sleeps."""

    def __init__(self, app: Any, *args: Any, **kwargs: Any):
        try:
            app.conf.beat_schedule = beat_schedule()
        except SpecError as err:  # a spec beat cannot run (a bad schedule): one line naming it, not a traceback
            log.critical("beat cannot start: %s", err)
            raise SystemExit(1) from None
        super().__init__(app, *args, **kwargs)
        self.started = time.time()

    def tick(self, *args: Any, **kwargs: Any) -> float:
        sleep = float(super().tick(*args, **kwargs))
        try:
            health.record_beat(self.started, float(self.max_interval))
        except OSError as err:  # a full disk: the liveness probe says so
            log.warning("beat cannot record its tick: %s", err)
        return sleep

    def send_task(self, name: str, args: Sequence[Any] = (), kwargs: Any = None, **options: Any) -> Any:
        """A due run (or a look at a waiting night) is submitted here, in a thread (a submission reads a
        whole corpus: beat keeps ticking)."""
        if name not in (RUN_SCHEDULE, CATCH_UP):
            return super().send_task(name, args, kwargs, **options)
        run = run_schedule if name == RUN_SCHEDULE else catch_up
        thread = threading.Thread(target=_run_logged, args=(run, *args), name=f"fanyi-{name}-{args[0]}", daemon=True)
        thread.start()
        return thread


def _run_logged(run: Any, spec_path: str) -> None:
    try:
        job_id = run(spec_path)
    except Exception as err:  # noqa: BLE001 - one line in beat's log, as a failed task would be
        log.error("schedule %s: the run could not be submitted: %s", spec_path, err)
        return
    if job_id:
        log.info("schedule %s: submitted %s", spec_path, job_id)


def run_schedule(spec_path: str, now: datetime | None = None) -> str | None:
    """Submit tonight's run of a scheduled spec; its job id, or None when the night already ran or waits
    for an earlier run (see the module's docstring)."""
    spec = load_spec(spec_path)
    return _run_night(spec_path, spec, f"{(now or datetime.now(UTC)):%Y-%m-%d}")


def catch_up(spec_path: str) -> str | None:
    """Start the schedule's waiting night if the run it waits for has ended; its job id, or None."""
    spec = load_spec(spec_path)
    waiting = _waiting(cache(), spec.name)
    return _run_night(spec_path, spec, waiting.date) if waiting else None


@dataclass(frozen=True)
class Waiting:
    date: str  # the night that could not start
    blocker: str  # the job id of the run still going then
    since: float  # when it was found waiting


def _run_night(spec_path: str, spec: JobSpec, date: str, tries: int = 3) -> str | None:
    redis = cache()
    redis.hset(SCHEDULES_KEY, spec.name, spec_path)
    run_key = SCHEDULE_RUN_KEY.format(name=spec.name, date=date)
    if redis.exists(run_key):
        log.info("schedule %s already ran for %s", spec.name, date)
        _started(redis, spec.name, date)
        return None
    lock, job_id = SCHEDULE_SUBMITTING_KEY.format(name=spec.name), f"{spec.name}-{date}"
    if not redis.set(lock, job_id, nx=True, ex=SUBMITTING_LIMIT):
        holder = redis.get(lock)
        if holder is None and tries > 1:  # that submission ended just now: look again, as if it never was
            return _run_night(spec_path, spec, date, tries - 1)
        _wait(redis, spec.name, date, holder.decode() if holder else "another-submission")
        return None
    try:
        blocker = _blocker(redis, spec.name)
        if blocker:
            _wait(redis, spec.name, date, blocker)
            return None
        return _submit(redis, spec, date, job_id)
    finally:
        if redis.get(lock) == job_id.encode():
            redis.delete(lock)


def _submit(redis: Any, spec: JobSpec, date: str, job_id: str) -> str | None:
    from jobs import api

    run_key = SCHEDULE_RUN_KEY.format(name=spec.name, date=date)
    if not redis.set(run_key, "submitting", nx=True, ex=RUN_KEPT):
        log.info("schedule %s already ran for %s", spec.name, date)
        return None
    dated = replace(
        spec, output=f"{spec.output.rstrip('/')}/{date}", schedule=None, memory_prefix=spec.memory_prefix or spec.output
    )
    try:
        job_id = api.submit(dated, job_id=job_id)  # the same job for every try of this date
    except Exception:
        redis.delete(run_key)  # the next try may run: it resumes this job if it was written, else submits it
        raise
    redis.set(run_key, job_id, ex=RUN_KEPT)
    redis.set(SCHEDULE_LAST_KEY.format(name=spec.name), f"{job_id} {dated.output}")
    _started(redis, spec.name, date)
    return job_id


def _blocker(redis: Any, name: str) -> str | None:
    """The job id of the schedule's latest run while it has not ended; one that ended in any way (failed
    included) blocks nothing."""
    from jobs import api

    last = redis.get(SCHEDULE_LAST_KEY.format(name=name))
    if not last:
        return None
    job_id, output = last.decode().split(" ", 1)
    try:
        return None if api.status(job_id, output).finished else job_id
    except FileNotFoundError:
        return None  # its output is gone: nothing to wait for
    except Exception as err:  # noqa: BLE001 - storage down, its files unreadable: whether it ended is unknown
        log.warning("schedule %s: cannot tell whether %s has ended (%s); the night waits and is tried again "
                    "every minute", name, job_id, api.explain(err))  # fmt: skip
        return job_id


def _waiting(redis: Any, name: str) -> Waiting | None:
    """The schedule's waiting night; None when there is none, or when what Redis holds for it cannot be read
    (it is then deleted, and said: a value no code can read would block the schedule for ever)."""
    key = SCHEDULE_WAITING_KEY.format(name=name)
    found = redis.get(key)
    if not found:
        return None
    text = found.decode(errors="replace")
    date, _, rest = text.partition(" ")
    blocker, _, since = rest.rpartition(" ")  # "<date> <job id> <since>"; from both ends, so a space in between
    try:
        if not blocker:
            raise ValueError("no blocking run")
        return Waiting(f"{datetime.strptime(date, '%Y-%m-%d'):%Y-%m-%d}", blocker, float(since))
    except ValueError:
        log.error("schedule %s: the waiting night %r in Redis (%s) cannot be read; it is dropped, and the next "
                  "night runs as usual", name, text, key)  # fmt: skip
        redis.eval(_DELETE_IF, 1, key, found)  # unless a night was found waiting meanwhile
        return None


_DELETE_IF = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


def _wait(redis: Any, name: str, date: str, blocker: str) -> None:
    """Night ``date`` cannot start while ``blocker`` runs: it waits, and an earlier waiting night is skipped."""
    waiting = _waiting(redis, name)
    if waiting and waiting.date >= date:
        if waiting.date > date:  # a catch-up of an older night, overtaken meanwhile
            _skip(redis, name, date, blocker)
        return
    if waiting:
        _skip(redis, name, waiting.date, waiting.blocker)
    redis.set(SCHEDULE_WAITING_KEY.format(name=name), f"{date} {blocker} {time.time()}")
    log.warning("schedule %s: the night of %s waits: %s is still running; it starts when that run ends", name,
                date, blocker)  # fmt: skip


def _started(redis: Any, name: str, date: str) -> None:
    """Night ``date`` ran: a night waiting before it is skipped, and nothing waits any more."""
    waiting = _waiting(redis, name)
    if waiting and waiting.date <= date:
        if waiting.date < date:
            _skip(redis, name, waiting.date, waiting.blocker)
        redis.delete(SCHEDULE_WAITING_KEY.format(name=name))


def _skip(redis: Any, name: str, date: str, blocker: str) -> None:
    key = SCHEDULE_SKIPPED_KEY.format(name=name)
    redis.pipeline().hset(key, date, blocker).expire(key, SKIPPED_KEPT).execute()
    log.warning("schedule %s: the night of %s is skipped: %s was still running and a later night came", name,
                date, blocker)  # fmt: skip


@dataclass
class ScheduleState:
    """What ``python -m jobs schedules`` shows of one schedule."""

    name: str
    spec: str  # its spec's path, as beat read it
    last: str | None = None  # its latest run's job id
    last_line: str = ""  # that run's state and progress
    waiting: Waiting | None = None
    skipped: dict[str, str] = field(default_factory=dict)  # night -> the run that was still going

    def lines(self) -> list[str]:
        lines = [f"{self.name}: " + (f"last run {self.last}: {self.last_line}" if self.last else "no run yet")]
        if self.waiting:
            since = datetime.fromtimestamp(self.waiting.since, UTC)
            lines.append(f"  waiting: {self.waiting.date} because {self.waiting.blocker} is still running (since "
                         f"{since:%Y-%m-%d %H:%M} UTC); it starts when that run ends")  # fmt: skip
        by_blocker: dict[str, list[str]] = {}
        for date, blocker in sorted(self.skipped.items()):
            by_blocker.setdefault(blocker, []).append(date)
        for blocker, dates in by_blocker.items():
            lines.append(f"  skipped: {', '.join(dates)} because {blocker} was still running")
        return lines


def schedules() -> list[ScheduleState]:
    """Every schedule beat has run: its latest run, a night waiting for an earlier run, nights skipped."""
    from jobs import api

    redis, found = cache(), []
    for name, path in sorted(redis.hgetall(SCHEDULES_KEY).items()):
        state = ScheduleState(name.decode(), path.decode(), waiting=_waiting(redis, name.decode()))
        skipped = redis.hgetall(SCHEDULE_SKIPPED_KEY.format(name=state.name))
        state.skipped = {date.decode(): blocker.decode() for date, blocker in skipped.items()}
        last = redis.get(SCHEDULE_LAST_KEY.format(name=state.name))
        if last:
            state.last, output = last.decode().split(" ", 1)
            try:
                state.last_line = api.progress_line(api.status(state.last, output))
            except Exception as err:  # noqa: BLE001 - its output gone, storage unreachable: said, not raised
                state.last_line = f"unknown ({api.explain(err)})"
        found.append(state)
    return found
