"""The producer's verbs, for notebooks and pipelines; ``python -m jobs`` is a thin CLI over them.

    from jobs import api
    job_id = api.submit(api.load_spec("news.yaml"))
    api.wait(job_id, output="s3://results/translations")

Storage is the system of record: state, status, resume and cancel read the job's prefix, so they work
after Redis lost everything. Redis only carries the chunk messages and a few caches.

Submission cannot strand a job: the job id is announced once the job exists (its manifest written)
and before anything is enqueued, never for a job that was refused; storage and the broker are checked
before the inputs are read, and if enqueueing breaks off the job stays ``submitting`` and the error
says to run ``jobs resume ID``, which enqueues the chunks without a part. ``submit(..., job_id=...)``
of an existing job with the same spec resumes it instead of translating the corpus twice.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from tqdm import tqdm

from contract import cache, settings
from contract.glossary import Glossary, GlossaryError
from contract.job import (
    HEAD,
    JOB_ID,
    MANIFEST,
    STATUSES,
    TERMINAL,
    TRANSLATE_CHUNK,
    Job,
    Tally,
    check_job_id,
    compacted_chunks,
    done_chunks,
    failure_key,
    failures,
    finalize,
    forget_summaries,
    glossary_key,
    job_state,
    part_key,
    read_head,
    read_job,
    read_rows,
    result_keys,
    term_counts,
    write_head,
    write_job,
)
from contract.spec import JobSpec, SpecError, absolute
from contract.storage import Storage, StorageError, open_storage, transient
from jobs.inputs import read_bytes
from jobs.planning import remove_inputs, write_inputs
from jobs.spec import load_spec
from worker.engine.tokenizer import unreadable

if TYPE_CHECKING:
    from worker.engine.artifact import Artifact
    from worker.engine.languages import ModelLanguages
    from worker.engine.tokenizer import Tokenizer

T = TypeVar("T")

__all__ = [
    "JobStatus", "SubmitError", "Unreachable", "cancel", "compact", "jobs", "load_spec", "resume", "status", "submit",
    "wait",
]  # fmt: skip

PUBLISH_BATCH = 1000  # chunk messages sent to the broker in one pipeline
LIST_READERS = 16  # jobs `jobs` reads at once (S3: a listing and a GET each)
STALL_AFTER = 60.0  # seconds without a new part after which a job shows no ETA, when also 3x its time per chunk
CACHE_PAUSE = 60.0  # seconds a command stops asking a cache that did not answer (`list` of many jobs: one wait)


class SubmitError(Exception):
    """The job could not be (fully) submitted; the message names it and says what to do."""


class JobConflict(SpecError):
    """A job with this id exists with another spec."""


class Unreachable(Exception):
    """Storage or Redis did not answer; the message names which (URL redacted) and says what to do."""


@dataclass
class JobStatus:
    id: str
    state: str  # submitting, running, cancelling, cancelled, succeeded, completed_with_errors, failed
    documents: int
    done: int  # documents whose part is written
    errors: int | None  # None while unknown (Redis lost its counters and the job is not finished)
    chunks: int
    chunks_done: int
    rate: float  # documents per second while it advanced: from submission to its latest part (or its end)
    output: str
    partial: int | None = None  # documents with a sentence that still shows a symptom; None while unknown
    sentence_flags: dict[str, int] = field(default_factory=dict)  # sentences per flag (retried, empty, ...)
    failed_chunks: dict[str, str] = field(default_factory=dict)  # chunk -> why it could not be done
    windows: int = 0  # engine inputs of the documents written
    reused_windows: int = 0  # of them, reused: from the translation memory, or a copy in the same engine call
    stalled_for: float | None = None  # seconds since the last part, when that is long for this job (then no ETA)
    trouble: str | None = None  # why the latest look failed (storage unreachable): these numbers are older
    languages: dict[str, int] = field(default_factory=dict)  # rows per source language (found, or the job's)
    routes: dict[str, int] = field(default_factory=dict)  # rows per routing outcome (translated, skipped, ...)
    targets: dict[str, dict[str, int]] = field(default_factory=dict)  # rows per target language and status
    terms: dict[str, Any] = field(default_factory=dict)  # glossary terms: applied, missed, hit_rate
    name: str = ""  # the spec's name
    team: str | None = None  # who submitted it over HTTP (``jobs.server``)

    @property
    def reuse_rate(self) -> float:
        return self.reused_windows / self.windows if self.windows else 0.0

    @property
    def eta(self) -> float | None:
        if self.rate <= 0 or self.state != "running" or self.stalled_for is not None or self.trouble:
            return None
        return (self.documents - self.done) / self.rate

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL


def submit(
    spec: JobSpec,
    *,
    enqueue: bool = True,
    job_id: str | None = None,
    on_job: Callable[[str], None] | None = None,
    on_progress: Callable[[str], None] | None = None,
    team: str | None = None,
    retried: bool = False,
    admit: Callable[[int], None] | None = None,
) -> str:
    """Check everything, write the manifest and chunk inputs, enqueue one task per chunk; the job id.

    ``on_job`` hears the job id once the job exists (its manifest is written, or it existed with this
    spec) and before anything is enqueued: never for a job that was refused, always for one that a broker
    failure left ``submitting``. ``on_progress`` hears what is going on (documents read, chunk inputs
    written). A job id that exists with the same spec is resumed (with another: ``JobConflict``). ``team``: who
    submits it over HTTP (``jobs.server``), kept in the manifest. ``retried``: this call repeats one that may have
    worked (an HTTP ``Idempotency-Key``): a job it finds with every chunk enqueued is left as it is. ``admit`` hears
    how many documents the inputs hold once they are read, before the job exists; it refuses the job by raising (what
    was written for it is removed)."""
    say = on_progress or (lambda _: None)
    job_id = check_job_id(job_id or f"{spec.name}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(2)}")
    exists = on_job or (lambda _: None)
    spec = spec.resolved()
    tokenizer, artifact_ids = _artifacts(spec)
    glossary = _glossary(spec)
    storage = _reachable(spec.output)
    existing = _existing(storage, job_id, spec)
    if existing is not None:
        exists(job_id)
        if retried and storage.exists(existing.key("_ENQUEUED")):
            return job_id
        say(f"job {job_id} exists with this spec: enqueueing the chunks it still lacks")
        return _enqueue_missing(existing, storage, spec.output, job_id, enqueue)
    if enqueue:
        _broker_reachable(job_id)
    plan = _guard_storage(job_id, lambda: write_inputs(spec, tokenizer, storage, job_id, say,
                                                      max_chars=settings.MAX_DOCUMENT_CHARS))  # fmt: skip
    if admit is not None:
        try:
            admit(plan.documents)
        except BaseException:
            remove_inputs(storage, job_id)
            raise
    sizes = plan.sizes * len(spec.targets)  # chunk c: input c mod N into target c div N
    sha256 = hashlib.sha256(glossary).hexdigest() if glossary is not None else None
    job = Job(job_id, spec, artifact_ids[spec.paths[0]], sizes, bad_rows=plan.bad_rows, artifact_ids=artifact_ids,
              glossary_sha256=sha256, team=team, input_files=plan.input_files)  # fmt: skip
    if glossary is not None:
        _guard_storage(job_id, lambda: storage.put(glossary_key(job), glossary))
    _guard_storage(job_id, lambda: write_job(storage, job))
    _guard_storage(job_id, lambda: write_head(storage, job))
    exists(job_id)  # it exists now: `resume` completes it whatever happens next
    if not plan.documents:  # a day with nothing new: a job of 0 documents, finished at once
        say(f"no documents in {', '.join(plan.files)}: the job succeeds with nothing to translate")
        storage.put(job.key("_ENQUEUED"), b"0\n")
        finalize(storage, job)
        return job_id
    return _enqueue_missing(job, storage, spec.output, job_id, enqueue)


def _artifacts(spec: JobSpec) -> tuple[Tokenizer, dict[str, str]]:
    """The tokenizer of the job's first artifact (chunks are planned by its token counts) and every artifact's id
    by path; each target's languages checked against the artifact that translates into it."""
    from worker.documents.languages import Routing
    from worker.engine.languages import iso

    loaded = {path: _artifact(path) for path in spec.paths}
    for target in spec.targets:
        path = spec.artifact_for(target)
        (artifact, tokenizer), options = loaded[path], spec.target_options(target)
        into = f" into {target} ({path})" if len(spec.targets) > 1 else ""
        try:
            languages = _languages(tokenizer, artifact)
            tokenizer.framing(options.fixed_source_language, languages.told(target), options.source_prefix)
            Routing.of(languages, options)
        except ValueError as err:
            raise SpecError(f"options{into}: {err}") from None
        for key, named in (spec.artifacts or {}).items():
            source = key.partition("-")[0]
            if named == path and source != "*" and languages.reads and iso(source) not in languages.reads:
                reads = ", ".join(languages.reads)
                raise SpecError(f"artifacts: {key}: {path} does not read {source} (it reads {reads})")
    return loaded[spec.paths[0]][1], {path: artifact.artifact_id for path, (artifact, _) in loaded.items()}


