"""What a chunk message's arguments may be (the live worker's side: tests/jobs/test_rogue_messages.py)."""

from __future__ import annotations

import pytest

from contract.messages import InvalidChunk, chunk_arguments


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (["s3://bucket/results", "job-1", 0], {}),
        (["/data/results", "job-1", 12], {}),
        (["file:///data/results/", "job-1", 0], {}),
        (["s3://Legacy_Bucket/a/b", "job-1", 3], {}),
        (["s3://bucket/results", "job-1"], {"chunk": 2}),
    ],
)
def test_the_arguments_of_a_chunk_message(args, kwargs) -> None:
    assert chunk_arguments(args, kwargs) == (*args, *kwargs.values())


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ("s3://b/p", {}), ([], []), (["s3://bucket/p", "job"], {}), (["s3://bucket/p", "job", 0, 1], {}),
        (["s3://bucket/p", "job", 0], {"extra": 1}), (["s3://bucket/p", "job", "0"], {}),
        (["s3://bucket/p", "job", True], {}), (["s3://bucket/p", "job", -1], {}), (["s3://bucket/p", "job", 0.0], {}),
        (["s3://bucket/p", "../../etc", 0], {}), (["s3://bucket/p", "x" * 129, 0], {}),
        (["s3://bucket/p", "a\n", 0], {}),
        (["s3://bucket/p", 7, 0], {}), ([None, "job", 0], {}), (["", "job", 0], {}), (["s3://", "job", 0], {}),
        (["s3://bucket/../x", "job", 0], {}), (["s3://bucket/./x", "job", 0], {}), (["/data/../etc", "job", 0], {}),
        (["http://host/x", "job", 0], {}), (["/data/\x00", "job", 0], {}), (["/" + "a" * 5000, "job", 0], {}),
    ],
)  # fmt: skip
def test_arguments_that_can_never_be_a_chunk(args, kwargs) -> None:
    with pytest.raises(InvalidChunk):
        chunk_arguments(args, kwargs)
