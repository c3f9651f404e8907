"""Storage: the system of record for jobs. Local directories or S3-compatible object stores.

An object appears complete or not at all. Result parts, a job's manifest, its ``_SUCCESS`` and its
compacted files are written *create if absent* (``create``): a second writer of the same key (a
redelivered or duplicated task) learns the key exists instead of replacing it. On S3 that is
``PutObject`` with ``If-None-Match: *`` (AWS, MinIO and moto honour it); a store that answers 501 to
it falls back to a head-then-put. Locally it is a temporary file, fsynced, then ``os.link`` to the
key, which fails if the key exists. Markers (``_ENQUEUED``, ``_CANCELLED``), chunk inputs and failure
records are written or replaced (``put``).

Keys are relative, ``/``-separated and checked: ``..``, absolute paths and control characters are
refused, so no job id or key can write outside its prefix. Transient errors (5xx, timeouts,
connection resets) are retried by botocore with capped, jittered backoff ("standard" mode).
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from contract import settings

MULTIPART_BYTES = 64 * 2**20  # objects above this go up in parts (boto3's transfer manager)
_BAD_KEY = re.compile(r"(^|/)\.\.?(/|$)|^/|\\|[\x00-\x1f\x7f]")


class StorageError(Exception):
    """A URI or key that cannot be used; the message says why."""


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


UMASK = _umask()
# What a file created plainly gets under the umask (0644 under the usual 022): results are for other
# people and programs, not private like ``mkstemp``'s 0600.
READABLE = 0o666 & ~UMASK


# S3 error codes that mean "this request, now": another try may succeed.
TRANSIENT_CODES = {"SlowDown", "RequestTimeout", "RequestTimeTooSkewed", "InternalError", "ServiceUnavailable", "503"}


def transient(err: BaseException) -> bool:
    """Whether a storage error may clear by itself, so the call is worth trying again: S3 answered 5xx, 429 or
    a code of ``TRANSIENT_CODES`` (not with 401/403: refused credentials stay refused), botocore could not get
    an answer (connection refused or reset, timeouts, a response cut off: any ``BotoCoreError`` but missing
    credentials), or the OS said ``ConnectionError``/``TimeoutError``. A missing key, a corrupt file, bad
    JSON, refused credentials are not: trying again gives the same answer."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

    if isinstance(err, ClientError):
        code, status = client_error_code(err)
        if status in (401, 403):
            return False
        return code in TRANSIENT_CODES or status >= 500 or status == 429
    if isinstance(err, NoCredentialsError | PartialCredentialsError):
        return False
    return isinstance(err, BotoCoreError | ConnectionError | TimeoutError)


def client_error_code(err: BaseException) -> tuple[str, int]:
    """A botocore ``ClientError``'s error code and HTTP status ("", 0 when it has none)."""
    response = getattr(err, "response", {}) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return code, status


def check_key(key: str) -> str:
    if not key or _BAD_KEY.search(key) or "//" in key:
        raise StorageError(f"refusing storage key {key!r}: keys are relative paths without '.', '..' or '//'")
    return key


class Storage(Protocol):
    @property
    def uri(self) -> str: ...

    def read(self, key: str) -> bytes: ...
    def create(self, key: str, data: bytes) -> bool:
        """Write ``data`` at ``key`` unless it exists; True if this call created it."""
        ...

    def put(self, key: str, data: bytes) -> None:
        """Write or replace ``key``: markers, chunk inputs, failure records. Never a result part: those are
        created once (``create``)."""
        ...

    def put_file(self, key: str, path: Path) -> None:
        """Write or replace ``key`` with the file at ``path``, streamed (an upload larger than memory)."""
        ...

    def exists(self, key: str) -> bool: ...
    def folders(self) -> list[str]:
        """The folders at the storage root, sorted: one delimiter listing, not every key under them."""
        ...

    def files(self, folder: str) -> list[str]:
        """The names of the objects directly in ``folder`` (not in its subfolders), sorted: one delimiter listing."""
        ...

    def list(self, prefix: str) -> list[str]:
        """Keys under ``prefix`` (relative to the storage root), sorted."""
        ...

    def delete(self, key: str) -> None: ...
    def written(self, prefix: str) -> dict[str, float]:
        """The keys under ``prefix``, as ``list`` gives them, each with when it was written (seconds since the
        epoch, the store's clock): one listing where a caller needs both."""
        ...