def _glossary(spec: JobSpec) -> bytes | None:
    """The spec's glossary as read (None without one), refused now if it cannot be used: every term readable."""
    if spec.glossary is None:
        return None
    data = read_bytes(spec.glossary)
    try:
        glossary = Glossary.parse(data, spec.glossary)
    except GlossaryError as err:
        raise SpecError(f"glossary: {err}") from None
    for term in glossary.terms:
        if (reason := unreadable(term.source) or unreadable(term.target)) is not None:
            raise SpecError(f"glossary {spec.glossary}: the term {term.source!r}: {reason}")
    return data


def _artifact(path: str) -> tuple[Artifact, Tokenizer]:
    """The artifact at ``path`` (its files checked by the workers, which load it) and its tokenizer."""
    from worker.engine.artifact import Artifact, ArtifactError
    from worker.engine.tokenizer import Tokenizer

    try:
        artifact = Artifact.load(path, verify=False)
        return artifact, Tokenizer.from_artifact(artifact)
    except (ArtifactError, OSError, KeyError) as err:
        raise SpecError(f"artifact {path!r}: {err}") from None


def _languages(tokenizer: Tokenizer, artifact: Artifact) -> ModelLanguages:
    from worker.engine.languages import ModelLanguages

    return ModelLanguages.of(tokenizer, artifact.manifest.get("pair"))


