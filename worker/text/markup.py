"""Documents as units of translatable text with their markup set aside: plain text, Markdown, HTML.

A ``Unit`` is a stretch of the document translated as a whole (a line of plain text; a heading,
paragraph line, list item line or table cell of Markdown; the text of a block element of HTML).
The model sees only its ``plain`` text: inline markup (emphasis, links, code spans, inline tags)
is lifted out into ``Mark``s over plain offsets, and entities are decoded. Everything outside the
units (block markup, code blocks, tables' pipes, tags, comments) is copied to the translation as it
stands, and each mark is put back around the words it enclosed (``place``).

Parsers: markdown-it-py (CommonMark, with GFM tables and strikethrough) for Markdown; Python's own
``html.parser`` for HTML: of the parsers measured (``python -m benchmarks.markup``) it is the one that
reports where each tag and entity sits in the source, so the skeleton is copied, never re-serialised.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

FORMATS = ("text", "markdown", "html")


@dataclass(frozen=True)
class Mark:
    """Markup around ``plain[start:end]`` of its unit: ``open`` before, ``close`` after. ``verbatim``:
    the enclosed text is code or an address and stays as it is. An atom (an image, ``<br>``) has
    ``start == end`` and no close."""

    start: int
    end: int
    open: str
    close: str = ""
    verbatim: bool = False
    at: int = 0  # where the opening markup sits in the source: orders marks around the same words


@dataclass
class Unit:
    """``document[start:end]`` translated as one: ``plain`` is what the model reads, ``offsets[i]`` the
    document offset of ``plain[i]`` (one more entry for the end)."""

    start: int
    end: int
    plain: str
    offsets: list[int]
    marks: list[Mark] = field(default_factory=list)

    def source(self, plain_offset: int) -> int:
        return self.offsets[plain_offset]


def units(document: str, fmt: str = "text") -> list[Unit]:
    if fmt == "text":
        return text_units(document)
    if fmt == "markdown":
        return markdown_units(document)
    if fmt == "html":
        return HtmlUnits(document).run()
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
# Markdown


@functools.cache
def _markdown() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def markdown_units(document: str) -> list[Unit]:
    """Each line of a heading, paragraph or list item, and each table cell; code blocks, HTML blocks
    and the markers of headings, lists, quotes and tables stay outside."""
    lines = document.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    found: list[Unit] = []
    tokens = _markdown().parse(document)
    row_cursor: dict[int, int] = {}
    for i, token in enumerate(tokens):
        if token.type != "inline" or not token.content.strip():
            continue
        cell = tokens[i - 1].type in ("th_open", "td_open")
        first_line = token.map[0] if token.map else _row_line(tokens, i)
        for k, content in enumerate(token.content.split("\n")):
            number = first_line + k
            line = lines[number]
            begin = row_cursor.get(number, 0) if cell else 0
            at = line.find(content, begin) if content else -1
            if at < 0:
                continue
            row_cursor[number] = at + len(content)
            unit = _inline_unit(content, starts[number] + at)
            if unit is not None:
                found.append(unit)
    return sorted(found, key=lambda u: u.start)


def _row_line(tokens: list[Any], index: int) -> int:
    """Table cells carry no line map: their row's does."""
    for token in reversed(tokens[:index]):
        if token.type == "tr_open":
            return int(token.map[0])
    return 0


def _inline_unit(text: str, base: int) -> Unit | None:
    """A unit from one line of inline Markdown, or None when markdown-it read it in a way that cannot be
    mapped back to the source (its text then stays as it is)."""
    children = _markdown().parseInline(text)[0].children or []
    try:
        plain, offsets, marks = _InlineMatch(text).run(children)
    except _Unmatched:
        return None
    return _trimmed(Unit(base, base + len(text), plain, [base + o for o in offsets], marks))


class _Unmatched(Exception):
    pass


