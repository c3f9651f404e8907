"""Cutting a job's documents into chunks: one Celery task each.

A chunk closes when one more document would take it past ``max_documents`` documents or
``max_tokens`` source tokens, so a task's time is bounded by what it translates, not by how many
documents it holds: a corpus of long reports gets small chunks, one of tweets large ones. A single
document over ``max_tokens`` is a chunk of its own (documents are never cut across tasks).
"""

from __future__ import annotations


class Chunker:
    """Documents' source tokens in, chunk sizes out as chunks close: a corpus is cut as it streams."""

    def __init__(self, *, max_documents: int, max_tokens: int):
        if max_documents < 1 or max_tokens < 1:
            raise ValueError(f"chunk limits must be positive, got {max_documents} documents and {max_tokens} tokens")
        self.max_documents, self.max_tokens = max_documents, max_tokens
        self._documents = self._tokens = 0

    def add(self, tokens: int) -> int | None:
        """The size of the chunk that a document of ``tokens`` closes (it starts the next one), or None."""
        closed = None
        if self._documents and (self._documents >= self.max_documents or self._tokens + tokens > self.max_tokens):
            closed, self._documents, self._tokens = self._documents, 0, 0
        self._documents += 1
        self._tokens += tokens
        return closed

    def last(self) -> int | None:
        """The size of the chunk still open once every document is in (None if there were none)."""
        closed, self._documents, self._tokens = self._documents or None, 0, 0
        return closed
