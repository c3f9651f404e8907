"""Which engine translates a chunk: the worker's own (``FANYI_ARTIFACT``) when it is the job's artifact,
else the one the job's spec names, each built once per process (``worker.engine.loaded``)."""

from __future__ import annotations

from celery.exceptions import SoftTimeLimitExceeded

from contract import settings
from contract.job import Job
from worker.engine import loaded
from worker.engine.artifact import ArtifactError
from worker.engine.sessions import cpu_class
from worker.engine.translator import Translator
from worker.monitoring import fleet, metrics
from worker.runtime.faults import ChunkFault, EnvironmentFault


def translator_for(artifact: str) -> Translator:
    """This process's engine for ``artifact``, its batches observed by the worker's metrics."""
    translator = loaded.translator_for(artifact)
    if translator.on_batch is None:  # built just now
        metrics.ENGINES_BUILT.labels(translator.precision, cpu_class()).inc()
        translator.on_batch = lambda batch: metrics.BATCH_FILL.observe(batch.cost / translator.max_tokens)
    return translator


def own_translator(*, sessions: bool = True) -> Translator | None:
    """The worker's own engine (``FANYI_ARTIFACT``, None without one), with its sessions made unless
    ``sessions`` is False (the main process checks it without ONNX Runtime sessions before any fork).

    The one check of the worker's own artifact (at start, in each process after fork, for every
    chunk): whatever keeps it from being built (files missing or altered, the tokenizer, ONNX Runtime,
    CUDA) is an ``EnvironmentFault`` of this worker, never a chunk's; its health check loads the
    artifact again, or for any other failure builds the whole engine in a new process."""
    if not settings.ARTIFACT:
        return None
    try:
        translator = translator_for(settings.ARTIFACT)
        if sessions:
            with translator.pool.acquire():
                pass
    except SoftTimeLimitExceeded:
        raise
    except Exception as err:  # noqa: BLE001 - one exception set: anything is this worker's fault
        check = {"kind": "artifact" if isinstance(err, ArtifactError) else "engine", "target": settings.ARTIFACT}
        raise EnvironmentFault(
            f"this worker's own artifact {settings.ARTIFACT} cannot be used: {type(err).__name__}: {err}", check
        ) from None
    return translator


def job_translator(job: Job, chunk: int, worker: str) -> Translator:
    """The worker's own engine when it is the artifact of the job's chunk ``chunk``, else the one the spec names.

    A job's artifact that this worker cannot load (missing, half-copied, altered) while another worker
    of its queue may is this worker's fault, as its own artifact is (``own_translator``): the chunk
    goes back and this worker stops consuming until it can load it. Only an artifact that no live
    worker of the queue can load (``worker.monitoring.fleet``), or whose content is no longer the one the
    job was submitted for, is the job's: its chunks end as error rows with the reason."""
    path, artifact_id = job.artifact(chunk)
    own = own_translator()
    if own is not None and own.artifact.artifact_id == artifact_id:
        return own
    queue = job.queue
    try:
        translator = translator_for(path)
    except ArtifactError as err:
        if fleet.nobody_can_load(path, queue, worker):
            raise ChunkFault(f"no worker of {queue} can load its artifact: {err}") from None
        check = {"kind": "job_artifact", "target": path, "queue": queue, "worker": worker}
        raise EnvironmentFault(f"this worker cannot load the job's artifact: {err}", check) from None
    fleet.can_load(path, worker)
    if translator.artifact.artifact_id != artifact_id:
        raise ChunkFault(
            f"the artifact at {path} is now {translator.artifact.artifact_id}, the job was submitted "
            f"for {artifact_id} (artifacts are immutable: a new version goes to a new path): submit the job again"
        )
    return translator
