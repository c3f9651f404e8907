"""Text -> sentences with character offsets, keeping the line and paragraph layout.

Lines (``\\n``) are layout: a translation keeps them, so segmentation runs per line and a sentence
never crosses a line. Within a line, pysbd finds the sentences (best of three on our labelled set:
``python -m benchmarks.segmenters``), and two corrections fix what it gets wrong there:

* a boundary inside a URL, an e-mail address or a path (``search?q=1``, ``./start.sh``) is no
  boundary, nor is one before a comma or closing bracket, or right after a rank, title or place
  abbreviation before a name or number (``Lt. Col. Jones``, ``Ft. Bragg``, ``approx. 3 kg``);
* a period glued to the next sentence (``free.Payment``), and ``!!!``/``?!`` before a capital, are.

Time is linear in the line: a line longer than ``MAX_SEGMENTER_LINE`` is first cut at *safe*
sentence ends (sentence punctuation, a space, a capital, and no abbreviation or URL around it),
and pysbd refines each piece. Only a stretch with no sentence end at all for ``MAX_RUN`` characters
is cut at a space, and the sentences on either side of such a cut say so (``Sentence.cut``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

MAX_SEGMENTER_LINE = 5_000  # characters handed to pysbd at once
MAX_RUN = 20_000  # characters without a sentence end before a line is cut at a space
# Abbreviations that stand before a name (ranks, titles, places): never the end of a sentence.
BEFORE_NAMES = frozenset(
    "mr mrs ms messrs dr prof gen lt col maj capt sgt cpl pvt adm brig cmdr insp det supt gov sen rep pres "
    "rev hon ft mt st".split()
)
# Abbreviations that stand before a number (``No. 5``, ``approx. 3 kg``, ``Jan. 2024``).
BEFORE_NUMBERS = frozenset(
    "no nos fig figs sec vol ch p pp approx ext ver art ref tel "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
_PROTECTED = re.compile(
    r"(?:https?://|ftp://|www\.)[^\s<>\"]*[^\s<>\".,;:!?)\]'}]"  # URLs, trailing punctuation left out
    # e-mail addresses; the local part is at most 64 characters (RFC 5321), so a long run of address characters
    # without an @ is not rescanned to its end from every start (quadratic)
    r"|[\w.+-]{1,64}@[\w-]+(?:\.[\w-]+)+"
    r"|(?<![\w/])\.{0,2}/[\w.-]+(?:/[\w.-]+)*[\w/]|[A-Za-z]:\\[\w\\.-]*\w"  # paths: ./start.sh, /etc/hosts, C:\a.txt
)
_NO_START = re.compile(r"[,;:)\]}/\\]")  # no sentence starts with these: a boundary before one is false
_LAST_WORD = re.compile(r"(\w+)\.$")
_GLUED = re.compile(r"(?<=[a-z]{2}\.)(?=[A-Z][a-z])|(?<=[!?]{2})\s+(?=[A-Z])")  # "free.Payment", "Wow!!! That"
# A run of sentence punctuation is tried from its first mark only: tried from every mark it would be rescanned
# to its end each time (quadratic on ``....``), and a match inside it could only end where the whole run's does.
_SAFE_END = re.compile(r"(?<![.!?])[.!?]+[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z])|[。！？]+[”’」』）)]*")
_FIRST_CHAR = re.compile(r"[\"'“‘(\[]*(\S)")
_WORD_CHARACTER = re.compile(r"[^\W_]")  # a letter or digit: what str.isalnum() finds, as a pattern


@dataclass(frozen=True)
class Sentence:
    """A sentence as a span of the document: ``text == document[start:end]``; ``line`` counts from 0.

    ``cut``: a line with no sentence end for ``MAX_RUN`` characters was cut at a space here."""

    start: int
    end: int
    line: int
    text: str
    cut: bool = False


@functools.cache
def _segmenter() -> Any:
    import pysbd

    return pysbd.Segmenter(language="en", clean=False)


def segment(document: str) -> list[Sentence]:
    """Every non-blank stretch of ``document`` in exactly one sentence, in order, none across a line."""
    sentences: list[Sentence] = []
    offset = 0
    for number, line in enumerate(document.split("\n")):
        for start, end, cut in line_spans(line):
            sentences.append(Sentence(offset + start, offset + end, number, line[start:end], cut))
        offset += len(line) + 1
    return sentences


def line_spans(line: str) -> list[tuple[int, int, bool]]:
    """Sentence spans of one line, stripped, with whether a forced cut touches each."""
    protected = [m.span() for m in _PROTECTED.finditer(line)] if re.search(r"[@/\\]|www", line) else []
    spans: list[tuple[int, int, bool]] = []
    for start, end, cut_before, cut_after in _pieces(line, protected):
        found = _correct(_pysbd_spans(line, start, end), line, protected)
        last = len(found) - 1
        spans += [(a, b, (cut_before and k == 0) or (cut_after and k == last)) for k, (a, b) in enumerate(found)]
    return _join_wordless(line, spans)


def _join_wordless(line: str, spans: list[tuple[int, int, bool]]) -> list[tuple[int, int, bool]]:
    """Neighbouring sentences without a letter or digit as one: such a sentence is copied, not translated,
    and a line of 50,000 one-mark sentences (``.….…``) cost 50,000 token counts, each with its end token,
    and windows of them; joined, it is cut to the budget as one long sentence is."""
    joined: list[tuple[int, int, bool]] = []
    after_wordless = False  # whether joined[-1] is wordless (searched once per sentence, not per join)
    for a, b, cut in spans:
        wordless = _WORD_CHARACTER.search(line, a, b) is None
        if wordless and after_wordless:
            joined[-1] = (joined[-1][0], b, joined[-1][2] or cut)
        else:
            joined.append((a, b, cut))
        after_wordless = wordless
    return joined


def _pysbd_sentences(piece: str) -> list[str]:
    """pysbd's sentences of ``piece``, as ``Segmenter.segment`` finds them but without its span search:
    that looks each sentence up from the piece's start (quadratic in a piece of many equal sentences,
    ``.….…``), and the caller finds them itself, in one pass."""
    segmenter = _segmenter()
    return list(segmenter.processor(piece).process())


def _pysbd_spans(line: str, start: int, end: int) -> list[tuple[int, int]]:
    """pysbd's sentences of ``line[start:end]`` as spans; text it skips or alters is kept, never lost."""
    piece = line[start:end]
    spans: list[tuple[int, int]] = []
    cursor = 0
    for sentence in _pysbd_sentences(piece) if piece.strip() else []:
        stripped = sentence.strip()
        found = piece.find(stripped, cursor) if stripped else -1
        if found < 0:
            continue
        begin = _first_non_space(piece, cursor)  # text the segmenter skipped joins this sentence
        cursor = found + len(stripped)
        spans.append((start + begin, start + cursor))
    rest = _first_non_space(piece, cursor)
    if rest < len(piece) and piece[rest:].strip():  # text the segmenter dropped becomes the last sentence
        spans.append((start + rest, start + len(piece.rstrip())))
    return spans


