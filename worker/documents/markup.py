"""Documents as units of translatable text with their markup set aside: plain text, Markdown, HTML.

A ``Unit`` is a stretch of the document translated as a whole (a line of plain text; a heading,
paragraph line, list item line or table cell of Markdown, or a whole paragraph whose markup runs
over its lines; the text of a block element of HTML). The model sees only its ``plain`` text: inline
markup (emphasis, links, code spans, inline tags) is lifted out into ``Mark``s over plain offsets,
and entities are decoded. Everything outside the units (block markup, code blocks, tables' pipes,
tags, comments) is copied to the translation as it stands, and each mark is put back around the
words it enclosed (``place``); code and addresses go back as the source wrote them, never translated.
What a translation must keep is checked afterwards by ``worker.documents.structure``.

Here: the entry by format (``units``), plain text, and putting marks back (``place``). ``Mark`` and
``Unit`` are in ``worker.documents.marks``; Markdown is read in ``worker.documents.markdown``, HTML in
``worker.documents.html``.

Parsers: markdown-it-py (CommonMark, with GFM tables and strikethrough) for Markdown; Python's own
``html.parser`` for HTML: of the parsers measured (``python -m benchmarks.markup``) it is the one that
reports where each tag and entity sits in the source, so the skeleton is copied, never re-serialised.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from contract.options import FORMATS  # the formats a job may name; each is read below
from worker.documents.html import html_units
from worker.documents.markdown import markdown_units
from worker.documents.marks import BARE_ADDRESS, Mark, Unit


def units(document: str, fmt: str = "text") -> list[Unit]:
    if fmt == "text":
        return text_units(document)
    if fmt == "markdown":
        return markdown_units(document)
    if fmt == "html":
        return html_units(document)
    raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")


def text_units(document: str) -> list[Unit]:
    """Each non-blank line, stripped: lines are layout, markup is text."""
    found, offset = [], 0
    for line in document.split("\n"):
        stripped = line.strip()
        if stripped:
            start = offset + len(line) - len(line.lstrip())
            found.append(Unit(start, start + len(stripped), stripped, list(range(start, start + len(stripped) + 1))))
        offset += len(line) + 1
    return found


# ------------------------------------------------------------------------------------------------
# Putting marks back


@dataclass
class Placed:
    """A sentence's translation with its marks put back, and whether any had to move."""

    text: str
    moved: bool


Event = tuple[int, int, int, str, int]  # (position in the translation, kind, rank, text written, code)
_END_PUNCTUATION = re.compile(r"[\s.!?。！？…；;:：,，]*$")


