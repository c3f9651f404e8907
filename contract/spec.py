"""A job spec: what to translate, where from, where to, with which artifact; its JSON schema and checks.
Files are read by ``jobs.spec.load_spec`` (YAML or JSON).

    name: news-2026-12                 # letters, digits, '-', '_', '.'; the job id starts with it
    inputs: [corpus/*.jsonl, s3://data/news/*.parquet]
    id_column: id                      # default "id"
    text_column: text                  # default "text"
    output: s3://results/translations  # jobs write under <output>/<job id>/
    artifact: artifacts/demo           # artifact directory the workers can read
    artifacts: {en-zh: artifacts/opus-mt-en-zh, en-ja: artifacts/opus-mt-en-ja}   # or one per language pair
    target_languages: [zh, ja]         # several targets: one row per document and target (see below)
    language_column: lang              # each row's language from the input (source_language auto for the rest)
    glossary: terms.tsv                # terms that must come out one way (contract/glossary.py), local or s3://
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

Several targets: ``target_languages`` (else the targets of ``artifacts``'s pairs, else the one of
``options.target_language``) each give every document its own row. A target's artifact is the one
``artifacts`` names for a pair ``SOURCE-TARGET`` (``*-TARGET``: any source it reads), else ``artifact``
(a many-to-many model that writes them all). One artifact per target: a job routes each document to it.

Unknown keys are refused (a typo must not silently fall back to a default). Local paths (inputs,
output, artifact) are relative to the spec file's folder, and made absolute when it is loaded.
"""

from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import jsonschema

from contract import settings
from contract.options import AUTO, JobOptions

MAX_CHUNK_DOCUMENTS = 10_000
MAX_CHUNK_TOKENS = 10_000_000
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# An ``artifacts`` key: SOURCE-TARGET, each a language code (``zh``, ``zho``, ``zh_Hans``, ``zho_Hans``) or ``*``
PAIR = re.compile(r"^(\*|[A-Za-z]{2,3}(?:_[A-Za-z0-9]{2,8})*)-([A-Za-z]{2,3}(?:_[A-Za-z0-9]{2,8})*)$")
MEMORY_SCOPES = ("off", "job", "shared")  # a spec's ``memory``

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "inputs", "output"],
    "properties": {
        "name": {"type": "string", "pattern": NAME.pattern},
        "inputs": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
        "id_column": {"type": "string", "minLength": 1},
        "text_column": {"type": "string", "minLength": 1},
        "output": {"type": "string", "minLength": 1},
        "artifact": {"type": "string", "minLength": 1},
        "artifacts": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": {"type": "string", "minLength": 1},
        },
        "target_languages": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "minItems": 1,
            "uniqueItems": True,
        },
        "language_column": {"type": "string", "minLength": 1},
        "glossary": {"type": "string", "minLength": 1},
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


@functools.cache
def _validator() -> Any:
    """The schema's validator, made (and the schema itself checked) once: ``jsonschema.validate`` checks the
    schema on every call, 8 ms of each spec read (a job's manifest at every ``jobs wait`` poll) against 0.06 ms."""
    validator = jsonschema.validators.validator_for(SCHEMA)
    validator.check_schema(SCHEMA)
    return validator(SCHEMA)


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


def _pair(key: str) -> tuple[str, str]:
    """An ``artifacts`` key's source and target (``JobSpec._problem`` refuses a key that is not a pair)."""
    source, _, target = key.partition("-")
    return source, target


