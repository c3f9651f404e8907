"""What went wrong with a chunk, in one place: whose fault it is decides what happens to the chunk.

* ``TRANSIENT``: storage or the broker answered 5xx, throttled, timed out or dropped the connection;
  or the artifact's files changed while the chunk was translated (``ArtifactChanged``: the next try
  loads it again, and finds it broken, or another artifact than the job's). The chunk is retried with
  capped, jittered backoff; no document ever becomes an error row for it.
* ``ENVIRONMENT``: this worker cannot do any chunk (its own artifact ``FANYI_ARTIFACT`` is missing,
  fails verification or its engine cannot be built, storage refuses its credentials, its disk is
  full or read-only), or cannot load the job's artifact while other workers may. The chunk goes back
  to the queue for a healthy worker, and this one marks itself unhealthy and stops taking chunks
  until the fault clears (``worker.monitoring.health``). A chunk put back ``FANYI_MAX_DEATHS`` times ends as
  error rows (``worker.runtime.chunk_task``).
* ``CHUNK``: the chunk itself cannot be done (its input is gone or unreadable, no live worker can
  load the artifact its job names, or it is another artifact now): its documents are written as error rows with the
  reason, so the job ends.
"""

from __future__ import annotations

import errno
import tempfile
from enum import Enum
from pathlib import Path

from contract import settings
from contract.storage import client_error_code, transient
from worker.engine.artifact import ArtifactChanged, ArtifactError
from worker.monitoring import health


class Fault(Enum):
    TRANSIENT = "transient"
    ENVIRONMENT = "environment"
    CHUNK = "chunk"


class ChunkFault(Exception):
    """The chunk cannot be done; the message says why and what to do."""


class JobGone(Exception):
    """The job's manifest is not in storage: the job was deleted (or the output prefix is wrong)."""


class EnvironmentFault(Exception):
    """This worker cannot do chunks until something about it is fixed; the message says what, and
    ``check`` how to tell it is fixed (``worker.monitoring.health``)."""

    def __init__(self, message: str, check: dict[str, str]):
        super().__init__(message)
        self.check = check


# S3 error codes that mean "these credentials or this bucket", not "this request, now".
_REFUSED = {
    "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken",
    "AllAccessDisabled", "NoSuchBucket", "AuthorizationHeaderMalformed", "403", "401",
}  # fmt: skip
_DISK = {errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EACCES}


def classify(err: BaseException) -> Fault:
    """Whose fault ``err`` is (see the module's docstring)."""
    from botocore.exceptions import ClientError, NoCredentialsError, PartialCredentialsError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    if isinstance(err, ChunkFault):
        return Fault.CHUNK
    if isinstance(err, ArtifactChanged):
        return Fault.TRANSIENT
    if isinstance(err, EnvironmentFault | ArtifactError | NoCredentialsError | PartialCredentialsError):
        return Fault.ENVIRONMENT
    if isinstance(err, ClientError) and _refused(err):
        return Fault.ENVIRONMENT
    if transient(err) or isinstance(err, RedisConnectionError | RedisTimeoutError):  # storage's rule: contract.storage
        return Fault.TRANSIENT
    if isinstance(err, OSError) and err.errno in _DISK:
        return Fault.ENVIRONMENT
    return Fault.CHUNK


def _refused(err: BaseException) -> bool:
    code, status = client_error_code(err)
    return code in _REFUSED or status in (401, 403)


def checks_for(err: BaseException, output: str) -> list[dict[str, str]]:
    """The checks that show the fault behind ``err`` fixed."""
    if isinstance(err, EnvironmentFault):
        return [err.check]
    if isinstance(err, ArtifactError) and settings.ARTIFACT:
        return [{"kind": "artifact", "target": settings.ARTIFACT}]
    if isinstance(err, OSError) and err.errno in _DISK:
        if getattr(err, "filename", None):
            return [{"kind": "disk", "target": str(Path(str(err.filename)).parent)}]
        folders = dict.fromkeys([tempfile.gettempdir(), health.folder()])
        return [{"kind": "disk", "target": folder} for folder in folders]
    return [{"kind": "storage", "target": output or ""}]
