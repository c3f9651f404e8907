"""The producer's verbs, for notebooks and pipelines; ``python -m jobs`` is a thin CLI over them.

    from jobs import api
    job_id = api.submit(api.load_spec("news.yaml"))
    api.wait(job_id, output="s3://results/translations")

Storage is the system of record: status, resume and cancel read the job's prefix, so they work
after Redis lost everything. Redis only carries the chunk messages and a few caches.
"""

from __future__ import annotations

import secrets
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime

from jobs.chunks import plan_chunks
from jobs.inputs import collect
from jobs.spec import JobSpec, SpecError, load_spec
from worker import metrics, settings
from worker.job import (
    Document,
    Job,
    done_chunks,
    encode_documents,
    finalize,
    input_key,
    list_jobs,
    read_job,
    write_job,
)
from worker.storage import Storage, StorageError, open_storage

__all__ = ["JobStatus", "cancel", "jobs", "load_spec", "resume", "status", "submit", "wait"]

UPLOAD_THREADS = 8  # chunk inputs written at once by `submit` (each is one PUT)


@dataclass
class JobStatus:
    id: str
    state: str  # "running", "succeeded", "cancelled"
    documents: int
    done: int
    errors: int | None  # None while unknown (Redis lost its counters and the job is not finished)
    chunks: int
    chunks_done: int
    rate: float  # documents per second since submission
    output: str
    partial: int | None = None  # documents with a sentence that still shows a symptom; None while unknown
    sentence_flags: dict[str, int] = field(default_factory=dict)  # sentences per flag (retried, empty, ...)

    @property
    def eta(self) -> float | None:
        return (self.documents - self.done) / self.rate if self.rate > 0 and self.state == "running" else None


def submit(spec: JobSpec, *, enqueue: bool = True, on_progress: Callable[[str], None] | None = None) -> str:
    """Check everything, write the manifest and chunk inputs, enqueue one task per chunk; the job id.

    ``on_progress`` hears what is going on (documents read, chunk inputs written) for a progress line."""
    from worker.artifact import Artifact, ArtifactError
    from worker.tokenizer import Tokenizer

    say = on_progress or (lambda _: None)
    try:
        artifact = Artifact.load(spec.artifact, verify=False)
        tokenizer = Tokenizer.from_artifact(artifact)
    except (ArtifactError, OSError, KeyError) as err:
        raise SpecError(f"artifact {spec.artifact!r}: {err}") from None
    options = spec.options
    try:
        tokenizer.framing(options.get("source_language"), options.get("target_language"), options.get("source_prefix"))
    except ValueError as err:
        raise SpecError(f"options: {err}") from None
    try:
        storage = open_storage(spec.output)
    except StorageError as err:
        raise SpecError(f"output {spec.output!r}: {err}") from None
    documents, files = collect(spec, settings.MAX_DOCUMENT_CHARS)
    tokens = tokenizer.count([d.text or "" for d in documents])
    bad = sum(d.error is not None for d in documents)
    say(
        f"{len(documents):,} documents, {sum(tokens):,} source tokens checked"
        + (f"; {bad:,} bad rows kept as error rows" if bad else "")
    )
    ranges = plan_chunks(tokens, max_documents=spec.chunk_documents, max_tokens=spec.chunk_tokens)
    chunks = [documents[r.start : r.stop] for r in ranges]
    job_id = f"{spec.name}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(2)}"
    job = Job(job_id, spec.to_dict(), artifact.artifact_id, [len(c) for c in chunks], bad_rows=bad)
    _write_inputs(storage, job_id, chunks, say)  # inputs first: a manifest always has its chunks
    write_job(storage, job)
    if not documents:  # a day with nothing new: a job of 0 documents, finished at once
        say(f"no documents in {', '.join(files)}: the job succeeds with nothing to translate")
        finalize(storage, job)
    elif enqueue:
        _register(job_id, spec.output, job.documents)
        _enqueue(job, spec.output, range(len(chunks)))
    return job_id


def _write_inputs(storage: Storage, job_id: str, chunks: list[list[Document]], say: Callable[[str], None]) -> None:
    def write(index: int) -> None:
        storage.put(input_key(job_id, index), encode_documents(chunks[index]))

    with ThreadPoolExecutor(UPLOAD_THREADS) as pool:
        for written, _ in enumerate(pool.map(write, range(len(chunks))), 1):
            if written == len(chunks) or written % 100 == 0:
                say(f"chunk inputs written: {written:,}/{len(chunks):,}")


def _enqueue(job: Job, output: str, chunks) -> None:
    from worker.app import app

    with app.connection_for_write(settings.BROKER_URL) as connection:  # the broker the settings name, now
        for chunk in chunks:
            app.send_task(
                "fanyi.translate_chunk", args=[output, job.id, chunk], queue=job.queue,
                priority=job.spec.get("priority", 5), connection=connection,
            )  # fmt: skip


def _register(job_id: str, output: str, documents: int) -> None:
    try:
        metrics.cache().hset(metrics.JOBS_KEY, job_id, output)
        metrics.cache().hset(metrics.JOB_PROGRESS_KEY.format(job=job_id), "total", documents)
    except Exception:  # noqa: BLE001 - a cache: `--output` finds the job without it
        pass


