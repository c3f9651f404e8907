"""The chunk message a producer sends (``Job.chunk_message``) and the one check of its arguments, which
every worker runs before it reads or writes anything (``worker.runtime``) and the watchdog runs on what it
finds in the broker (``worker.monitoring.watchdog``)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from contract.job import JOB_ID
from contract.storage import StorageError, split_s3

MAX_OUTPUT = 2048  # characters of an output URI: far beyond any real one, far below an 8 MB argument


def short(text: str, limit: int) -> str:
    """``text`` on one line, cut at ``limit`` characters (saying how long it was)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


class InvalidChunk(Exception):
    """A chunk message no worker can ever do: dropped, never retried, nothing written."""


def _chunk_signature(output: str, job_id: str, chunk: int) -> None:
    """``translate_chunk``'s arguments."""


_SIGNATURE = inspect.signature(_chunk_signature)


def chunk_arguments(args: Any, kwargs: Any) -> tuple[str, str, int]:
    """``(output, job_id, chunk)`` from a chunk message, or ``InvalidChunk`` saying why they can never be
    a chunk of a job: checked from the message alone, before anything is read or written. An output
    must parse as a place jobs are written to: ``s3://bucket/prefix`` or a local path (a spec's are
    made absolute), without a ``..`` segment (nor a ``.`` one in S3, where it would be a literal key);
    whether a job is there is its manifest's to say (``worker.runtime.faults.JobGone``), and whether the chunk
    is one of its chunks too (``InvalidChunk`` from ``worker.runtime.tasks.run_chunk``)."""
    if not isinstance(args, Sequence) or isinstance(args, str) or not isinstance(kwargs, Mapping):
        raise InvalidChunk("its arguments are not a list and an object")
    try:
        bound = _SIGNATURE.bind(*args, **kwargs).arguments
    except TypeError as err:
        raise InvalidChunk(f"its arguments are not (output, job_id, chunk): {err}") from None
    output, job_id, chunk = bound["output"], bound["job_id"], bound["chunk"]
    if not isinstance(job_id, str) or not JOB_ID.fullmatch(job_id) or ".." in job_id:
        raise InvalidChunk(f"job id {short(repr(job_id), 60)} is not a job id")
    if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 0:
        raise InvalidChunk(f"chunk {short(repr(chunk), 40)} of job {job_id} is not a chunk number")
    if not isinstance(output, str) or not _output_ok(output):  # not logged: it may hold anything
        raise InvalidChunk(f"the output of job {job_id} is not an s3://bucket/prefix URI nor a local path")
    return output, job_id, chunk


def _output_ok(output: str) -> bool:
    if not output or len(output) > MAX_OUTPUT or not output.isprintable():
        return False
    if output.startswith("s3://"):
        try:
            split_s3(output)  # where every s3:// URI is parsed
        except StorageError:
            return False
        return True
    if "://" in output and not output.startswith("file://"):
        return False
    return ".." not in output.removeprefix("file://").split("/")