def open_storage(uri: str) -> Storage:
    """``s3://bucket/prefix`` or a local directory (``file://`` or a plain path)."""
    if uri.startswith("s3://"):
        return S3Storage(*split_s3(uri))
    if "://" in uri and not uri.startswith("file://"):
        raise StorageError(f"unsupported storage URI {uri!r}: use s3://bucket/prefix or a local directory")
    return LocalStorage(Path(uri.removeprefix("file://")))


def split_s3(uri: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix/`` -> ``("bucket", "some/prefix")``. S3 takes ``.``, ``..`` and empty path
    segments literally (``s3://b/../../x`` would write keys starting ``../../x/``), so they are refused here,
    as is a URI without a bucket."""
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    if not bucket or bucket in (".", ".."):
        raise StorageError(f"{uri!r} names no bucket: use s3://bucket/prefix")
    prefix = prefix.strip("/")
    if prefix and (_BAD_KEY.search(prefix) or "//" in prefix):
        raise StorageError(
            f"{uri!r}: an s3:// path cannot have '.', '..' or empty segments (S3 would keep them literally in "
            "the keys): write the prefix without them"
        )
    return bucket, prefix


@dataclass
class LocalStorage:
    root: Path

    @property
    def uri(self) -> str:
        return str(self.root)

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def read(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise FileNotFoundError(f"{self.root / key} does not exist") from None

    def create(self, key: str, data: bytes) -> bool:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, READABLE)
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, READABLE)
        os.replace(tmp, path)

    def put_file(self, key: str, path: Path) -> None:
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        os.close(fd)
        shutil.copyfile(path, tmp)
        os.chmod(tmp, READABLE)
        os.replace(tmp, target)

    def exists(self, key: str) -> bool:
        return self._path(key).exists()

    def folders(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if p.is_dir()) if self.root.is_dir() else []

    def files(self, folder: str) -> list[str]:
        base = self._path(folder)
        names = (p.name for p in base.iterdir() if p.is_file()) if base.is_dir() else ()
        return sorted(name for name in names if not name.startswith(".tmp-"))

    def list(self, prefix: str) -> list[str]:
        base = self.root / prefix if prefix else self.root
        if not base.exists():
            return []
        keys = (p.relative_to(self.root).as_posix() for p in base.rglob("*") if p.is_file())
        return sorted(k for k in keys if not Path(k).name.startswith(".tmp-"))

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def written(self, prefix: str) -> dict[str, float]:
        times = {}
        for key in self.list(prefix):
            try:
                times[key] = (self.root / key).stat().st_mtime
            except FileNotFoundError:  # deleted since the listing
                pass
        return times


class S3Storage:
    """A bucket and prefix through boto3: the standard credential chain, ``FANYI_S3_ENDPOINT_URL``."""

    def __init__(self, bucket: str, prefix: str = "", *, client: Any = None):
        self.bucket, self.prefix = bucket, prefix
        self.client = client or s3_client()
        self.uri = f"s3://{bucket}/{prefix}".rstrip("/")

    def _key(self, key: str) -> str:
        check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def read(self, key: str) -> bytes:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
        except self.client.exceptions.NoSuchKey:
            raise FileNotFoundError(f"{self.uri}/{key} does not exist") from None

    def create(self, key: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError

        try:
            self._upload(key, data, IfNoneMatch="*")
            return True
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            if code in ("PreconditionFailed", "ConditionalRequestConflict", "412"):
                return False
            if code not in ("NotImplemented", "501"):
                raise
        if self.exists(key):  # a store without conditional writes: head, then put
            return False
        self._upload(key, data)
        return True

    def _upload(self, key: str, data: bytes, **conditions: str) -> None:
        if len(data) <= MULTIPART_BYTES or conditions:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, **conditions)
            return
        import io

        from boto3.s3.transfer import TransferConfig

        config = TransferConfig(multipart_threshold=MULTIPART_BYTES, multipart_chunksize=MULTIPART_BYTES)
        self.client.upload_fileobj(io.BytesIO(data), self.bucket, self._key(key), Config=config)

    def put(self, key: str, data: bytes) -> None:
        self._upload(key, data)

    def put_file(self, key: str, path: Path) -> None:
        from boto3.s3.transfer import TransferConfig

        config = TransferConfig(multipart_threshold=MULTIPART_BYTES, multipart_chunksize=MULTIPART_BYTES)
        self.client.upload_file(str(path), self.bucket, self._key(key), Config=config)

    def get_file(self, key: str, path: Path) -> None:
        """The object at ``key`` into the file ``path``, in parts fetched in parallel (a large input)."""
        from boto3.s3.transfer import TransferConfig

        config = TransferConfig(multipart_threshold=MULTIPART_BYTES, multipart_chunksize=MULTIPART_BYTES)
        try:
            self.client.download_file(self.bucket, self._key(key), str(path), Config=config)
        except self.client.exceptions.ClientError as err:
            if client_error_code(err)[1] == 404:
                raise FileNotFoundError(f"{self.uri}/{key} does not exist") from None
            raise

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            return True
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise

    def folders(self) -> list[str]:
        root = f"{self.prefix.rstrip('/')}/" if self.prefix else ""
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=root, Delimiter="/")
        return sorted(p["Prefix"][len(root) :].rstrip("/") for page in pages for p in page.get("CommonPrefixes", []))

    def files(self, folder: str) -> list[str]:
        full = f"{self._key(folder).rstrip('/')}/"
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full, Delimiter="/")
        return sorted(o["Key"][len(full) :] for page in pages for o in page.get("Contents", []))

    def list(self, prefix: str) -> list[str]:
        strip = len(self.prefix) + 1 if self.prefix else 0
        return sorted(obj["Key"][strip:] for obj in self._objects(prefix))

    def written(self, prefix: str) -> dict[str, float]:
        strip = len(self.prefix) + 1 if self.prefix else 0
        return {obj["Key"][strip:]: obj["LastModified"].timestamp() for obj in self._objects(prefix)}  # in key order

    def _objects(self, prefix: str) -> Iterator[dict[str, Any]]:
        folder = self._key(prefix) if prefix else self.prefix  # a folder, as on disk: "a/b" never lists "a/bc"
        full = f"{folder.rstrip('/')}/" if folder else ""
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full):
            yield from page.get("Contents", [])

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(key))


def s3_client() -> Any:
    """The process's boto3 S3 client for the current endpoint, reused so its connections are kept alive.

    One per process id: a client's connection pool must never cross a fork (Celery prefork)."""
    return _s3_client(settings.s3_endpoint_url(), os.environ.get("AWS_ACCESS_KEY_ID"), os.getpid())


@functools.lru_cache(maxsize=8)
def _s3_client(endpoint: str | None, access_key_id: str | None, pid: int) -> Any:
    """Standard credential chain, retries with backoff, checksums only when required (MinIO and older
    S3-compatible stores reject the newer default checksum trailers)."""
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"max_attempts": settings.S3_RETRIES, "mode": "standard"},
        connect_timeout=settings.S3_TIMEOUT,
        read_timeout=settings.S3_TIMEOUT,
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        s3={"addressing_style": "path"} if endpoint else {},
    )
    return boto3.client("s3", endpoint_url=endpoint, config=config)


def glob_keys(storage: Storage, pattern: str) -> list[str]:
    """Keys matching a shell pattern (``data/*.parquet``); listing starts at the pattern's fixed part."""
    fixed = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
    base = fixed.rsplit("/", 1)[0] if "/" in fixed else ""
    return [k for k in storage.list(base) if fnmatch.fnmatchcase(k, pattern)]