def _reachable(output: str) -> Storage:
    """The output storage, listed once: a missing bucket, refused credentials or a dead endpoint now,
    before any input is read."""
    try:
        storage = open_storage(output)
        storage.list("_fanyi-probe/")
    except StorageError as err:
        raise SpecError(f"output {output!r}: {err}") from None
    except Exception as err:  # noqa: BLE001 - boto3 and OS errors of every kind, in one line
        raise SpecError(f"output {output!r} cannot be used: {explain(err)}") from None
    return storage


def _broker_reachable(job_id: str) -> None:
    from worker.runtime.app import app

    try:
        with app.connection_for_write(settings.BROKER_URL) as connection:
            connection.ensure_connection(max_retries=1)
    except Exception as err:  # noqa: BLE001 - kombu and redis errors
        raise SubmitError(
            f"job {job_id} not submitted: the broker {redis_trouble(err, settings.BROKER_URL)}; "
            "nothing was written: submit again when it answers"
        ) from None


def _guard_storage(job_id: str, write: Callable[[], T]) -> T:
    try:
        return write()
    except (SpecError, StorageError):
        raise
    except Exception as err:  # noqa: BLE001
        raise SubmitError(
            f"job {job_id} not submitted: writing it to storage failed ({explain(err)}); "
            f"submit again with --job-id {job_id} when storage is back"
        ) from None


def _existing(storage: Storage, job_id: str, spec: JobSpec) -> Job | None:
    try:
        job = read_job(storage, job_id)
    except FileNotFoundError:
        return None
    if job.spec != spec:
        raise JobConflict(f"job {job_id} exists under {storage.uri} with another spec: choose another --job-id")
    return job


def _enqueue_missing(job: Job, storage: Storage, output: str, job_id: str, enqueue: bool) -> str:
    """Enqueue the chunks without a part, then mark the job enqueued (running)."""
    if not enqueue:
        return job_id
    missing = sorted(set(range(len(job.chunks))) - done_chunks(storage, job))
    _register(job_id, output, job.documents)
    _enqueue(job, output, missing)
    storage.put(job.key("_ENQUEUED"), f"{len(missing)}\n".encode())
    if not missing:
        finalize(storage, job)
    return job_id


def _enqueue(job: Job, output: str, chunks: Sequence[int]) -> None:
    """One message per chunk, ``PUBLISH_BATCH`` at a time in one Redis pipeline (kombu's producer batches); the
    queue is declared with the first message, which is all a declaration does."""
    from worker.runtime.app import app

    sent, amqp = 0, app.amqp
    policy = {"max_retries": 2, "interval_start": 0.5, "interval_step": 1}
    try:
        with app.connection_for_write(settings.BROKER_URL) as connection:  # the broker the settings name, now
            producer = amqp.Producer(connection, auto_declare=False)
            for start in range(0, len(chunks), PUBLISH_BATCH):
                batch = chunks[start : start + PUBLISH_BATCH]
                with producer.batch(PUBLISH_BATCH):
                    for number, chunk in enumerate(batch, start):
                        message = job.chunk_message(output, chunk)
                        amqp.send_task_message(producer, TRANSLATE_CHUNK, _task(amqp, message["args"]),
                                               queue=message["queue"], priority=message["priority"],
                                               retry_policy=policy, declare=None if number == 0 else [])  # fmt: skip
                sent += len(batch)  # sent once the batch is flushed
    except Exception as err:  # noqa: BLE001 - kombu and redis errors
        raise SubmitError(
            f"job {job.id} is submitting: after {sent:,} of {len(chunks):,} chunks the broker "
            f"{redis_trouble(err, settings.BROKER_URL)}; run `python -m jobs resume {job.id} --output {output}` "
            "when it answers"
        ) from None


def _task(amqp: Any, args: list[Any]) -> Any:
    """The message ``app.send_task`` makes for a chunk, by the same ``app.amqp`` call with its arguments' repr given
    (not Celery's ``saferepr``, which costs more than the rest of sending) and no "task-sent" event."""
    from kombu.utils.uuid import uuid

    return amqp.create_task_message(uuid(), TRANSLATE_CHUNK, args, {}, argsrepr=repr(args), kwargsrepr="{}",
                                    create_sent_event=False, ignore_result=True)  # fmt: skip


def explain(err: BaseException) -> str:
    """One line for an error of storage or the broker (never a traceback)."""
    response = getattr(err, "response", None)
    if isinstance(response, dict) and "Error" in response:
        error = response["Error"]
        return f"{error.get('Code', type(err).__name__)}: {error.get('Message', '')}".strip().rstrip(":")
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {first}" if first else type(err).__name__