class _InlineMatch:
    """Walks markdown-it's inline tokens over the source line: plain text, its offsets, the marks."""

    def __init__(self, source: str):
        self.source, self.cursor = source, 0
        self.plain: list[str] = []
        self.offsets: list[int] = []
        self.marks: list[Mark] = []
        self.open: list[tuple[int, int]] = []  # (plain offset, source offset) of marks still open

    def run(self, children: list[Any]) -> tuple[str, list[int], list[Mark]]:
        for token in children:
            handler = getattr(self, f"_{token.type}", None)
            if handler is None:
                if token.type.endswith("_open"):
                    self._opening(token.markup)
                elif token.type.endswith("_close"):
                    self._closing(token.markup)
                else:
                    raise _Unmatched(token.type)
            else:
                handler(token)
        if self.open or self.cursor != len(self.source.rstrip()) and self.source[self.cursor :].strip():
            raise _Unmatched("trailing")
        return "".join(self.plain), [*self.offsets, len(self.source)], self.marks

    def _expect(self, markup: str) -> int:
        if not self.source.startswith(markup, self.cursor):
            raise _Unmatched(markup)
        start, self.cursor = self.cursor, self.cursor + len(markup)
        return start

    def _text(self, token: Any) -> None:
        for char in token.content:
            self._char(char)

    def _char(self, char: str) -> None:
        source, at = self.source, self.cursor
        if source.startswith(char, at):
            width = len(char)
        elif source.startswith("\\" + char, at):
            width = 2
        elif source.startswith("&", at) and (entity := re.match(r"&(?:#\d+|#x[0-9a-fA-F]+|\w+);", source[at:])):
            if html.unescape(entity.group()) != char:
                raise _Unmatched(char)
            width = entity.end()
        elif char == " " and source.startswith("\t", at):
            width = 1
        else:
            raise _Unmatched(char)
        self.plain.append(char)
        self.offsets.append(at)
        self.cursor += width

    def _softbreak(self, token: Any) -> None:
        raise _Unmatched("softbreak")

    def _hardbreak(self, token: Any) -> None:
        raise _Unmatched("hardbreak")

    def _opening(self, markup: str) -> None:
        self.open.append((len(self.plain), self._expect(markup)))

    def _closing(self, markup: str) -> None:
        plain_start, source_start = self.open.pop()
        open_text = self.source[source_start : source_start + len(markup)]
        self._expect(markup)
        self.marks.append(Mark(plain_start, len(self.plain), open_text, markup, at=source_start))

    def _link_open(self, token: Any) -> None:
        if token.markup == "autolink":
            self.open.append((len(self.plain), self._expect("<")))
        else:
            self.open.append((len(self.plain), self._expect("[")))

    def _link_close(self, token: Any) -> None:
        plain_start, source_start = self.open.pop()
        if self.source[source_start] == "<":
            self._expect(">")
            self.marks.append(Mark(plain_start, len(self.plain), "<", ">", verbatim=True, at=source_start))
            return
        close_start = self._expect("]")
        self.cursor = _bracket_tail(self.source, self.cursor)
        close = self.source[close_start : self.cursor]
        self.marks.append(Mark(plain_start, len(self.plain), "[", close, at=source_start))

    def _code_inline(self, token: Any) -> None:
        start = self._expect(token.markup)
        content_at = self.source.find(token.content, self.cursor)
        if content_at < 0:
            raise _Unmatched("code")
        plain_start = len(self.plain)
        for k, char in enumerate(token.content):
            self.plain.append(char)
            self.offsets.append(content_at + k)
        self.cursor = content_at + len(token.content)
        close = self.source.find(token.markup, self.cursor)
        if close < 0:
            raise _Unmatched("code close")
        open_text = self.source[start:content_at]
        close_text = self.source[self.cursor : close + len(token.markup)]
        self.cursor = close + len(token.markup)
        self.marks.append(Mark(plain_start, len(self.plain), open_text, close_text, verbatim=True, at=start))

    def _image(self, token: Any) -> None:
        start = self._expect("![")
        close = self.source.find("]", self.cursor)
        if close < 0:
            raise _Unmatched("image")
        self.cursor = _bracket_tail(self.source, close + 1)
        self.marks.append(Mark(len(self.plain), len(self.plain), self.source[start : self.cursor], at=start))

    def _html_inline(self, token: Any) -> None:
        start = self._expect(token.content)
        self.marks.append(Mark(len(self.plain), len(self.plain), self.source[start : self.cursor], at=start))


def _bracket_tail(source: str, at: int) -> int:
    """Past a link's destination: ``(url "title")``, ``[ref]`` or nothing (a shortcut reference)."""
    if source.startswith("(", at):
        depth, i = 0, at
        while i < len(source):
            depth += {"(": 1, ")": -1}.get(source[i], 0)
            i += 1
            if depth == 0:
                return i
        raise _Unmatched("link destination")
    if source.startswith("[", at):
        close = source.find("]", at)
        if close < 0:
            raise _Unmatched("link reference")
        return close + 1
    return at


def _trimmed(unit: Unit) -> Unit | None:
    """The unit without the whitespace at either end of its plain text; None if nothing is left."""
    lead = len(unit.plain) - len(unit.plain.lstrip())
    length = len(unit.plain.strip())
    if not length:
        return None
    clamp = lambda offset: min(length, max(0, offset - lead))  # noqa: E731
    marks = [Mark(clamp(m.start), clamp(m.end), m.open, m.close, m.verbatim, m.at) for m in unit.marks]
    return Unit(unit.start, unit.end, unit.plain[lead : lead + length], unit.offsets[lead : lead + length + 1], marks)


# ------------------------------------------------------------------------------------------------
# HTML