@dataclass(frozen=True)
class JobSpec:
    name: str
    inputs: list[str]
    output: str
    artifact: str | None = None  # the artifact of every target that ``artifacts`` does not name
    artifacts: dict[str, str] | None = None  # language pair (``en-zh``, ``*-zh``) -> the artifact for it
    target_languages: list[str] | None = None
    language_column: str | None = None  # each row's language, given (source_language auto for rows without)
    glossary: str | None = None  # a glossary file (``contract.glossary``), copied into the job at submit
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

    @property
    def targets(self) -> list[str | None]:
        """The languages the job translates into, each document once per target: ``target_languages``, else
        the targets of ``artifacts``, else ``options.target_language`` (None: the one the model writes)."""
        if self.target_languages:
            return list(self.target_languages)
        if self.artifacts:
            return list(dict.fromkeys(_pair(key)[1] for key in self.artifacts))
        return [self.options.target_language]

    def artifact_for(self, target: str | None) -> str:
        """The artifact that translates into ``target``: the one ``artifacts`` names for it, else ``artifact``."""
        for key, path in (self.artifacts or {}).items():
            if _pair(key)[1] == target:
                return path
        if self.artifact is None:
            raise SpecError(f"no artifact translates into {target}: name one under artifacts")
        return self.artifact

    def target_options(self, target: str | None) -> JobOptions:
        """The options of the rows into ``target``."""
        return replace(self.options, target_language=target)

    @property
    def paths(self) -> list[str]:
        """Every artifact the job uses, once each, in the order of its targets."""
        return list(dict.fromkeys(self.artifact_for(t) for t in self.targets))

    def resolved(self, base: Path | None = None) -> JobSpec:
        """Local paths made absolute, relative to ``base`` (the spec file's folder; the current one for
        a spec built in code), so that a worker or ``jobs status`` anywhere finds the same files."""
        local = lambda path: absolute(path, base)
        inputs = [local(p) for p in self.inputs]
        prefix = local(self.memory_prefix) if self.memory_prefix else None  # a memory's key, as the output's
        artifact = local(self.artifact) if self.artifact else None
        artifacts = {pair: local(path) for pair, path in self.artifacts.items()} if self.artifacts else None
        glossary = local(self.glossary) if self.glossary else None
        return replace(
            self, inputs=inputs, output=local(self.output), artifact=artifact, artifacts=artifacts,
            memory_prefix=prefix, glossary=glossary,
        )  # fmt: skip

    @classmethod
    def from_dict(cls, raw: Any, *, source: str = "spec") -> JobSpec:
        invalid = jsonschema.exceptions.best_match(_validator().iter_errors(raw))
        if invalid is not None:
            where = "/".join(str(p) for p in invalid.absolute_path) or "top level"
            message = invalid.message
            if invalid.instance is None and invalid.absolute_path:  # `key:` or `key: null` in YAML
                message = f"empty (null); {message.removeprefix('None ')}: give a value, or leave the key out"
            raise SpecError(f"{source}: {where}: {message}")
        if raw.get("schedule") is not None:
            try:
                crontab(raw["schedule"])
            except ValueError as err:
                raise SpecError(f"{source}: schedule: {err}") from None
        options = JobOptions.of(raw.get("options") or {})
        if raw.get("language_column") and options.source_language is None:
            options = replace(options, source_language=AUTO)  # rows without a language: found in their text
        spec = cls(**{**raw, "options": options})
        problem = spec._problem()
        if problem:
            raise SpecError(f"{source}: {problem}")
        return spec

    def _problem(self) -> str | None:
        """What is wrong with the spec's artifacts, targets and languages together (None: nothing)."""
        if not self.artifact and not self.artifacts:
            return "name the artifact (artifact: PATH), or one per language pair (artifacts: {en-zh: PATH})"
        odd = next((key for key in self.artifacts or {} if not PAIR.fullmatch(key)), None)
        if odd is not None:
            return (
                f"artifacts: {odd!r} is not a language pair: write SOURCE-TARGET (en-zh, eng_Latn-zho_Hans; "
                "*-zh: any source)"
            )
        if self.target_languages and self.options.target_language:
            return "give target_languages or options.target_language, not both"
        if self.language_column and self.options.fixed_source_language:
            return "language_column gives each row's language: leave options.source_language out (or auto)"
        targets = [_pair(key)[1] for key in self.artifacts or {}]
        twice = next((t for t in targets if targets.count(t) > 1), None)
        if twice is not None:
            keys = [key for key in self.artifacts or {} if _pair(key)[1] == twice]
            return f"artifacts: {' and '.join(keys)} both translate into {twice}: name one artifact per target language"
        source = self.options.fixed_source_language
        for key in self.artifacts or {}:
            reads = _pair(key)[0]
            if source and reads not in ("*", source):
                return f"artifacts: {key} reads {reads}, but options.source_language is {source}"
        lacking = [] if self.artifact else [t for t in self.targets if t not in targets]
        if lacking:
            return (
                f"no artifact translates into {lacking[0]}: add {source or '*'}-{lacking[0]}: PATH under artifacts, "
                "or name a default artifact that writes it"
            )
        return None