def _correct(spans: list[tuple[int, int]], line: str, protected: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for span in spans:
        if merged and _false_boundary(line, merged[-1], span, protected):
            merged[-1] = (merged[-1][0], span[1])
        else:
            merged.append(span)
    return [piece for span in merged for piece in _split_glued(line, span, protected)]


def _false_boundary(
    line: str, before: tuple[int, int], after: tuple[int, int], protected: list[tuple[int, int]]
) -> bool:
    boundary = before[1]
    if any(a < boundary < b for a, b in protected) or _NO_START.match(line, after[0]):
        return True
    word = _LAST_WORD.search(line[before[0] : before[1]])
    first = _FIRST_CHAR.match(line, after[0])
    if word is None or first is None:
        return False
    abbreviation, nxt = word.group(1).lower(), first.group(1)
    return (abbreviation in BEFORE_NAMES and (nxt.isupper() or nxt.isdigit())) or (
        abbreviation in BEFORE_NUMBERS and nxt.isdigit()
    )


def _split_glued(line: str, span: tuple[int, int], protected: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    start = span[0]
    for match in _GLUED.finditer(line, span[0], span[1]):
        if not any(a < match.start() < b for a, b in protected):
            yield start, match.start()
            start = match.end()
    yield start, span[1]


def _pieces(line: str, protected: list[tuple[int, int]]) -> list[tuple[int, int, bool, bool]]:
    """``line`` cut at safe sentence ends into pieces of at most ``MAX_SEGMENTER_LINE`` characters where it
    can be: ``(start, end, cut before, cut after)``, a cut being forced (at a space) only after
    ``MAX_RUN`` characters without a safe end."""
    if len(line) <= MAX_SEGMENTER_LINE:
        return [(0, len(line), False, False)]
    ends = list(_safe_ends(line, protected))
    pieces: list[tuple[int, int, bool, bool]] = []
    start, i, forced = 0, 0, False
    while start < len(line):
        while i < len(ends) and ends[i] <= start:
            i += 1
        j = i
        while j < len(ends) and ends[j] - start <= MAX_SEGMENTER_LINE:
            j += 1
        if j > i:  # the last safe end within reach
            end, cut = ends[j - 1], False
        elif i < len(ends) and ends[i] - start <= MAX_RUN:  # one long sentence: take it whole
            end, cut = ends[i], False
        elif len(line) - start <= MAX_RUN:
            end, cut = len(line), False
        else:  # no sentence end for MAX_RUN characters: cut at a space
            space = line.rfind(" ", start + 1, start + MAX_SEGMENTER_LINE)
            end, cut = (space if space > start else start + MAX_SEGMENTER_LINE), True
        pieces.append((start, end, forced, cut))
        start, forced = end, cut
    return pieces


def _safe_ends(line: str, protected: list[tuple[int, int]]) -> Iterator[int]:
    for match in _SAFE_END.finditer(line):
        end = match.end()
        word = _LAST_WORD.search(line, max(0, match.start() - 30), match.start() + 1)
        if word is not None and (len(word.group(1)) == 1 or word.group(1).lower() in BEFORE_NAMES | BEFORE_NUMBERS):
            continue  # an initial or an abbreviation: not safe
        if any(a < match.start() < b for a, b in protected):
            continue
        yield end


def _first_non_space(text: str, start: int) -> int:
    match = re.compile(r"\S").search(text, start)
    return match.start() if match else len(text)