def redis_trouble(err: BaseException, *urls: str, timeout: float | None = None) -> str:
    """Which Redis failed and how, for a one-line error: "at URL did not answer within 5 s (...)"."""
    where = "at " + " or ".join(dict.fromkeys(settings.redact(url) for url in urls))
    if _timed_out(err):
        return (
            f"{where} did not answer within {timeout or settings.REDIS_TIMEOUT:g} s (FANYI_REDIS_TIMEOUT): check "
            "that the URL names a Redis server that is up, and rediss:// only for a TLS port"
        )
    return f"{where} cannot be reached ({explain(err)})"


def cache_trouble(err: BaseException) -> str:
    """``redis_trouble`` for the cache's client (``contract.cache.cache``), with its own timeout."""
    timeout = cache.cache().connection_pool.connection_kwargs.get("socket_timeout")
    return redis_trouble(err, settings.CACHE_URL, timeout=timeout)


def _timed_out(err: BaseException | None) -> bool:
    """Whether a timeout is behind ``err`` (kombu wraps redis' errors in its own)."""
    from redis.exceptions import TimeoutError as RedisTimeout

    while err is not None:
        if isinstance(err, (TimeoutError, RedisTimeout)):
            return True
        err = err.__cause__ or err.__context__
    return False


_cache_failed = [float("-inf")]  # when the cache last failed to answer this process


def _from_cache(read: Callable[[Any], T], default: T) -> T:
    """``read(cache)``, or ``default`` when the cache fails, and for ``CACHE_PAUSE`` s after that: a cache
    that does not answer costs a command one timeout, not one per job."""
    if time.monotonic() - _cache_failed[0] < CACHE_PAUSE:
        return default
    try:
        return read(cache.cache())
    except Exception:  # noqa: BLE001 - a cache: storage says the rest
        _cache_failed[0] = time.monotonic()
        return default


def _register(job_id: str, output: str, documents: int) -> None:
    try:
        cache.register(job_id, output, documents)
    except Exception:  # noqa: BLE001 - a cache: `--output` finds the job without it
        pass


def _recount(job_id: str, output: str) -> None:
    """Count a job's cached progress again from the parts in storage."""
    try:
        cache.rebuild_progress(job_id, output)
    except Exception:  # noqa: BLE001 - a cache: the tasks check storage when it cannot tell
        pass


def output_prefix(output: str | None, *, needed: str | None = None) -> str | None:
    """An output prefix as every verb reads it: ``output``, else ``FANYI_OUTPUT``; a local path made absolute
    (as a spec's output is when it loads: the workers, the registry and the memories know it so), a URI as
    written. None when neither is set, unless ``needed`` says what for (then a SpecError)."""
    output = output or settings.OUTPUT
    if not output and needed:
        raise SpecError(f"{needed}: pass --output PREFIX (or set FANYI_OUTPUT)")
    return absolute(output) if output else None


def _storage(job_id: str, output: str | None) -> tuple[Storage, str]:
    output = output_prefix(output) or _registered(job_id)
    if not output:
        raise SpecError(f"where is job {job_id}? pass --output PREFIX (or set FANYI_OUTPUT)")
    return open_storage(output), output


def _registered(job_id: str) -> str | None:
    try:
        found = cache.cache().hget(cache.JOBS_KEY, job_id)
    except Exception as err:  # noqa: BLE001 - a cache: `--output` finds the job without it
        raise SpecError(
            f"where is job {job_id}? the registry of jobs, Redis {cache_trouble(err)}; "
            "pass --output PREFIX (or set FANYI_OUTPUT)"
        ) from None
    return found.decode() if found else None


def status(job_id: str, output: str | None = None) -> JobStatus:
    """Where the job stands, from storage (the cache adds counts while it runs). Storage that does not
    answer (or answers 5xx, throttles, times out: ``contract.storage.transient``) is ``Unreachable``, which
    ``wait`` waits out; a job that is not there, ``FileNotFoundError``; a job whose files cannot be read
    (a corrupt part, a broken ``_SUCCESS``, refused credentials: asking again gives the same answer),
    ``StorageError``."""
    return _job_status(job_id, output)[1]


def _job_status(job_id: str, output: str | None, job: Job | None = None) -> tuple[Job, JobStatus]:
    """``status``, and the job's manifest, read unless ``job`` is it (it never changes: ``wait`` reads it once)."""
    storage, output = _storage(job_id, output)
    try:
        job = job if job is not None else read_job(storage, job_id)
        return job, _status(storage, job, output)
    except (FileNotFoundError, SpecError, StorageError):
        raise
    except Exception as err:  # noqa: BLE001 - boto3, pyarrow, JSON and OS errors of every kind, in one line
        if transient(err):
            raise Unreachable(f"storage {output} cannot be reached ({explain(err)})") from None
        raise StorageError(f"job {job_id} under {output} cannot be read ({explain(err)})") from None