def place(
    source: str,
    translation: str,
    marks: list[Mark],
    inner: dict[str, str],
    fmt: str = "text",
    last: bool = True,
    escaped: str = "",
) -> Placed:
    """Put each mark of ``source`` (a sentence's plain text) back into its ``translation``, written as
    ``fmt`` writes text (HTML escaped; in Markdown the characters the source ``escaped``).

    A mark around the whole sentence (or all but its final punctuation) goes around the whole
    translation; one around some words goes around the same words in the translation when they are
    found there: copied as they are (names, numbers), or as ``inner`` says they translate on their own.
    Code and addresses (``verbatim``) are never the model's: where the translation copied their words,
    the source's element replaces them byte for byte, and otherwise it goes in whole at its relative
    place. When a mark is not found, or the marks found cross or leave the nesting they had, every mark
    goes to its relative place in the translation, so the markup stays valid and in the source's nesting
    (``moved``; Bergamot does the same with its alignments). An atom keeps its relative place, never
    inside a word or inside code.

    Markdown emphasis follows CommonMark's flanking rules, which Chinese text trips: a closing ``**``
    after "。" and before more text is no closer, so it is put before the stop unless the sentence ends
    its unit (``last``); and inside a word only ``*`` delimits, so ``_`` becomes ``*`` there.

    Positions are found in the translation as the model wrote it and the text between marks is escaped
    as it is written out, so no mark lands inside an escape (``&am<br>p;``)."""
    # Marks opening at one place open in source order (an outer one's markup comes first; an atom
    # before code stays before it) and close in the reverse order.
    ordered = sorted(marks, key=lambda m: (m.start, m.at, -m.end))
    spans = _found_spans(ordered, source, translation, inner)
    moved = any(0 < m.start < len(source) if m.start == m.end else s is None for m, s in zip(ordered, spans))
    in_source_order = not _nested_as_in_source(ordered, spans)
    if in_source_order:
        translation, spans, moved = _without_copies(translation, ordered, spans), [None] * len(ordered), True
    events: list[Event] = []  # (position, 0 close / 1 open / 2 empty close, rank, text, code)
    breaks = _line_breaks(ordered, source, translation)
    for order, (mark, span) in enumerate(zip(ordered, spans)):
        if mark.start == mark.end or (span is None and mark.verbatim):  # put back whole at its relative place
            at = breaks.get(order, _relative(mark.start, source, translation))
            code = 2 if mark.verbatim else 0  # 2: put in, not replacing
            text = _spaced(translation[:at][-1:], _whole(mark, source, fmt), translation[at:][:1])
            events.append((at, 1, order, text, code))
            continue
        if span is None:  # at its relative place (never widened: siblings apart in the source stay apart)
            span = (_relative(mark.start, source, translation), _relative(mark.end, source, translation))
        if mark.verbatim:  # the source's element instead of the words the model copied
            text = _spaced(translation[: span[0]][-1:], _whole(mark, source, fmt), translation[span[1] :][:1])
            events += [(span[0], 1, order, text, 1), (span[1], 0, -order, "", -1)]
            continue
        opening, closing = mark.open, mark.close
        if fmt == "markdown" and _delimiter(closing):
            if span != (0, len(translation)):
                opening, closing = _asterisks(opening), _asterisks(closing)
            if not (last and span[1] == len(translation)):
                span = (span[0], max(span[0] + 1, _before_stops(translation, span[1])))
            span = (_after_stops(translation, *span), span[1])
        events.append((span[0], 1, order, opening, 0))
        events.append((span[1], 0 if span[1] > span[0] else 2, -order, closing, 0))  # empty: open, then close
    atoms = {order for order, mark in enumerate(ordered) if mark.start == mark.end}
    key = _source_order(ordered) if in_source_order else None
    return Placed(_written(translation, _outside_code(events, key), fmt, escaped, atoms), moved)


def _line_breaks(marks: list[Mark], source: str, translation: str) -> dict[int, int]:
    """Where the line breaks of a paragraph translated whole go: at their relative places, but inside the
    translation and never two at one place, which would end the paragraph (a blank line)."""
    placed: dict[int, int] = {}
    previous = 0
    for order, mark in enumerate(marks):
        if mark.start == mark.end and "\n" in mark.open and not mark.open.strip(" \t\n>\\"):
            at = min(max(_relative(mark.start, source, translation), 1, previous + 1), max(len(translation) - 1, 1))
            placed[order] = previous = at
    return placed


def _found_spans(
    marks: list[Mark], source: str, translation: str, inner: dict[str, str]
) -> list[tuple[int, int] | None]:
    """Where each mark around words is in the translation, None where it is not found (atoms: None)."""
    source_body = len(source) - len(_END_PUNCTUATION.search(source).group())  # type: ignore[union-attr]
    body_end = len(translation) - len(_END_PUNCTUATION.search(translation).group())  # type: ignore[union-attr]
    spans: list[tuple[int, int] | None] = []
    for mark in marks:
        found = _span(mark, source, source_body, translation, body_end, inner) if mark.start < mark.end else None
        code = [s for m, s in zip(marks, spans) if m.verbatim and s]
        if found and mark.verbatim and any(s[0] < found[1] and found[0] < s[1] for s in code):
            found = None  # two pieces of code found at one place: the second goes in whole
        spans.append(found)
    return spans


def _nested_as_in_source(marks: list[Mark], spans: list[tuple[int, int] | None]) -> bool:
    """Whether every mark around words was found, and the found spans nest as the marks do in the source:
    one inside another stays inside it, two apart stay apart (in either order: words move)."""
    around = [(m, s) for m, s in zip(marks, spans) if m.start < m.end]
    if any(s is None and not m.verbatim for m, s in around):
        return False
    found = [(m, s) for m, s in around if s is not None]
    for k, (a, sa) in enumerate(found):
        for b, sb in found[k + 1 :]:
            if a.start <= b.start and b.end <= a.end and not a.verbatim:
                if not (sa[0] <= sb[0] and sb[1] <= sa[1]):
                    return False
            elif not (sa[1] <= sb[0] or sb[1] <= sa[0]):
                return False
    return True


