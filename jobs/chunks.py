"""Cutting a job's documents into chunks: one Celery task each.

A chunk closes when one more document would take it past ``max_documents`` documents or
``max_tokens`` source tokens, so a task's time is bounded by what it translates, not by how many
documents it holds: a corpus of long reports gets small chunks, one of tweets large ones. A single
document over ``max_tokens`` is a chunk of its own (documents are never cut across tasks).
"""

from __future__ import annotations

from collections.abc import Sequence


def plan_chunks(tokens: Sequence[int], *, max_documents: int, max_tokens: int) -> list[range]:
    """Consecutive ranges of document indices covering ``tokens`` (each document's source tokens) once, in order."""
    if max_documents < 1 or max_tokens < 1:
        raise ValueError(f"chunk limits must be positive, got {max_documents} documents and {max_tokens} tokens")
    chunks: list[range] = []
    start, total = 0, 0
    for index, count in enumerate(tokens):
        if index > start and (index - start >= max_documents or total + count > max_tokens):
            chunks.append(range(start, index))
            start, total = index, 0
        total += count
    if start < len(tokens):
        chunks.append(range(start, len(tokens)))
    return chunks