def _status(storage: Storage, job: Job, output: str) -> JobStatus:
    markers = set(storage.files(job.id))  # one listing, not a look per marker
    if MANIFEST not in markers:  # deleted since ``wait`` read it
        raise FileNotFoundError(f"no job {job.id!r} under {storage.uri} any more (deleted)")
    ended = "_SUCCESS" in markers
    parts = {} if ended else storage.written(f"{job.id}/parts")  # one listing: which parts, and the newest's time
    done = set() if ended else done_chunks(storage, job, parts)
    # A finalizer (the last task may have died before writing _SUCCESS) once every part is there.
    summary = finalize(storage, job) if ended or len(done) == len(job.chunks) else None
    done = set(range(len(job.chunks))) if summary else done
    state = job_state(summary, markers.__contains__)
    if state == "cancelled" and _chunks_running(output, job.id, started_before=_cancelled_at(storage, job)):
        state = "cancelling"  # chunks under way since before the cancel still write their parts
    counts = _counts(summary) if summary else _cached_counts(job.id)
    documents_done = sum(job.chunks[c] for c in done)
    if counts.errors is None and (not done or state in ("cancelled", "cancelling")):
        counts = _stored_counts(storage, job)  # nothing written yet, or a job that stopped: storage says, once
    # The rate over the time the job advanced, not since submission: it does not fall while a job stands
    # still (cancelled, stalled), and the ETA of a stall is replaced by how long it has stood.
    if summary:  # an ended job: its end is written, no part need be looked at
        advanced = summary["finished"]
    else:
        advanced = max(parts.values(), default=job.created) if done else job.created
    rate = documents_done / max(1e-9, advanced - job.created) if documents_done else 0.0
    failed = summary["failed_chunks"] if summary else {str(c): r for c, r in failures(storage, job).items()}
    stalled = _stalled_for(job, advanced, len(done)) if state == "running" else None
    return JobStatus(
        job.id, state, job.documents, documents_done, counts.errors, len(job.chunks), len(done), rate, output,
        counts.partial, counts.flags, failed, counts.windows, counts.reused_windows, stalled, None, counts.languages,
        counts.routes, counts.targets, counts.terms, job.spec.name, job.team,
    )  # fmt: skip


def _stalled_for(job: Job, last: float, chunks_done: int) -> float | None:
    """Seconds since the job's last part (``last``, or its submission) was written, when that is long for it:
    over ``STALL_AFTER`` and over three times its mean time per chunk so far; None while it advances."""
    pace = (last - job.created) / chunks_done if chunks_done else 0.0
    idle = time.time() - last
    return idle if idle > max(STALL_AFTER, 3 * pace) else None


def _chunks_running(output: str, job_id: str, started_before: float | None = None) -> bool:
    """Whether a chunk of the job is under way (one that started before ``started_before``: a chunk delivered
    after a cancel is only skipped, and must not make the job look as if it were still stopping)."""
    no_cache: dict[bytes, bytes] = {}  # without it, nothing is known to be running
    records = _from_cache(lambda redis: redis.hgetall(cache.RUNNING_KEY), no_cache)
    mine = [raw for field, raw in records.items() if field.decode().startswith(f"{output}|{job_id}|")]
    return any(started_before is None or _since(raw) < started_before for raw in mine)


def _since(raw: bytes) -> float:
    try:
        return float(json.loads(raw)["since"])
    except (ValueError, KeyError, TypeError):
        return 0.0  # a record that cannot be read: as if it were old


def _cancelled_at(storage: Storage, job: Job) -> float | None:
    """When the job was cancelled, as ``cancel`` wrote it; None if that cannot be read."""
    try:
        return float(storage.read(job.key("_CANCELLED")).decode().split()[-1])
    except (FileNotFoundError, ValueError, IndexError):
        return None


class Counts(NamedTuple):
    errors: int | None  # None while unknown
    partial: int | None
    flags: dict[str, int]  # sentences per flag
    windows: int = 0
    reused_windows: int = 0
    languages: dict[str, int] = {}
    routes: dict[str, int] = {}
    targets: dict[str, dict[str, int]] = {}
    terms: dict[str, Any] = {}


def _counts(summary: dict) -> Counts:
    statuses, memory = summary["statuses"], summary.get("memory", {})
    flags = dict(summary.get("sentence_flags", {}))
    named = (summary.get(key, {}) for key in ("languages", "routes", "targets", "terms"))  # older _SUCCESS: none
    return Counts(statuses.get("error", 0), statuses.get("partial", 0), flags, *_windows(memory), *named)


def _cached_progress(job_id: str) -> dict[str, int]:
    """The workers' progress counters of a job (``contract.cache.JOB_PROGRESS_KEY``); empty when Redis lost them
    or one is damaged."""
    key, no_cache = cache.JOB_PROGRESS_KEY.format(job=job_id), dict[bytes, bytes]()
    try:
        return {k.decode(): int(v) for k, v in _from_cache(lambda redis: redis.hgetall(key), no_cache).items()}
    except ValueError:  # a damaged counter: counted from storage instead
        return {}


