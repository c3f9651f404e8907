"""A job spec: what to translate, where from, where to, with which artifact; its JSON schema and checks.
Files are read by ``jobs.spec.load_spec`` (YAML or JSON).

    name: news-2026-12                 # letters, digits, '-', '_', '.'; the job id starts with it
    inputs: [corpus/*.jsonl, s3://data/news/*.parquet]
    id_column: id                      # default "id"
    text_column: text                  # default "text"
    output: s3://results/translations  # jobs write under <output>/<job id>/
    artifact: artifacts/demo           # artifact directory the workers can read
    device: cpu                        # cpu or gpu: which queue (translate.cpu / translate.gpu)
    priority: 5                        # 0 (first) .. 9 (last)
    chunk_documents: 64                # at most this many documents per task ...
    chunk_tokens: 20000                # ... and at most this many source tokens (a longer document: alone)
    on_bad_row: error_row              # or refuse: a null/non-string text, bad JSON or UTF-8 line refuses the job
    memory: job                        # translation memory: job (default), shared (all jobs under output), off
    memory_prefix: s3://results/news   # the prefix whose shared memory to use (default: output; see below)
    options: {beam_size: 4, max_new_tokens: 256, overlap: 1, budget: 64,   # contract.options.JobOptions
              source_language: fr, target_language: de,  # languages: for models that read or write several
              format: markdown}                            # text (default), markdown or html: markup kept

Unknown keys are refused (a typo must not silently fall back to a default). Local paths (inputs,
output, artifact) are relative to the spec file's folder, and made absolute when it is loaded.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import jsonschema

from contract import settings
from contract.options import JobOptions

MAX_CHUNK_DOCUMENTS = 10_000
MAX_CHUNK_TOKENS = 10_000_000
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MEMORY_SCOPES = ("off", "job", "shared")  # a spec's ``memory``

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "inputs", "output", "artifact"],
    "properties": {
        "name": {"type": "string", "pattern": NAME.pattern},
        "inputs": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
        "id_column": {"type": "string", "minLength": 1},
        "text_column": {"type": "string", "minLength": 1},
        "output": {"type": "string", "minLength": 1},
        "artifact": {"type": "string", "minLength": 1},
        "device": {"enum": ["cpu", "gpu"]},
        "priority": {"type": "integer", "minimum": 0, "maximum": 9},
        "chunk_documents": {"type": "integer", "minimum": 1, "maximum": MAX_CHUNK_DOCUMENTS},
        "chunk_tokens": {"type": "integer", "minimum": 1, "maximum": MAX_CHUNK_TOKENS},
        "schedule": {"type": "string"},  # cron, for specs under jobs/schedules/
        "on_bad_row": {"enum": ["error_row", "refuse"]},
        "memory": {"enum": list(MEMORY_SCOPES)},
        "memory_prefix": {"type": "string", "minLength": 1},
        "options": JobOptions.schema(),
    },
}


def absolute(path: str, base: Path | None = None) -> str:
    """A local path made absolute, relative to ``base`` (the current folder by default); a URI (``s3://``) as
    it is. Every place that takes a path (a spec's inputs, output and artifact; every verb's ``--output``)
    reads it through this, so ``results`` and ``/abs/results`` name the same jobs and memories."""
    if "://" in path:
        return path
    return str(((base or Path.cwd()).resolve() / Path(path).expanduser()).resolve())


class SpecError(ValueError):
    """A job spec that cannot run; the message names the problem and the fix."""


# cron's macros, as crontab(5) and Kubernetes CronJobs read them (UTC here).
CRON_MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}  # fmt: skip


def crontab(schedule: str) -> Any:
    """Celery's crontab for a cron schedule (five fields: minute hour day-of-month month day-of-week, UTC) or
    one of ``CRON_MACROS``; a ValueError that says what is wrong with it."""
    from celery.schedules import crontab as celery_crontab

    fields = CRON_MACROS.get(schedule.strip().lower(), schedule).split()
    if len(fields) != 5:
        raise ValueError(
            f"{schedule!r} has {len(fields)} field(s); a cron schedule has five (minute hour day month weekday, "
            f"UTC: '0 2 * * *' is 02:00 every day) or is one of {', '.join(CRON_MACROS)}"
        )
    minute, hour, day, month, weekday = fields
    weekday = re.sub(r"(?<![0-9])7(?![0-9])", "0", weekday)  # cron's Sunday is 0 or 7, Celery's 0 only
    try:  # by keyword: celery's third positional field is the day of the week, cron's the day of the month
        return celery_crontab(minute=minute, hour=hour, day_of_month=day, month_of_year=month, day_of_week=weekday)
    except Exception as err:  # noqa: BLE001 - celery's parser raises ValueError and its own ParseException
        raise ValueError(f"{schedule!r} is not a cron schedule ({err or type(err).__name__})") from None


@dataclass(frozen=True)
class JobSpec:
    name: str
    inputs: list[str]
    output: str
    artifact: str
    id_column: str = "id"
    text_column: str = "text"
    device: str = "cpu"
    priority: int = settings.DEFAULT_PRIORITY
    chunk_documents: int = 64
    # Source tokens per task: what bounds its time. 20,000 is about a thousand sentences, minutes
    # per core for opus-mt-en-zh in INT8, well inside the default 900 s soft time limit.
    chunk_tokens: int = 20_000
    schedule: str | None = None
    # A row that cannot be read as a document (null or non-string text, bad JSON or UTF-8, no id, too
    # long): an error row in the output and the job goes on, or the whole job refused at submit.
    on_bad_row: str = "error_row"
    # Windows translated once and reused (worker/engine/memory.py): within the job, across the jobs under the
    # same output (nightly runs over overlapping corpora), or never. Outputs are the same either way.
    memory: str = "job"
    # Where ``shared`` memory lives: its ``output`` unless named. A scheduled run writes under
    # ``<output>/<date>`` and keeps its schedule's ``output`` here, so every night shares one memory.
    memory_prefix: str | None = None
    options: JobOptions = field(default_factory=JobOptions)

    def to_dict(self) -> dict[str, Any]:
        """As a spec file would say it (what a job's manifest keeps): the keys that are set."""
        spec = {k: v for k, v in asdict(self).items() if v is not None and k != "options"}
        return spec | ({"options": self.options.to_dict()} if self.options.to_dict() else {})

    def resolved(self, base: Path | None = None) -> JobSpec:
        """Local paths made absolute, relative to ``base`` (the spec file's folder; the current one for
        a spec built in code), so that a worker or ``jobs status`` anywhere finds the same files."""
        local = lambda path: absolute(path, base)
        inputs = [local(p) for p in self.inputs]
        prefix = local(self.memory_prefix) if self.memory_prefix else None  # a memory's key, as the output's
        return replace(
            self, inputs=inputs, output=local(self.output), artifact=local(self.artifact), memory_prefix=prefix
        )

    @classmethod
    def from_dict(cls, raw: Any, *, source: str = "spec") -> JobSpec:
        try:
            jsonschema.validate(raw, SCHEMA)
        except jsonschema.ValidationError as err:
            where = "/".join(str(p) for p in err.absolute_path) or "top level"
            message = err.message
            if err.instance is None and err.absolute_path:  # `key:` or `key: null` in YAML
                message = f"empty (null); {message.removeprefix('None ')}: give a value, or leave the key out"
            raise SpecError(f"{source}: {where}: {message}") from None
        if raw.get("schedule") is not None:
            try:
                crontab(raw["schedule"])
            except ValueError as err:
                raise SpecError(f"{source}: schedule: {err}") from None
        return cls(**{**raw, "options": JobOptions.of(raw.get("options") or {})})