def _set_cached_progress(job_id: str, documents: int) -> None:
    """After a Redis loss the counters restart: set them from what storage holds."""
    try:
        metrics.cache().hset(metrics.JOB_PROGRESS_KEY.format(job=job_id), "documents", documents)
    except Exception:  # noqa: BLE001
        pass


def _storage(job_id: str, output: str | None) -> tuple[Storage, str]:
    output = output or settings.OUTPUT or _registered(job_id)
    if not output:
        raise SpecError(f"where is job {job_id}? pass --output PREFIX (or set FANYI_OUTPUT)")
    return open_storage(output), output


def _registered(job_id: str) -> str | None:
    try:
        found = metrics.cache().hget(metrics.JOBS_KEY, job_id)
        return found.decode() if found else None
    except Exception:  # noqa: BLE001
        return None


def status(job_id: str, output: str | None = None) -> JobStatus:
    storage, output = _storage(job_id, output)
    job = read_job(storage, job_id)
    done = done_chunks(storage, job)
    summary = finalize(storage, job)  # the finalizer: the last task may have died before writing _SUCCESS
    if summary:
        state, counts = "succeeded", _counts(summary)
    else:
        state, counts = ("cancelled" if storage.exists(job.key("_CANCELLED")) else "running"), _cached_counts(job_id)
    finished = summary["finished"] if summary else time.time()
    documents_done = sum(job.chunks[c] for c in done)
    rate = documents_done / max(1e-9, finished - job.created)
    errors, partial, flags = counts
    return JobStatus(
        job.id, state, job.documents, documents_done, errors, len(job.chunks), len(done), rate, output, partial, flags
    )


Counts = tuple[int | None, int | None, dict[str, int]]  # errors, partial, sentences per flag


def _counts(summary: dict) -> Counts:
    statuses = summary["statuses"]
    return statuses.get("error", 0), statuses.get("partial", 0), dict(summary.get("sentence_flags", {}))


def _cached_counts(job_id: str) -> Counts:
    """What the workers' progress counters say so far; unknown when Redis lost them."""
    try:
        found = {
            k.decode(): int(v) for k, v in metrics.cache().hgetall(metrics.JOB_PROGRESS_KEY.format(job=job_id)).items()
        }
    except Exception:  # noqa: BLE001 - a cache
        return None, None, {}
    if "errors" not in found:
        return None, None, {}
    flags = {k.removeprefix("flag:"): v for k, v in found.items() if k.startswith("flag:")}
    return found["errors"], found.get("partial", 0), flags


def wait(
    job_id: str,
    output: str | None = None,
    *,
    poll: float = 1.0,
    timeout: float | None = None,
    on_progress: Callable[[JobStatus], None] | None = None,
) -> JobStatus:
    """Poll until the job succeeded or was cancelled (or ``timeout`` seconds passed: TimeoutError).

    The first polls come quickly (0.1 s, doubling up to ``poll``): a short job is not kept waiting."""
    deadline = None if timeout is None else time.monotonic() + timeout
    interval = min(0.1, poll)
    while True:
        current = status(job_id, output)
        if on_progress:
            on_progress(current)
        if current.state != "running":
            return current
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} not finished after {timeout} s ({current.done}/{current.documents})")
        time.sleep(interval)
        interval = min(poll, 2 * interval)


def jobs(output: str) -> list[JobStatus]:
    storage = open_storage(output)
    return [status(job_id, output) for job_id in list_jobs(storage)]


def cancel(job_id: str, output: str | None = None) -> None:
    """Chunks not yet started are skipped by the workers; parts already written stay."""
    storage, _ = _storage(job_id, output)
    job = read_job(storage, job_id)
    storage.put(job.key("_CANCELLED"), f"cancelled at {time.time()}\n".encode())


def resume(job_id: str, output: str | None = None) -> int:
    """Enqueue exactly the chunks that have no part in storage (and lift a cancel); how many."""
    storage, output = _storage(job_id, output)
    job = read_job(storage, job_id)
    storage.delete(job.key("_CANCELLED"))
    missing = sorted(set(range(len(job.chunks))) - done_chunks(storage, job))
    _register(job_id, output, job.documents)
    _set_cached_progress(job_id, sum(job.chunks[c] for c in range(len(job.chunks)) if c not in missing))
    _enqueue(job, output, missing)
    if not missing:
        finalize(storage, job)
    return len(missing)


def progress_line(s: JobStatus, width: int = 30) -> str:
    filled = int(width * s.done / max(1, s.documents))
    eta = f"ETA {_duration(s.eta)}" if s.eta is not None else s.state
    errors = "?" if s.errors is None else f"{s.errors:,}"
    partial = "?" if s.partial is None else f"{s.partial:,}"
    return (
        f"[{'#' * filled}{'.' * (width - filled)}] {s.done:,}/{s.documents:,} documents  "
        f"{s.rate:.1f}/s  {eta}  partial {partial}  errors {errors}"
    )


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def print_progress(s: JobStatus) -> None:
    end = "\n" if s.state != "running" or not sys.stderr.isatty() else "\r"
    print(progress_line(s), end=end, file=sys.stderr, flush=True)
