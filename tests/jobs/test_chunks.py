"""Chunks bound a task by documents and by source tokens; every document lands in exactly one chunk."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs.chunks import Chunker


def plan_chunks(tokens: list[int], *, max_documents: int, max_tokens: int) -> list[range]:
    """The ranges of document indices the chunker closes, documents given one by one as a submit streams them."""
    chunker = Chunker(max_documents=max_documents, max_tokens=max_tokens)
    sizes = [size for count in tokens if (size := chunker.add(count)) is not None]
    sizes += [last] if (last := chunker.last()) is not None else []
    starts = [sum(sizes[:n]) for n in range(len(sizes))]
    return [range(start, start + size) for start, size in zip(starts, sizes)]


@given(
    tokens=st.lists(st.integers(min_value=0, max_value=500), max_size=200),
    max_documents=st.integers(min_value=1, max_value=50),
    max_tokens=st.integers(min_value=1, max_value=2000),
)
def test_chunks_cover_every_document_once_in_order_within_both_limits(tokens, max_documents, max_tokens) -> None:
    chunks = plan_chunks(tokens, max_documents=max_documents, max_tokens=max_tokens)
    assert [i for chunk in chunks for i in chunk] == list(range(len(tokens)))
    for chunk in chunks:
        assert 1 <= len(chunk) <= max_documents
        assert len(chunk) == 1 or sum(tokens[i] for i in chunk) <= max_tokens  # only a lone document may exceed
    for before, after in zip(chunks, chunks[1:]):  # a chunk closed only because the next document did not fit
        full = len(before) == max_documents
        assert full or sum(tokens[i] for i in before) + tokens[after.start] > max_tokens


def test_a_long_document_gets_a_chunk_of_its_own() -> None:
    assert plan_chunks([10, 10, 500, 10, 10], max_documents=64, max_tokens=100) == [
        range(0, 2),
        range(2, 3),
        range(3, 5),
    ]


def test_no_documents_no_chunks_and_bad_limits_are_refused() -> None:
    assert plan_chunks([], max_documents=4, max_tokens=10) == []
    with pytest.raises(ValueError, match="must be positive"):
        plan_chunks([1], max_documents=0, max_tokens=10)
