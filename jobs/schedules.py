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
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from redbeat import RedBeatScheduler

from contract import settings
from contract.cache import SCHEDULE_LAST_KEY, SCHEDULE_RUN_KEY, cache
from jobs.spec import JobSpec, SpecError, load_spec

log = logging.getLogger(__name__)
RUN_SCHEDULE = "fanyi.run_schedule"  # a beat entry's name for "submit this spec": run by beat, never sent


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
    from celery.schedules import crontab

    if not folder:
        log.warning("no schedules: FANYI_SCHEDULES names no folder of scheduled specs")
        return {}
    entries = {}
    for path, spec in scheduled_specs(Path(folder)):
        minute, hour, day, month, weekday = str(spec.schedule).split()
        entries[f"fanyi.schedule.{spec.name}"] = {
            "task": RUN_SCHEDULE,
            "schedule": crontab(minute, hour, day, month, weekday),
            "args": [str(path)],
        }
    return entries


class SpecScheduler(RedBeatScheduler):
    """RedBeat (schedule and lock in Redis) with the entries read from the scheduled specs."""

    def __init__(self, app: Any, *args: Any, **kwargs: Any):
        app.conf.beat_schedule = beat_schedule()
        super().__init__(app, *args, **kwargs)

    def send_task(self, name: str, args: Sequence[Any] = (), kwargs: Any = None, **options: Any) -> Any:
        """A due run is submitted here, in a thread (a submission reads a whole corpus: beat keeps ticking)."""
        if name != RUN_SCHEDULE:
            return super().send_task(name, args, kwargs, **options)
        thread = threading.Thread(target=_run_logged, args=(*args,), name=f"fanyi-schedule-{args[0]}", daemon=True)
        thread.start()
        return thread


def _run_logged(spec_path: str) -> None:
    try:
        job_id = run_schedule(spec_path)
    except Exception as err:  # noqa: BLE001 - one line in beat's log, as a failed task would be
        log.error("schedule %s: the run could not be submitted: %s", spec_path, err)
        return
    log.info("schedule %s: %s", spec_path, f"submitted {job_id}" if job_id else "skipped")


def run_schedule(spec_path: str, now: datetime | None = None) -> str | None:
    """Submit one run of a scheduled spec; its job id, or None when it is skipped."""
    from jobs import api

    spec = load_spec(spec_path)
    date = f"{(now or datetime.now(UTC)):%Y-%m-%d}"
    redis = cache()
    last = redis.get(SCHEDULE_LAST_KEY.format(name=spec.name))
    if last and _still_going(api, *last.decode().split(" ", 1)):
        log.warning("schedule %s: previous run %s is still going, not starting another", spec.name, last.decode())
        return None
    run_key = SCHEDULE_RUN_KEY.format(name=spec.name, date=date)
    if not redis.set(run_key, "submitting", nx=True, ex=7 * 24 * 3600):
        log.info("schedule %s already ran for %s", spec.name, date)
        return None
    dated = replace(
        spec, output=f"{spec.output.rstrip('/')}/{date}", schedule=None, memory_prefix=spec.memory_prefix or spec.output
    )
    try:
        job_id = api.submit(dated, job_id=f"{spec.name}-{date}")  # the same job for every try of this date
    except Exception:
        redis.delete(run_key)  # the next try may run: it resumes this job if it was written, else submits it
        raise
    redis.set(run_key, job_id, ex=7 * 24 * 3600)
    redis.set(SCHEDULE_LAST_KEY.format(name=spec.name), f"{job_id} {dated.output}")
    return job_id


def _still_going(api: Any, job_id: str, output: str) -> bool:
    """Whether a run has not ended yet; one that ended in any way (failed included) does not block the next."""
    try:
        return not api.status(job_id, output).finished
    except FileNotFoundError:
        return False  # its output is gone: nothing to wait for