def _without_copies(translation: str, marks: list[Mark], spans: list[tuple[int, int] | None]) -> str:
    """The translation without the words it copied of code that goes back whole at its relative place."""
    cut = sorted(s for m, s in zip(marks, spans) if m.verbatim and s is not None)
    kept, cursor = [], 0
    for start, end in cut:
        kept.append(translation[cursor:start])
        cursor = max(cursor, end)
    return "".join(kept) + translation[cursor:]


def _whole(mark: Mark, source: str, fmt: str) -> str:
    """An atom, or code as the source wrote it (``whole``; else its markup around its words, escaped)."""
    if mark.whole is not None:
        return mark.whole
    if mark.start == mark.end:
        return mark.open + mark.close
    return mark.open + escape(fmt, source[mark.start : mark.end]) + mark.close


def _source_order(marks: list[Mark]) -> Callable[[Event], tuple[int, int, int]]:
    """Events at one place in the order their markup has in the source: when every mark went to its
    relative place, several may meet at one (two links around no words there, one inside the other)."""

    def key(event: Event) -> tuple[int, int, int]:
        position, kind, rank, _, _ = event
        mark = marks[rank if kind == 1 else -rank]
        return (position, 2 * mark.start + 1, rank) if kind == 1 else (position, 2 * mark.end, rank)

    return key


def _outside_code(events: list[Event], key: Callable[[Event], tuple[int, int, int]] | None) -> list[Event]:
    """Events that fall inside the words code replaces move to the code's end: nothing lands in code;
    sorted by place (``key``: and then as the source had them)."""
    replaced: list[tuple[int, int]] = []
    opened: dict[int, int] = {}
    for position, _, rank, _, code in events:
        if code == 1:
            opened[rank] = position
        elif code == -1:
            replaced.append((opened[-rank], position))
    moved = []
    for event in events:
        position = event[0]
        for start, end in replaced:
            if start < position < end and not event[4]:
                position = end
        moved.append((position, *event[1:]))
    return sorted(moved, key=key)


def _written(translation: str, events: list[Event], fmt: str, escaped: str, atoms: set[int]) -> str:
    """The translation with the events' markup in, the text between escaped; the words that code
    replaces (between its code 1 and -1 events) left out. ``atoms``: the ranks of the atoms' events."""
    pieces: list[tuple[str, int]] = []  # (text, -1 translation, 3 an atom, else the event's kind)
    cursor, in_code = 0, 0
    for position, kind, rank, text, code in _unmerged(events) if fmt == "markdown" else events:
        if not in_code:
            pieces.append((escape(fmt, translation[cursor:position], escaped), -1))
        if code > 0 and _last_char(pieces) == "`" and text.startswith("`"):
            text = " " + text  # two code spans, not one
        pieces.append((text, 3 if kind == 1 and rank in atoms else kind))
        cursor, in_code = position, in_code + (code if code != 2 else 0)
    pieces.append((escape(fmt, translation[cursor:], escaped), -1))
    return "".join(_flanking(pieces) if fmt == "markdown" else (text for text, _ in pieces))


def _last_char(pieces: list[tuple[str, int]]) -> str:
    return next((text[-1] for text, _ in reversed(pieces) if text), "")


def _flanking(pieces: list[tuple[str, int]]) -> list[str]:
    """Emphasis delimiters with a space where CommonMark would not read them as such: an opening one
    after a letter and before punctuation (``丝**[x](u)**``), a closing one after punctuation and
    before a letter (``**[x](u)**丝``). Chinese has no spaces that would make them flank."""
    out: list[str] = []
    for k, (text, kind) in enumerate(pieces):
        if kind in (0, 1, 2) and _delimiter(text):
            before = next((t[-1] for t in reversed(out) if t), " ")
            after = next((t[0] for t, _ in pieces[k + 1 :] if t), " ")
            if kind == 1 and before.isalnum() and _punctuation(after):
                text = " " + text
            elif kind != 1 and _punctuation(before) and after.isalnum():
                text = text + " "
        out.append(text)
    return out


def _punctuation(char: str) -> bool:
    return unicodedata.category(char)[0] in "PS"


def _spaced(before: str, code: str, after: str) -> str:
    """Code as written; an address with a space where it would otherwise be glued to the letters around
    it in the translation (no autolinker takes ``见https://x``)."""
    if not BARE_ADDRESS.fullmatch(code):
        return code
    return " " * before.isalnum() + code + " " * after.isalnum()


