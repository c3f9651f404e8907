"""Cut a sentence longer than the window budget into pieces that fit, never dropping text.

First at clause boundaries (``, ; : —`` followed by a space), then between words, and only for a
single word longer than the budget, between characters. Pieces are spans of the original
sentence, in order and together covering it; the caller flags the sentence as split.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from worker.text.segment import Sentence

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
    spans: list[tuple[int, int]] = []
    piece_start = start
    for cut, following in zip(cuts, [*cuts[1:], end]):
        if count(text[piece_start:following]) > budget:  # cut here: the next stretch would not fit
            spans += _fit(text, piece_start, cut, count, budget, patterns[1:])
            piece_start = cut
    spans += _fit(text, piece_start, end, count, budget, patterns[1:])
    return spans


def _by_characters(text: str, start: int, end: int, count: Callable[[str], int], budget: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    piece_start = start
    for i in range(start + 1, end + 1):
        if i == end or count(text[piece_start : i + 1]) > budget:
            spans.append((piece_start, i))
            piece_start = i
    return spans


def _piece(sentence: Sentence, start: int, end: int) -> Sentence:
    """The span ``[start, end)`` of the sentence, trimmed of surrounding whitespace."""
    raw = sentence.text[start:end]
    lead = len(raw) - len(raw.lstrip())
    text = raw.strip()
    begin = sentence.start + start + lead
    return Sentence(begin, begin + len(text), sentence.line, text)