BLOCKS = frozenset(
    "address article aside blockquote body caption dd details dialog div dl dt fieldset figcaption figure footer "
    "form h1 h2 h3 h4 h5 h6 head header hgroup hr html li main nav ol option p section summary table tbody td tfoot "
    "th thead title tr ul br".split()
)
UNTRANSLATED = frozenset("script style pre textarea template svg math noscript".split())  # their content stays
VERBATIM_INLINE = frozenset("code kbd samp var tt".split())  # inline, and their text is copied as it is


class HtmlUnits(HTMLParser):
    """Units from HTML: text between block tags, inline tags as marks, entities decoded."""

    def __init__(self, document: str):
        super().__init__(convert_charrefs=False)
        self.document = document
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", document)]
        self.found: list[Unit] = []
        self.skipping: str | None = None
        self._reset()

    def run(self) -> list[Unit]:
        self.feed(self.document)
        self.close()
        self._flush()
        return self.found

    def _reset(self) -> None:
        self.plain: list[str] = []
        self.offsets: list[int] = []
        self.marks: list[Mark] = []
        self.stack: list[tuple[str, int, str, bool, int]] = []  # (tag, plain offset, open text, verbatim, at)
        self.start: int | None = None
        self.end = 0

    def _position(self) -> int:
        line, column = self.getpos()
        return self.line_starts[line - 1] + column

    def _flush(self) -> None:
        if self.start is not None and self.plain:
            unit = Unit(self.start, self.end, "".join(self.plain), [*self.offsets, self.end], self.marks)
            if (trimmed := _trimmed(unit)) is not None:
                self.found.append(trimmed)
        self._reset()

    def _touch(self, start: int, end: int) -> None:
        """The unit's region grows to ``end``; it starts at the first thing that is not whitespace."""
        self.start = start if self.start is None else self.start
        self.end = max(self.end, end)

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        raw = self.get_starttag_text() or ""
        at = self._position()
        if self.skipping:
            return
        if tag in UNTRANSLATED:
            self._flush()
            self.skipping = tag
        elif tag in BLOCKS:
            self._flush()
        elif tag == "img" or tag in ("wbr", "input"):
            self._touch(at, at + len(raw))
            self.marks.append(Mark(len(self.plain), len(self.plain), raw, at=at))
        else:
            self._touch(at, at + len(raw))
            self.stack.append((tag, len(self.plain), raw, tag in VERBATIM_INLINE, at))

    def handle_startendtag(self, tag: str, attrs: Any) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in BLOCKS and tag not in ("img", "wbr", "input") and not self.skipping:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        at = self._position()
        raw = self.document[at : self.document.index(">", at) + 1]
        if self.skipping:
            if tag == self.skipping:
                self.skipping = None
            return
        if tag in BLOCKS or tag in UNTRANSLATED:
            self._flush()
            return
        for k in range(len(self.stack) - 1, -1, -1):
            if self.stack[k][0] == tag:
                _, start, open_text, verbatim, opened = self.stack.pop(k)
                self._touch(at, at + len(raw))
                self.marks.append(Mark(start, len(self.plain), open_text, raw, verbatim, opened))
                return
        self._touch(at, at + len(raw))  # a stray end tag: an atom
        self.marks.append(Mark(len(self.plain), len(self.plain), raw, at=at))

    def handle_data(self, data: str) -> None:
        if self.skipping:
            return
        at = self._position()
        if not data.strip() and self.start is None:
            return
        if data.strip():
            self._touch(at + len(data) - len(data.lstrip()), at + len(data.rstrip()))
        for k, char in enumerate(data):
            self.plain.append(" " if char in "\r\n\t" else char)
            self.offsets.append(at + k)

    def _entity(self, raw: str) -> None:
        if self.skipping:
            return
        at = self._position()
        text = html.unescape(raw)
        if text.strip():  # a space entity (&nbsp;) at the unit's edge stays outside it, as it stands
            self._touch(at, at + len(raw))
        elif self.start is None:
            return
        for char in text:
            self.plain.append(char)
            self.offsets.append(at)

    def handle_entityref(self, name: str) -> None:
        at = self._position()
        end = self.document.find(";", at)
        self._entity(self.document[at : end + 1] if end >= 0 and end - at <= 32 else f"&{name}")

    def handle_charref(self, name: str) -> None:
        at = self._position()
        end = self.document.find(";", at)
        self._entity(self.document[at : end + 1] if end >= 0 and end - at <= 12 else f"&#{name}")

    def handle_comment(self, data: str) -> None:
        if not self.skipping and self.start is not None:
            at = self._position()
            raw = f"<!--{data}-->"
            self._touch(at, at + len(raw))
            self.marks.append(Mark(len(self.plain), len(self.plain), raw, at=at))