def _unmerged(events: list[Event]) -> list[Event]:
    """Two emphases opening at one place (both moved around the whole translation) would read ``**``,
    a strong one: the inner one is written with the other character (``*_x_*``)."""
    swap = {"*": "_", "_": "*"}
    renamed: set[int] = set()  # ranks of the marks written with the other character
    previous: tuple[int, str] | None = None  # the opening just before: position, text as written
    for position, kind, rank, text, _ in events:
        if kind == 1 and text in swap and previous == (position, text):
            renamed.add(rank)
            text = swap[text]
        previous = (position, text) if kind == 1 else None
    return [
        (position, kind, rank, swap[text] if (rank if kind else -rank) in renamed else text, code)
        for position, kind, rank, text, code in events
    ]


def _span(
    mark: Mark, source: str, source_body: int, translation: str, body_end: int, inner: dict[str, str]
) -> tuple[int, int] | None:
    if mark.start == 0 and mark.end >= len(source) and not mark.verbatim:
        return 0, len(translation)
    if mark.start == 0 and mark.end >= source_body and not mark.verbatim:
        return 0, body_end
    words = source[mark.start : mark.end]
    for candidate in (words,) if mark.verbatim else (words, inner.get(words, "")):
        found = [m.start() for m in re.finditer(re.escape(candidate), translation)] if candidate else []
        if len(found) > 1:  # words the translation has more than once: the ones nearest where they stood
            expected = _proportional(mark.start, source, translation)
            found = [min(found, key=lambda at: abs(at - expected))]
        if len(found) == 1:
            at = found[0]
            end = at + len(candidate)
            if end < len(translation) and not mark.verbatim:  # "**3个苹果。**汤姆" would not read as emphasis
                end -= len(_END_PUNCTUATION.search(candidate).group())  # type: ignore[union-attr]
            return (at, end) if end > at else None
    return None


def _delimiter(text: str) -> bool:
    return bool(text) and set(text) <= {"*", "_", "~"}


def _asterisks(delimiter: str) -> str:
    return delimiter.replace("_", "*") if set(delimiter) == {"_"} else delimiter


def _after_stops(text: str, start: int, end: int) -> int:
    """``start`` moved forward over the punctuation just after it, short of ``end``: an opening ``**`` before
    "。" and after a letter opens nothing (CommonMark's flanking rules)."""
    while start < end - 1 and unicodedata.category(text[start]).startswith("P"):
        start += 1
    return start


def _before_stops(text: str, end: int) -> int:
    """``end`` moved back over the punctuation just before it."""
    while end > 0 and unicodedata.category(text[end - 1]).startswith("P"):
        end -= 1
    return end


def _proportional(offset: int, source: str, translation: str) -> int:
    """Where ``source[offset]`` falls in the translation by its relative place."""
    if offset <= 0:
        return 0
    if offset >= len(source):
        return len(translation)
    return round(offset / len(source) * len(translation))


def _relative(offset: int, source: str, translation: str) -> int:
    """``_proportional``, moved forward out of a word of Latin letters or digits (an atom or a mark's
    end never splits one)."""
    at = _proportional(offset, source, translation)
    while 0 < at < len(translation) and _LATIN_WORD(translation[at - 1]) and _LATIN_WORD(translation[at]):
        at += 1
    return at


_LATIN_WORD = lambda char: char.isascii() and (char.isalnum() or char == "_")


def needs_inner(source: str, marks: list[Mark]) -> list[str]:
    """Words inside marks that ``place`` would look for in their own translation."""
    body = len(source) - len(_END_PUNCTUATION.search(source).group())  # type: ignore[union-attr]
    return [
        source[m.start : m.end]
        for m in marks
        if m.start < m.end
        and not m.verbatim
        and not (m.start == 0 and m.end >= body)
        and source[m.start : m.end].strip()
    ]


def escape(fmt: str, text: str, escaped: str = "") -> str:
    """A translation as the format writes text: HTML escapes ``&``, ``<``, ``>``; Markdown puts a backslash
    before each of the ``escaped`` characters (those its source wrote as ``\\*`` or ``&lt;``: written
    bare, they could be markup)."""
    if fmt == "html":
        return html.escape(text, quote=False)
    if fmt == "markdown" and escaped:
        return re.sub(f"[{re.escape(escaped)}]", lambda m: "\\" + m.group(), text)
    return text
