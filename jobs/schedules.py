"""Nightly jobs: specs with a ``schedule`` (cron, UTC) in the folder ``FANYI_SCHEDULES`` names, run by Celery beat.

    FANYI_SCHEDULES=/etc/fanyi/schedules celery -A worker.app beat -S jobs.schedules.SpecScheduler

Nothing is scheduled unless the operator names a folder (``examples/schedules/`` holds the demo's).

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
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from redbeat import RedBeatScheduler

from jobs.spec import JobSpec, SpecError, load_spec
from worker import settings

log = logging.getLogger(__name__)
RUN_KEY = "fanyi:schedule:{name}:{date}"  # Redis: the job id a run submitted (kept 7 days)
LAST_KEY = "fanyi:schedule:{name}:last"  # Redis: "<job id> <output>" of the latest run


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
            "task": "fanyi.run_schedule",
            "schedule": crontab(minute, hour, day, month, weekday),
            "args": [str(path)],
            "options": {"queue": "translate.cpu", "priority": 0},
        }
    return entries


class SpecScheduler(RedBeatScheduler):
    """RedBeat (schedule and lock in Redis) with the entries read from the scheduled specs."""

    def __init__(self, app: Any, *args: Any, **kwargs: Any):
        app.conf.beat_schedule = beat_schedule()
        super().__init__(app, *args, **kwargs)


def run_schedule(spec_path: str, now: datetime | None = None) -> str | None:
    """Submit one run of a scheduled spec; its job id, or None when it is skipped."""
    from jobs import api
    from worker import metrics

    spec = load_spec(spec_path)
    date = f"{(now or datetime.now(UTC)):%Y-%m-%d}"
    cache = metrics.cache()
    last = cache.get(LAST_KEY.format(name=spec.name))
    if last and _still_going(api, *last.decode().split(" ", 1)):
        log.warning("schedule %s: previous run %s is still going, not starting another", spec.name, last.decode())
        return None
    run_key = RUN_KEY.format(name=spec.name, date=date)
    if not cache.set(run_key, "submitting", nx=True, ex=7 * 24 * 3600):
        log.info("schedule %s already ran for %s", spec.name, date)
        return None
    dated = replace(spec, output=f"{spec.output.rstrip('/')}/{date}", schedule=None)
    try:
        job_id = api.submit(dated, job_id=f"{spec.name}-{date}")  # the same job for every try of this date
    except Exception:
        cache.delete(run_key)  # the next try may run: it resumes this job if it was written, else submits it
        raise
    cache.set(run_key, job_id, ex=7 * 24 * 3600)
    cache.set(LAST_KEY.format(name=spec.name), f"{job_id} {dated.output}")
    return job_id


def _still_going(api: Any, job_id: str, output: str) -> bool:
    """Whether a run has not ended yet; one that ended in any way (failed included) does not block the next."""
    try:
        return not api.status(job_id, output).finished
    except FileNotFoundError:
        return False  # its output is gone: nothing to wait for
