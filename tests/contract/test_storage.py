"""Both storage backends keep one contract: a part is created once, markers are replaced, keys never
leave their prefix, a missing key is FileNotFoundError. Local folders and moto's real S3 API."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from contract.storage import LocalStorage, S3Storage, Storage, StorageError, open_storage
from tests.services import S3_ENV


@pytest.fixture(params=["local", "s3"])
def storage(request, tmp_path: Path, monkeypatch) -> Iterator[Storage]:
    if request.param == "local":
        yield LocalStorage(tmp_path / "root")
        return
    server = request.getfixturevalue("s3_server")
    for key, value in {**S3_ENV, "FANYI_S3_ENDPOINT_URL": server.url}.items():
        monkeypatch.setenv(key, value)
    bucket = f"storage-{secrets.token_hex(4)}"
    store = open_storage(f"s3://{bucket}/some/prefix")
    assert isinstance(store, S3Storage)
    store.client.create_bucket(Bucket=bucket)
    for outside in ("some/other", "some/prefix-too/x"):  # beside the prefix, and sharing its first letters
        store.client.put_object(Bucket=bucket, Key=outside, Body=b"outside the prefix")
    yield store


def test_a_part_is_created_once_and_the_second_writer_is_told(storage: Storage) -> None:
    assert storage.create("job/parts/part-00000.parquet", b"first")
    assert not storage.create("job/parts/part-00000.parquet", b"second")
    assert storage.read("job/parts/part-00000.parquet") == b"first"


def test_put_replaces_and_delete_removes(storage: Storage) -> None:
    storage.put("job/_CANCELLED", b"one")
    storage.put("job/_CANCELLED", b"two")
    assert storage.read("job/_CANCELLED") == b"two" and storage.exists("job/_CANCELLED")
    storage.delete("job/_CANCELLED")
    assert not storage.exists("job/_CANCELLED")
    storage.delete("job/_CANCELLED")  # deleting what is gone is no error


def test_a_missing_key_is_file_not_found_naming_it(storage: Storage) -> None:
    with pytest.raises(FileNotFoundError, match="job/_job.json"):
        storage.read("job/_job.json")
    assert not storage.exists("job/_job.json")


def test_list_gives_sorted_keys_under_the_prefix_relative_to_the_root(storage: Storage) -> None:
    for key in ("b/parts/part-00001.parquet", "b/parts/part-00000.parquet", "a/_job.json", "bb/x"):
        storage.create(key, b"x")
    assert storage.list("b/parts") == ["b/parts/part-00000.parquet", "b/parts/part-00001.parquet"]
    assert storage.list("") == ["a/_job.json", "b/parts/part-00000.parquet", "b/parts/part-00001.parquet", "bb/x"]
    assert storage.list("nothing") == []


def test_written_gives_the_keys_of_list_with_the_time_each_was_written(storage: Storage) -> None:
    before = time.time()
    for key in ("b/parts/part-00001.parquet", "b/parts/part-00000.parquet", "bb/x"):
        storage.create(key, b"x")
    written = storage.written("b/parts")
    assert list(written) == storage.list("b/parts")
    assert all(before - 2 <= t <= time.time() + 2 for t in written.values()), written  # S3 times: whole seconds
    assert storage.written("nothing") == {}


@pytest.mark.parametrize("key", ["../x", "a/../../x", "/etc/passwd", "a//b", "a\\b", "a/./b", "a\x00b"])
def test_keys_that_could_leave_the_prefix_are_refused_by_every_operation(storage: Storage, key: str) -> None:
    for write in (storage.create, storage.put):
        with pytest.raises(StorageError):
            write(key, b"x")
    for look in (storage.read, storage.exists, storage.delete):
        with pytest.raises(StorageError):
            look(key)
    assert storage.list("") == []


def test_a_prefix_is_a_folder_never_the_first_letters_of_a_sibling(storage: Storage) -> None:
    storage.create("job-1/parts/part-00000.parquet", b"x")
    storage.create("job-1/parts-old/part-00000.parquet", b"x")
    storage.create("job-10/_job.json", b"x")
    assert storage.list("job-1/parts") == ["job-1/parts/part-00000.parquet"]
    assert storage.list("job-1") == ["job-1/parts-old/part-00000.parquet", "job-1/parts/part-00000.parquet"]


def test_only_errors_that_may_clear_by_themselves_are_transient() -> None:
    import json

    import pyarrow as pa
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError, ReadTimeoutError

    from contract.storage import transient

    def s3(status: int, code: str) -> ClientError:
        return ClientError({"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject")

    assert all(map(transient, [
        s3(503, "SlowDown"), s3(500, "InternalError"), s3(429, "TooManyRequests"), s3(400, "RequestTimeout"),
        EndpointConnectionError(endpoint_url="http://s3"), ReadTimeoutError(endpoint_url="http://s3"),
        ConnectionRefusedError(111, "refused"), TimeoutError("slow"),
    ]))  # fmt: skip
    assert not any(map(transient, [
        s3(403, "AccessDenied"), s3(403, "RequestTimeTooSkewed"), s3(404, "NoSuchKey"), NoCredentialsError(),
        FileNotFoundError("gone"), pa.ArrowInvalid("not parquet"), json.JSONDecodeError("bad", "x", 0),
        StorageError("bad key"),
    ]))  # fmt: skip


def test_folders_are_the_roots_own_and_jobs_are_those_with_a_manifest(storage: Storage, tmp_path: Path) -> None:
    from contract.job import list_jobs

    assert storage.folders() == [] and list_jobs(storage) == []
    for key in ("job-b/_job.json", "job-b/parts/part-00000.parquet", "job-a/_job.json", "_uploads/u.jsonl",
                "half-written/_inputs/00000.parquet", "loose-file"):  # fmt: skip
        storage.create(key, b"x")
    assert storage.folders() == ["_uploads", "half-written", "job-a", "job-b"]  # not "some/other", not the parts
    assert list_jobs(storage) == ["job-a", "job-b"]
    storage.put_file("uploaded/big.jsonl", _file(tmp_path, b"0123456789" * 1000))  # an upload, streamed
    assert storage.read("uploaded/big.jsonl") == b"0123456789" * 1000


def _file(folder: Path, data: bytes) -> Path:
    path = folder / "upload.bin"
    path.write_bytes(data)
    return path