# ------------------------------------------------------------------------------------------------
# Putting marks back


@dataclass
class Placed:
    """A sentence's translation with its marks put back, and whether any had to move."""

    text: str
    moved: bool


_END_PUNCTUATION = re.compile(r"[\s.!?。！？…；;:：,，]*$")


def place(
    source: str, translation: str, marks: list[Mark], inner: dict[str, str], fmt: str = "text", last: bool = True
) -> Placed:
    """Put each mark of ``source`` (a sentence's plain text) back into its ``translation``, written as
    ``fmt`` writes text (HTML escaped).

    A mark around the whole sentence (or all but its final punctuation) goes around the whole
    translation; one around some words goes around the same words in the translation when they are
    found there: copied as they are (code, names, numbers), or as ``inner`` says they translate on their
    own. A mark that cannot be found there goes around the whole translation, and code the translation
    lost is put back whole at its relative place (both ``moved``); an atom keeps its relative place.

    Markdown emphasis follows CommonMark's flanking rules, which Chinese text trips: a closing ``**``
    after "。" and before more text is no closer, so it is put before the stop unless the sentence ends
    its unit (``last``); and inside a word only ``*`` delimits, so ``_`` becomes ``*`` there."""
    translation = escape(fmt, translation)
    inner = {escape(fmt, k): escape(fmt, v) for k, v in inner.items()}
    events: list[tuple[int, int, int, str]] = []  # (position, 0 close / 1 open, order, text)
    moved = False
    body_end = len(translation) - len(_END_PUNCTUATION.search(translation).group())  # type: ignore[union-attr]
    source_body = len(source) - len(_END_PUNCTUATION.search(source).group())  # type: ignore[union-attr]
    for order, mark in enumerate(sorted(marks, key=lambda m: (m.start, -m.end, m.at))):
        if mark.start == mark.end:
            at = _atom_position(mark.start, source, translation)
            moved |= 0 < mark.start < len(source)
            events.append((at, 1, order, mark.open))
            continue
        span = _span(mark, source, source_body, translation, body_end, inner, fmt)
        if span is None and mark.verbatim:  # code the translation lost: put it back whole, where it stood
            moved = True
            verbatim = mark.open + escape(fmt, source[mark.start : mark.end]) + mark.close
            events.append((_atom_position(mark.start, source, translation), 1, order, verbatim))
            continue
        if span is None:
            moved, span = True, (0, len(translation))
        opening, closing = mark.open, mark.close
        if fmt == "markdown" and _delimiter(closing):
            if span != (0, len(translation)):
                opening, closing = _asterisks(opening), _asterisks(closing)
            if not (last and span[1] == len(translation)):
                span = (span[0], max(span[0] + 1, _before_stops(translation, span[1])))
        events.append((span[0], 1, order, opening))
        events.append((span[1], 0 if span[1] > span[0] else 2, -order, closing))  # an empty span: open, then close
    out, cursor = [], 0
    for position, _, _, text in sorted(events):
        out += [translation[cursor:position], text]
        cursor = position
    return Placed("".join(out) + translation[cursor:], moved)


def _span(
    mark: Mark, source: str, source_body: int, translation: str, body_end: int, inner: dict[str, str], fmt: str
) -> tuple[int, int] | None:
    if mark.start == 0 and mark.end >= len(source) and not mark.verbatim:
        return 0, len(translation)
    if mark.start == 0 and mark.end >= source_body and not mark.verbatim:
        return 0, body_end
    words = escape(fmt, source[mark.start : mark.end])
    for candidate in (words, inner.get(words)):
        if candidate and translation.count(candidate) == 1:
            at = translation.index(candidate)
            end = at + len(candidate)
            if end < len(translation):  # "**3个苹果。**汤姆" would not read as emphasis: keep the stop outside
                end -= len(_END_PUNCTUATION.search(candidate).group())  # type: ignore[union-attr]
            return (at, end) if end > at else None
    return None


def _delimiter(text: str) -> bool:
    return bool(text) and set(text) <= {"*", "_", "~"}


def _asterisks(delimiter: str) -> str:
    return delimiter.replace("_", "*") if set(delimiter) == {"_"} else delimiter


def _before_stops(text: str, end: int) -> int:
    """``end`` moved back over the punctuation just before it."""
    while end > 0 and unicodedata.category(text[end - 1]).startswith("P"):
        end -= 1
    return end


def _atom_position(offset: int, source: str, translation: str) -> int:
    if offset <= 0:
        return 0
    if offset >= len(source):
        return len(translation)
    return round(offset / len(source) * len(translation))


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


def escape(fmt: str, text: str) -> str:
    """A translation as the format writes text: HTML escapes ``&``, ``<``, ``>``."""
    return html.escape(text, quote=False) if fmt == "html" else text
