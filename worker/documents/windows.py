"""Pack a document's sentences into overlapping windows under a source-token budget.

A window translates the sentences ``[first, last)`` it is *responsible* for and shows the model up
to ``overlap`` preceding sentences as context (none that follow). Every sentence is
responsible in exactly one window, windows follow the document order, and a window's responsible
and context tokens together stay within ``budget`` whenever each sentence alone does (longer
sentences are split before planning; a sentence that still exceeds the budget gets a window of its
own and no context). A paragraph (``breaks``) is planned on its own: no window, and no context,
reaches across its start, so a paragraph that recurs (a footer, a disclaimer, a syndicated story)
gives the same windows wherever it stands, which the translation memory reuses.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise


@dataclass(frozen=True)
class Window:
    doc_id: str
    first: int  # first sentence this window is responsible for
    last: int  # one past the last responsible sentence
    context_before: int  # sentences before ``first`` shown as context

    @property
    def start(self) -> int:
        """First sentence the model sees."""
        return self.first - self.context_before

    @property
    def end(self) -> int:
        """One past the last sentence the model sees: ``last`` (no context follows the responsible ones)."""
        return self.last


def plan_windows(
    doc_id: str,
    tokens: Sequence[int],
    *,
    budget: int,
    overlap: int = 0,
    breaks: Collection[int] = (),
) -> list[Window]:
    """Windows over sentences with ``tokens[i]`` source tokens each; ``breaks``: the sentences that start
    a paragraph."""
    if budget < 1 or overlap < 0:
        raise ValueError(f"need budget >= 1 and overlap >= 0; got {budget}, {overlap}")
    bounds = sorted({0, len(tokens), *(b for b in breaks if 0 < b < len(tokens))})
    return [
        replace(w, first=w.first + a, last=w.last + a)
        for a, b in pairwise(bounds)
        for w in _paragraph_windows(doc_id, tokens[a:b], budget, overlap)
    ]


def _paragraph_windows(doc_id: str, tokens: Sequence[int], budget: int, overlap: int) -> list[Window]:
    windows: list[Window] = []
    first = 0
    while first < len(tokens):
        before = _context_before(tokens, first, overlap, budget)
        used = sum(tokens[first - before : first])
        last = first + 1
        used += tokens[first]
        while last < len(tokens) and used + tokens[last] <= budget:
            used += tokens[last]
            last += 1
        windows.append(Window(doc_id, first, last, before))
        first = last
    return windows


def _context_before(tokens: Sequence[int], first: int, overlap: int, budget: int) -> int:
    """As many of the ``overlap`` preceding sentences as leave room for sentence ``first``."""
    room = budget - tokens[first]
    count = 0
    while count < min(overlap, first) and tokens[first - count - 1] <= room:
        room -= tokens[first - count - 1]
        count += 1
    return count