def _cached_counts(job_id: str) -> Counts:
    """What the workers' progress counters say so far; unknown when Redis lost them."""
    found = _cached_progress(job_id)
    if "errors" not in found:
        return Counts(None, None, {})
    named = lambda prefix: {k.removeprefix(prefix): v for k, v in found.items() if k.startswith(prefix)}
    targets: dict[str, dict[str, int]] = {}
    for name, count in named("target:").items():
        target, _, row_status = name.rpartition(":")
        targets.setdefault(target, dict.fromkeys(STATUSES, 0))[row_status] = count
    terms = term_counts(found)
    return Counts(
        found["errors"], found.get("partial", 0), named("flag:"), *_windows(found), named("language:"), named("route:"),
        dict(sorted(targets.items())), terms,
    )  # fmt: skip


def _stored_counts(storage: Storage, job: Job) -> Counts:
    """The counts of the parts written so far, read from storage (a job that stopped, or has no part yet)."""
    tally = Tally()
    for key in result_keys(storage, job):
        tally.add(read_rows(storage.read(key)))
    return _counts(tally.summary())


def _windows(counts: dict[str, int]) -> tuple[int, int]:
    return counts.get("windows", 0), counts.get("reused_windows", 0)


def wait(
    job_id: str,
    output: str | None = None,
    *,
    poll: float = 1.0,
    timeout: float | None = None,
    on_progress: Callable[[JobStatus], None] | None = None,
) -> JobStatus:
    """Poll until the job ends (succeeded, completed_with_errors, failed, cancelled); ``timeout`` seconds
    without an end is a TimeoutError. A cancelled job ends once its chunks under way have finished.

    The first polls come quickly (0.1 s, doubling up to ``poll``): a short job is not kept waiting.
    Storage that stops answering once the job was seen is waited out: ``on_progress`` hears the last
    status with the ``trouble``, and the polls go on (the workers wait it out too)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    interval = min(0.1, poll)
    current: JobStatus | None = None
    job: Job | None = None
    while True:
        try:
            job, current = _job_status(job_id, output, job)
        except Unreachable as err:
            if current is None:
                raise
            current = replace(current, trouble=f"{err}; still waiting", stalled_for=None)
        if on_progress:
            on_progress(current)
        if current.finished:
            return current
        if deadline is not None and time.monotonic() > deadline:
            hint = f": run `python -m jobs resume {job_id}`" if current.state == "submitting" else ""
            raise TimeoutError(
                f"job {job_id} still {current.state} after {timeout} s ({current.done}/{current.documents}){hint}"
            )
        time.sleep(interval)
        interval = min(poll, 2 * interval)


def jobs(
    output: str | None = None,
    *,
    after: str | None = None,
    keep: Callable[[JobStatus], bool] = lambda _: True,
    limit: int | None = None,
) -> list[JobStatus]:
    """The jobs under ``output`` (default ``FANYI_OUTPUT``) by id, after ``after``, that ``keep`` keeps, at most
    ``limit``. Each is read from its folder's files (one delimiter listing) and one small object (``_SUCCESS`` once
    it ended, else its head), ``LIST_READERS`` jobs at once: a job's parts are never listed. A running job's
    progress is the cache's (documents done, errors, flags), its rate since submission; ``status`` tells the rest
    (chunks done, stalls, failed chunks, cancelling)."""
    output = str(output_prefix(output, needed="which jobs?"))
    storage = open_storage(output)
    folders = [f for f in storage.folders() if after is None or f > after]
    found: list[JobStatus] = []
    with ThreadPoolExecutor(LIST_READERS) as pool:
        for start in range(0, len(folders), LIST_READERS):
            read = lambda job_id: _list_entry(storage, job_id, output)
            entries = pool.map(read, folders[start : start + LIST_READERS])
            found += [entry for entry in entries if entry is not None and keep(entry)]
            if limit is not None and len(found) >= limit:
                return found[:limit]
    return found


def _list_entry(storage: Storage, job_id: str, output: str) -> JobStatus | None:
    """A job as ``jobs`` lists it; None for a folder that holds no job."""
    names = set(storage.files(job_id)) if JOB_ID.fullmatch(job_id) else set()
    if MANIFEST not in names:
        return None
    head = read_head(storage, job_id, written=HEAD in names)
    documents, chunks, created = int(head["documents"]), int(head["chunks"]), float(head["created"])
    summary = json.loads(storage.read(f"{job_id}/_SUCCESS")) if "_SUCCESS" in names else None
    state = job_state(summary, names.__contains__)
    if summary:
        done, counts = int(summary["documents"]), _counts(summary)
        rate, chunks_done = done / max(1e-9, float(summary["finished"]) - created), chunks
    else:
        done, counts = _cached_progress(job_id).get("documents", 0), _cached_counts(job_id)
        rate, chunks_done = done / max(1e-9, time.time() - created), 0
    return JobStatus(
        job_id, state, documents, done, counts.errors, chunks, chunks_done, rate, output, counts.partial,
        counts.flags, {}, counts.windows, counts.reused_windows, None, None, counts.languages, counts.routes,
        counts.targets, counts.terms, str(head["name"]), head.get("team"),
    )  # fmt: skip


def cancel(job_id: str, output: str | None = None) -> int:
    """Chunks under way finish and their parts stay; the job's messages still queued are taken out of the broker
    (the backlog an autoscaler reads drops at once), and any a worker already holds are skipped. How many were
    taken out (0 when the broker cannot be reached: the workers skip them instead)."""
    storage, output = _storage(job_id, output)
    job = read_job(storage, job_id)
    storage.put(job.key("_CANCELLED"), f"cancelled at {time.time()}\n".encode())
    cache.record_ended(job_id)
    return cache.best_effort("cannot take the cancelled job's messages out of the queue",
                             lambda: _drop_queued(job, output), 0)  # fmt: skip


# Takes out of each list (KEYS) the messages whose argsrepr starts with one of ARGV: one pass, order kept, atomic.
_MARK_DROPPED = """
local marked = 0
for index, raw in ipairs(redis.call('LRANGE', KEYS[1], ARGV[1], ARGV[1] + ARGV[2] - 1)) do
  for i = 4, #ARGV do
    if string.find(raw, ARGV[i], 1, true) then
      redis.call('LSET', KEYS[1], ARGV[1] + index - 1, ARGV[3])
      marked = marked + 1
      break
    end
  end
