"""Cut a sentence longer than the window budget into pieces that fit, never dropping text.

First at clause boundaries (``, ; : —`` followed by a space), then between words, and only for a
single word longer than the budget, between characters. Pieces are spans of the original
sentence, in order and together covering it; the caller flags the sentence as split.

Each piece is as long as fits: the first cut (clause end, word end or character) whose stretch would
pass the budget is found by galloping and then halving, not by counting the stretch at every cut.
Counting is linear in what it counts, so trying every cut cost the piece's length per cut: about a
piece's length times the sentence's, which on 100,000 characters without a space was the bulk of
the planning time. Token counts grow with the text at word and clause ends (sentencepiece pieces
never span a space), so the cuts found are those the cut-by-cut scan found.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from worker.documents.segment import Sentence

_CLAUSE_END = re.compile(r"[,;:，；：—](?=\s)|[，；：]")
_WORD_END = re.compile(r"\S(?=\s)")


def split_long(sentence: Sentence, count: Callable[[str], int], budget: int) -> list[Sentence]:
    """``sentence`` if it fits in ``budget`` tokens (as ``count`` measures text), else pieces that do."""
    if count(sentence.text) <= budget:
        return [sentence]
    spans = _fit(sentence.text, 0, len(sentence.text), count, budget, (_CLAUSE_END, _WORD_END))
    return [_piece(sentence, start, end) for start, end in spans]


def _fit(
    text: str, start: int, end: int, count: Callable[[str], int], budget: int, patterns: tuple[re.Pattern[str], ...]
) -> list[tuple[int, int]]:
    """Spans of ``text[start:end]`` within budget, cutting after matches of the first pattern that helps."""
    if count(text[start:end]) <= budget:
        return [(start, end)]
    if not patterns:
        return _by_characters(text, start, end, count, budget)
    cuts = [m.end() for m in patterns[0].finditer(text, start, end) if start < m.end() < end]
    if not cuts:
        return _fit(text, start, end, count, budget, patterns[1:])
    ends = [*cuts, end]  # where a stretch may end; the last one is the sentence's end
    spans: list[tuple[int, int]] = []
    piece_start, first = start, 0  # ``first``: the first of ``ends`` after ``piece_start``
    while True:
        overflow = _first_over(_stretch_over(text, piece_start, ends, count, budget), first + 1, len(ends))
        if overflow == len(ends):  # the rest is the last stretch (cut finer below if it alone is too long)
            break
        spans += _fit(text, piece_start, ends[overflow - 1], count, budget, patterns[1:])
        piece_start, first = ends[overflow - 1], overflow
    spans += _fit(text, piece_start, end, count, budget, patterns[1:])
    return spans


def _stretch_over(
    text: str, start: int, ends: list[int], count: Callable[[str], int], budget: int
) -> Callable[[int], bool]:
    """Whether the stretch from ``start`` to ``ends[k]`` passes the budget, for each ``k``."""
    return lambda k: count(text[start : ends[k]]) > budget


def _by_characters(text: str, start: int, end: int, count: Callable[[str], int], budget: int) -> list[tuple[int, int]]:
    """Pieces of at least one character each, each ending before the first character that takes it past budget."""
    spans: list[tuple[int, int]] = []
    piece_start = start
    while piece_start < end:
        cut = _first_over(_characters_over(text, piece_start, count, budget), piece_start + 1, end)
        spans.append((piece_start, cut))
        piece_start = cut
    return spans


def _characters_over(text: str, start: int, count: Callable[[str], int], budget: int) -> Callable[[int], bool]:
    """Whether the piece from ``start`` through character ``i`` passes the budget, for each ``i``."""
    return lambda i: count(text[start : i + 1]) > budget


def _first_over(over: Callable[[int], bool], low: int, high: int) -> int:
    """The first ``i`` in ``[low, high)`` with ``over(i)``, or ``high``; ``over`` false then true along the range.

    Gallops from ``low`` (1, 2, 4, ... past it) and halves the last step: about two log2 of the
    answer's distance calls, not one per position."""
    step, below = 1, low - 1  # below: the last position known not over (low - 1 stands for "none yet")
    while below + step < high and not over(below + step):
        below += step
        step *= 2
    above = min(below + step, high)  # over, or the end of the range
    while above - below > 1:
        middle = (below + above) // 2
        if over(middle):
            above = middle
        else:
            below = middle
    return above


def _piece(sentence: Sentence, start: int, end: int) -> Sentence:
    """The span ``[start, end)`` of the sentence, trimmed of surrounding whitespace."""
    raw = sentence.text[start:end]
    lead = len(raw) - len(raw.lstrip())
    text = raw.strip()
    begin = sentence.start + start + lead
    return Sentence(begin, begin + len(text), sentence.line, text)