end
return marked
"""
DROP_SLICE = 1000  # queued messages one call of the script looks at: Redis serves others between calls


def _drop_queued(job: Job, output: str) -> int:
    """Take the job's queued chunk messages out of its queue's priority lists; how many. A slice of a list at a
    time, each of the job's messages (found by its arguments' repr, as the message writes it: the output its sender
    was given, the spec's at submit or another spelling at a resume, then the job id) overwritten by a mark in
    place, then every mark removed in one ``LREM``: Redis is never held for the whole queue, and messages pushed
    meanwhile (at the head) only make a slice look at some messages twice."""
    prefixes = {repr([prefix, job.id, 0])[: -len("0]")] for prefix in (output, job.spec.output)}  # "['out', 'id', "
    patterns = sorted('"argsrepr": "' + json.dumps(prefix)[1:-1] for prefix in prefixes)
    mark = f"fanyi:dropped:{job.id}:{secrets.token_hex(8)}"
    broker, dropped = cache.broker(), 0
    for name in settings.priority_lists(job.queue):
        start = 0
        while start < int(broker.llen(name)):
            broker.eval(_MARK_DROPPED, 1, name, start, DROP_SLICE, mark, *patterns)
            start += DROP_SLICE
        dropped += int(broker.lrem(name, 0, mark))
    return dropped


def delete(job_id: str, output: str | None = None, *, force: bool = False) -> tuple[int, int]:
    """Remove a job that has ended: every object under its folder (its manifest last, so a delete cut short is
    listed and done again), and what Redis holds of it (progress, registry, its own translation memory, chunk
    records). With ``force``, a job still running too (its queued messages are taken out first). How many
    objects and Redis keys."""
    storage, output = _storage(job_id, output)
    job = read_job(storage, job_id)
    state = _status(storage, job, output).state
    if state not in TERMINAL and not force:
        raise SpecError(f"job {job_id} is {state}: cancel it first (python -m jobs cancel {job_id}), or delete "
                        "it with --force")  # fmt: skip
    if state not in TERMINAL:
        cancel(job_id, output)
    keys = storage.list(job.id)
    manifest = job.key(MANIFEST)
    for key in [k for k in keys if k != manifest] + [manifest]:
        storage.delete(key)
    forgotten = cache.best_effort(f"job {job_id}'s records in Redis stay (they expire with its metrics)",
                                  lambda: cache.forget_job(output, job_id), 0)  # fmt: skip
    return len(keys), forgotten


def resume(job_id: str, output: str | None = None, *, retry_failed: bool = False) -> int:
    """Enqueue exactly the chunks that have no part in storage (lifting a cancel, completing an
    interrupted submission); with ``retry_failed``, the chunks that failed too. How many."""
    storage, output = _storage(job_id, output)
    job = read_job(storage, job_id)
    if storage.exists(job.key("_SUCCESS")) and not retry_failed:
        return 0
    if retry_failed and compacted_chunks(storage, job):
        raise SpecError(f"job {job_id} was compacted: its failed chunks' rows are inside compacted files; "
                        "submit those documents as a new job instead")  # fmt: skip
    storage.delete(job.key("_CANCELLED"))
    cache.record_ended(job_id, ended=False)
    if retry_failed:
        for chunk in failures(storage, job):
            storage.delete(part_key(job_id, chunk))
            forget_summaries(storage, job, chunk)  # or finalize would count the error rows it summed
            storage.delete(failure_key(job_id, chunk))
        storage.delete(job.key("_SUCCESS"))
        _recount(job_id, output)  # the counters held the failed chunks' error rows
    missing = len(set(range(len(job.chunks))) - done_chunks(storage, job))
    _enqueue_missing(job, storage, output, job_id, True)
    return missing


def compact(
    job_id: str, output: str | None = None, *, target_mb: float = 64, on_progress: Callable[[str], None] | None = None
) -> int:
    """Merge an ended job's parts into files of about ``target_mb`` (see ``jobs.compact``); how many."""
    from jobs.compact import compact as merge

    storage, _ = _storage(job_id, output)
    return merge(storage, job_id, target_mb=target_mb, on_progress=on_progress)


def progress_line(s: JobStatus) -> str:
    """One line: documents, rate, state (with its ETA, a stall or trouble), partial and error counts; a count
    the workers' counters cannot give yet (the cache lost them) reads ``counting``."""
    if s.trouble:
        state = f"{s.state}?  {s.trouble}"
    elif s.stalled_for is not None:
        state = f"{s.state}, no progress for {_duration(s.stalled_for)}"
    else:
        state = f"{s.state}, ETA {_duration(s.eta)}" if s.eta is not None else s.state
    return (
        f"{s.done:,}/{s.documents:,} documents  {s.rate:.1f}/s  {state}  partial {_count(s.partial)}  "
        f"errors {_count(s.errors)}"
    )


def _listed(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n:,}" for name, n in counts.items() if n) or "none"


def _count(n: int | None) -> str:
    return "counting" if n is None else f"{n:,}"


def report(s: JobStatus) -> str:
    """The job's end (or where it stands) in a few lines: counts, failed chunks and what to do."""
    flags = ", ".join(f"{flag} {count:,}" for flag, count in s.sentence_flags.items()) or "none"
    lines = [
        f"{s.id}: {s.state}, {s.done:,} of {s.documents:,} documents written, {_count(s.partial)} partial, "
        f"{_count(s.errors)} errors; sentences flagged: {flags}; output {s.output}/{s.id}/parts/"
    ]
    if s.languages:
        lines.append(f"  languages: {_listed(s.languages)}; routes: {_listed(s.routes)}")
    if s.terms.get("applied") or s.terms.get("missed"):
        put, missed, rate = s.terms["applied"], s.terms["missed"], s.terms["hit_rate"]
        lines.append(f"  glossary terms: {put:,} put in, {missed:,} missed ({rate:.1%})")
    for target, statuses in s.targets.items() if len(s.targets) > 1 else ():
        lines.append(f"  into {target}: {sum(statuses.values()):,} rows ({_listed(statuses)})")
    if s.reused_windows:
        lines.append(f"  translation memory: {s.reused_windows:,} of {s.windows:,} windows reused ({s.reuse_rate:.0%})")
    for chunk, reason in s.failed_chunks.items():
        lines.append(f"  chunk {chunk} failed: {reason}")
    if s.failed_chunks:
        lines.append(f"  fix the cause, then `python -m jobs resume {s.id} --retry-failed` translates those chunks")
    if s.state == "submitting":
        lines.append(f"  enqueueing broke off: `python -m jobs resume {s.id}` enqueues the chunks it lacks")
    return "\n".join(lines)


def clear_memory(output: str | None = None, job_id: str | None = None) -> dict[str, int]:
    """Forget the translation memories under ``output`` (default ``FANYI_OUTPUT``; ``job_id``'s only, when
    named): entries per memory. Jobs still running translate what they would have reused."""
    output = str(output_prefix(output, needed="whose translation memory?"))
    try:
        return cache.clear_memory(output, job_id)
    except Exception as err:  # noqa: BLE001 - redis errors
        raise Unreachable(f"the cache {cache_trouble(err)}; nothing was cleared") from None


def as_json(s: JobStatus) -> str:
    return json.dumps({**asdict(s), "eta": s.eta, "reuse_rate": round(s.reuse_rate, 4)})


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


class Progress:
    """``on_progress`` for ``wait``: a bar (tqdm) on a terminal; in a log, a line every ``every`` seconds and
    at every change of state (running, stalled, storage trouble, cancelling, the end)."""

    def __init__(self, every: float = 10.0, *, tty: bool | None = None) -> None:
        self.bar: tqdm | None = None
        self.every, self.last = every, -every
        self.tty = tty
        self.shown: tuple[str, bool, bool] | None = None  # the state of the last line printed

    def __call__(self, s: JobStatus) -> None:
        if not (sys.stderr.isatty() if self.tty is None else self.tty):
            state = (s.state, s.stalled_for is not None, s.trouble is not None)
            if state != self.shown or time.monotonic() - self.last >= self.every:
                print(progress_line(s), file=sys.stderr, flush=True)
                self.last, self.shown = time.monotonic(), state
            return
        if self.bar is None:
            self.bar = tqdm(total=s.documents, initial=s.done, unit="doc", file=sys.stderr, dynamic_ncols=True)
        self.bar.update(s.done - self.bar.n)
        trouble = s.trouble or (f"no progress for {_duration(s.stalled_for)}" if s.stalled_for is not None else "")
        postfix = f"{s.state}, partial {_count(s.partial)}, errors {_count(s.errors)}"
        self.bar.set_postfix_str(f"{postfix}, {trouble}" if trouble else postfix)
        if s.finished:
            self.bar.close()
