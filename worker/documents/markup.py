"""Documents as units of translatable text with their markup set aside: plain text, Markdown, HTML.

A ``Unit`` is a stretch of the document translated as a whole (a line of plain text; a heading,
paragraph line, list item line or table cell of Markdown, or a whole paragraph whose markup runs
over its lines; the text of a block element of HTML). The model sees only its ``plain`` text: inline
markup (emphasis, links, code spans, inline tags) is lifted out into ``Mark``s over plain offsets,
and entities are decoded. Everything outside the units (block markup, code blocks, tables' pipes,
tags, comments) is copied to the translation as it stands, and each mark is put back around the
words it enclosed (``place``); code and addresses go back as the source wrote them, never translated.
What a translation must keep is checked afterwards by ``worker.documents.structure``.

Parsers: markdown-it-py (CommonMark, with GFM tables and strikethrough) for Markdown; Python's own
``html.parser`` for HTML: of the parsers measured (``python -m benchmarks.markup``) it is the one that
reports where each tag and entity sits in the source, so the skeleton is copied, never re-serialised.
"""

from __future__ import annotations

import functools
import html
import re
import string
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from html.parser import HTMLParser
from typing import Any

FORMATS = ("text", "markdown", "html")
# An address in running text (``https://example.org/a_b``): copied as it stands, like code.
BARE_ADDRESS = re.compile(r"\b(?:https?|ftp)://[!-~]*[^\s<>\"'`\[\]().,;:!?\x80-\U0010ffff]")


@dataclass(frozen=True)
class Mark:
    """Markup around ``plain[start:end]`` of its unit: ``open`` before, ``close`` after. ``verbatim``:
    the enclosed text is code or an address, and ``whole`` (the element as the source wrote it; empty
    for the rest of code a sentence split cut) goes back instead of any translation of it. An atom (an
    image, ``<br>``, a tag never closed, an element around no words) has ``start == end``, its source in
    ``open`` and no close."""

    start: int
    end: int
    open: str
    close: str = ""
    verbatim: bool = False
    at: int = 0  # where the opening markup sits in the source: orders marks around the same words
    whole: str | None = None


@dataclass
class Unit:
    """``document[start:end]`` translated as one: ``plain`` is what the model reads, ``offsets[i]`` the
    document offset of ``plain[i]`` (one more entry for the end)."""

    start: int
    end: int
    plain: str
    offsets: list[int]
    marks: list[Mark] = field(default_factory=list)
    raw: bool = False  # its markup could not be lifted out: ``plain`` is the source, markup and all
    escaped: str = ""  # Markdown: ASCII punctuation the source wrote escaped (``\\*``, ``&lt;``), escaped back

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
def markdown_parser() -> Any:
    from markdown_it import MarkdownIt

    # Without text_join, entities and backslash escapes stay tokens of their own that name their source.
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).disable("text_join")


def markdown_units(document: str) -> list[Unit]:
    """Each line of a heading, paragraph or list item (a paragraph whose link, emphasis or code runs over
    a line break: the paragraph), and each table cell; code blocks, HTML blocks and the markers of
    headings, lists, quotes and tables stay outside."""
    lines = document.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    found: list[Unit] = []
    env: dict[str, Any] = {}  # the document's link reference definitions, for its lines' links
    tokens = markdown_parser().parse(document, env)
    row_cursor: dict[int, int] = {}
    for i, token in enumerate(tokens):
        if token.type != "inline" or not token.content.strip():
            continue
        cell = tokens[i - 1].type in ("th_open", "td_open")
        first_line = token.map[0] if token.map else _row_line(tokens, i)
        if not cell and _crosses_lines(token) and (whole := _paragraph_unit(token, document, starts, env)) is not None:
            found += whole
            continue
        for k, content in enumerate(token.content.split("\n")):
            number = first_line + k
            line = lines[number]
            begin = row_cursor.get(number, 0) if cell else 0
            if not content or not line[begin:].strip():
                continue
            if cell:  # a table cell's content has its escaped pipes unescaped: look for them as written
                pattern = r"\\?\|".join(map(re.escape, content.split("|")))
                match = re.compile(pattern).search(line, begin)
                at, raw = (match.start(), match.group()) if match else (-1, content)
            else:
                at, raw = line.find(content, begin), content
            base = starts[number]
            unit = _inline_unit(raw, base + at, env, cell) if at >= 0 else _raw_unit(line[begin:], base + begin)
            row_cursor[number] = at + len(raw) if at >= 0 else len(line)
            if unit is not None:
                found.append(unit)
    return sorted(found, key=lambda u: u.start)


def _crosses_lines(token: Any) -> bool:
    """Whether markup of the paragraph runs over a line break (a link, emphasis or code span wrapped)."""
    depth, breaks = 0, 0
    for child in token.children or []:
        depth += child.nesting
        if child.type in ("softbreak", "hardbreak"):
            breaks += 1
            if depth:
                return True
    return breaks != token.content.count("\n")


def _paragraph_unit(token: Any, document: str, starts: list[int], env: dict[str, Any]) -> list[Unit] | None:
    """The whole paragraph as one unit, its line breaks (with the quote markers or indentation after
    them) kept as atoms (no unit: no words, only markup); None where a line cannot be found as written."""
    located = []
    for k, content in enumerate(token.content.split("\n")):
        line_start, line_end = starts[token.map[0] + k], starts[token.map[0] + k + 1] - 1
        at = document.find(content, line_start, line_end)
        if at < 0:
            return None
        located.append((at, content))
    base, (last, tail) = located[0][0], located[-1]
    breaks = [at - base for at, _ in located[1:]]
    unit = _inline_unit(document[base : last + len(tail)], base, env, children=token.children, breaks=breaks)
    return [unit] if unit else []


def _row_line(tokens: list[Any], index: int) -> int:
    """Table cells carry no line map: their row's does."""
    for token in reversed(tokens[:index]):
        if token.type == "tr_open":
            return int(token.map[0])
    return 0


def _inline_unit(
    text: str,
    base: int,
    env: dict[str, Any],
    cell: bool = False,
    children: list[Any] | None = None,
    breaks: list[int] | None = None,
) -> Unit | None:
    """A unit from one line of inline Markdown (or a table ``cell``, or a paragraph whose markup runs
    over lines: its ``children`` and where each line after the first starts, ``breaks``); when markdown-it
    read it in a way that cannot be mapped back to the source, the text as it stands (``raw``)."""
    if children is None:
        children = markdown_parser().parseInline(text, env)[0].children or []
    match = _InlineMatch(text, cell, breaks or [])
    try:
        plain, offsets, marks = match.run(children)
    except _Unmatched:
        return _raw_unit(text, base)
    lead, tail = len(plain) - len(plain.lstrip()), len(plain.rstrip())
    # A space entity (&nbsp;) in the whitespace trimmed off either end is kept there, as written.
    marks += [Mark(k, k, raw, at=at) for k, raw, at in match.spaces if k < lead or k >= tail]
    escaped = "".join(sorted(match.escaped))
    return _trimmed(Unit(base, base + len(text), plain, [base + o for o in offsets], marks, escaped=escaped))


def _raw_unit(text: str, base: int) -> Unit | None:
    """``text`` translated as plain text, markup and all, and flagged (``markup_unparsed``): never left
    silently in the source language."""
    unit = _trimmed(Unit(base, base + len(text), text, list(range(base, base + len(text) + 1))))
    return replace(unit, start=unit.offsets[0], end=unit.offsets[-1], raw=True) if unit else None


_ASCII_PUNCTUATION = frozenset(string.punctuation)


class _Unmatched(Exception):
    pass


class _InlineMatch:
    """Walks markdown-it's inline tokens over the source line: plain text, its offsets, the marks."""

    def __init__(self, source: str, cell: bool = False, breaks: list[int] | None = None):
        self.source, self.cursor, self.cell, self.breaks = source, 0, cell, breaks or []
        self.plain: list[str] = []
        self.offsets: list[int] = []
        self.marks: list[Mark] = []
        self.open: list[tuple[int, int, int]] = []  # (plain offset, source offset, marks before) of marks open
        self.autolink = False
        self.spaces: list[tuple[int, str, int]] = []  # (plain offset, source, source offset) of space entities
        self.escaped: set[str] = set()

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
        if self.autolink:  # markdown-it gives the address normalised (%20 decoded...): take it as written
            end = self.source.find(">", self.cursor)
            if end < 0:
                raise _Unmatched("autolink")
            self._append(self.source[self.cursor : end], self.cursor, each=True)
            self.cursor = end
            return
        source = self.source
        for char in token.content:  # text is the source as written, but for a tab read as a space
            if not source.startswith(char, self.cursor) and not (char == " " and source.startswith("\t", self.cursor)):
                raise _Unmatched(char)
            self._append(char, self.cursor)
            self.cursor += 1

    def _text_special(self, token: Any) -> None:
        """An entity (``&amp;``) or a backslash escape (``\\*``): ``markup`` is its source, ``content`` its text.
        A table cell's escaped pipe is an atom: written unescaped, it would end the cell."""
        at = self._expect(token.markup)
        if self.cell and token.markup == "\\|":
            self.marks.append(Mark(len(self.plain), len(self.plain), token.markup, at=at))
            return
        if not token.content.strip():
            self.spaces.append((len(self.plain), token.markup, at))
        self.escaped |= set(token.content) & _ASCII_PUNCTUATION
        self._append(token.content, at)

    def _append(self, text: str, at: int, each: bool = False) -> None:
        self.plain.extend(text)  # one entry a character: marks count them
        self.offsets += [at + k for k in range(len(text))] if each else [at] * len(text)

    def _softbreak(self, token: Any) -> None:
        """A line break inside the unit: a space to the model, and an atom that puts the break back, with
        whatever the next line has before its text (``> ``, indentation, a hard break's spaces)."""
        after = next((at for at in self.breaks if at > self.cursor), None)
        newline = self.source.find("\n", self.cursor)
        if after is None or not 0 <= newline < after or self.source[self.cursor : newline].strip(" \t\\"):
            raise _Unmatched(token.type)
        at, self.cursor = self.cursor, after
        self.marks.append(Mark(len(self.plain), len(self.plain), self.source[at:after], at=at))
        self._append(" ", at)

    _hardbreak = _softbreak

    def _opening(self, markup: str) -> None:
        self.open.append((len(self.plain), self._expect(markup), len(self.marks)))

    def _closing(self, markup: str) -> None:
        plain_start, source_start, before = self.open.pop()
        open_text = self.source[source_start : source_start + len(markup)]
        self._expect(markup)
        self._close(Mark(plain_start, len(self.plain), open_text, markup, at=source_start), before)

    def _close(self, mark: Mark, before: int, close_at: int | None = None) -> None:
        """A mark around no words (a link around a badge image, ``****``) is one atom: its source whole,
        with the atoms inside it."""
        if not "".join(self.plain[mark.start :]).strip():
            del self.marks[before:]
            mark = Mark(mark.start, mark.start, self.source[mark.at : self.cursor], at=mark.at)
        elif close_at is not None:  # a link: the images at the edges of its words stay in it
            inside = self.marks[before:]
            mark, self.marks[before:] = _with_edge_atoms(mark, inside, self.source, self.plain, close_at)
        self.marks.append(mark)

    def _link_open(self, token: Any) -> None:
        if token.markup == "autolink":
            self.open.append((len(self.plain), self._expect("<"), len(self.marks)))
            self.autolink = True
        else:
            self.open.append((len(self.plain), self._expect("["), len(self.marks)))

    def _link_close(self, token: Any) -> None:
        plain_start, source_start, before = self.open.pop()
        if self.source[source_start] == "<":
            self.autolink = False
            self._expect(">")
            whole = self.source[source_start : self.cursor]
            self._close(Mark(plain_start, len(self.plain), "<", ">", True, source_start, whole), before)
            return
        close_start = self._expect("]")
        self.cursor = _link_tail(self.source, self.cursor)
        close = self.source[close_start : self.cursor]
        if close in ("]", "][]"):  # the words are the reference's label: once translated, name it
            close = "][" + re.sub(r"\s+", " ", self.source[source_start + 1 : close_start]) + "]"
        self._close(Mark(plain_start, len(self.plain), "[", close, at=source_start), before, close_start)

    def _code_inline(self, token: Any) -> None:
        """Code: its words go to the model as markdown-it reads them (line breaks as spaces); the span goes
        back as written. It ends at the first run of as many backticks (CommonMark)."""
        start = self._expect(token.markup)
        close = re.compile(f"(?<!`){token.markup}(?!`)").search(self.source, self.cursor)
        if close is None:
            raise _Unmatched("code close")
        content_at = self.source.find(token.content, self.cursor, close.start())
        content_at = content_at if content_at >= 0 else self.cursor
        plain_start = len(self.plain)
        self._append(token.content, content_at, each=content_at + len(token.content) <= close.start())
        open_text = self.source[start:content_at]
        close_text = self.source[content_at + len(token.content) : close.end()]
        self.cursor = close.end()
        whole = self.source[start : self.cursor]
        self.marks.append(Mark(plain_start, len(self.plain), open_text, close_text, True, start, whole))

    def _image(self, token: Any) -> None:
        from markdown_it.helpers import parseLinkLabel
        from markdown_it.rules_inline import StateInline

        start = self._expect("![")
        close = parseLinkLabel(StateInline(self.source, markdown_parser(), {}, []), start + 1)
        if close < 0:
            raise _Unmatched("image")
        self.cursor = _link_tail(self.source, close + 1)
        self.marks.append(Mark(len(self.plain), len(self.plain), self.source[start : self.cursor], at=start))

    def _html_inline(self, token: Any) -> None:
        start = self._expect(token.content)
        self.marks.append(Mark(len(self.plain), len(self.plain), self.source[start : self.cursor], at=start))


def _with_edge_atoms(
    mark: Mark, inside: list[Mark], source: str, plain: list[str], close_at: int
) -> tuple[Mark, list[Mark]]:
    """The mark with the atoms at either edge of its words (an image first or last in a link, ``<br>``
    before ``</span>``) taken into its own markup, as the source has them up to its own (whose close
    starts at ``close_at``); the marks left inside it. Put back apart, an atom at the end of the words
    would land after the element's close."""
    kept, open_end, close_start = [], mark.at + len(mark.open), close_at
    for atom in inside:
        if atom.start == atom.end and not "".join(plain[mark.start : atom.start]).strip():
            open_end = max(open_end, atom.at + len(atom.open))
        elif atom.start == atom.end and not "".join(plain[atom.start : mark.end]).strip():
            close_start = min(close_start, atom.at)
        else:
            kept.append(atom)
    opening = mark.open + source[mark.at + len(mark.open) : open_end]
    return replace(mark, open=opening, close=source[close_start:close_at] + mark.close), kept


def _link_tail(source: str, at: int) -> int:
    """Past a link's destination as markdown-it reads it (rules_inline/link.py): an inline
    ``(destination "title")``, else a reference's ``[label]`` or ``[]``, else nothing (``[label]`` alone)."""
    from markdown_it.helpers import parseLinkLabel
    from markdown_it.rules_inline import StateInline

    if source.startswith("(", at):
        try:
            return _inline_destination(source, at)
        except _Unmatched:
            pass
    if source.startswith("[", at):
        close = parseLinkLabel(StateInline(source, markdown_parser(), {}, []), at)
        if close >= 0:
            return close + 1
    return at


def _inline_destination(source: str, at: int) -> int:
    from markdown_it.helpers import parseLinkDestination, parseLinkTitle

    md, end = markdown_parser(), len(source)
    skip = lambda pos: next((k for k in range(pos, end) if source[k] not in " \t\n"), end)
    pos = skip(at + 1)
    destination = parseLinkDestination(source, pos, end)
    if pos < end and destination.ok:
        if md.validateLink(md.normalizeLink(destination.str)):
            pos = destination.pos
        start, pos = pos, skip(pos)
        title = parseLinkTitle(source, pos, end)
        if pos < end and start != pos and title.ok:
            pos = skip(title.pos)
    if not source.startswith(")", pos):
        raise _Unmatched("link destination")
    return pos + 1


def _trimmed(unit: Unit) -> Unit | None:
    """The unit without the whitespace at either end of its plain text; None if nothing is left."""
    lead = len(unit.plain) - len(unit.plain.lstrip())
    length = len(unit.plain.strip())
    if not length:
        return None
    clamp = lambda offset: min(length, max(0, offset - lead))
    marks = [replace(m, start=clamp(m.start), end=clamp(m.end)) for m in unit.marks]
    trimmed = replace(
        unit, plain=unit.plain[lead : lead + length], offsets=unit.offsets[lead : lead + length + 1], marks=marks
    )
    return replace(trimmed, marks=trimmed.marks + _addresses(trimmed))


def _addresses(unit: Unit) -> list[Mark]:
    """Bare addresses in the unit's text, outside code, as verbatim marks: written as the source has them."""
    code = [(m.start, m.end) for m in unit.marks if m.verbatim]
    found = []
    for match in BARE_ADDRESS.finditer(unit.plain):
        start, end = match.span()
        as_written = all(unit.offsets[k + 1] == unit.offsets[k] + 1 for k in range(start, end - 1))
        if as_written and not any(a < end and start < b for a, b in code):
            found.append(Mark(start, end, "", "", True, unit.offsets[start], match.group()))
    return found


# ------------------------------------------------------------------------------------------------
# HTML

BLOCKS = frozenset(
    "address article aside blockquote body caption dd details dialog div dl dt fieldset figcaption figure footer "
    "form h1 h2 h3 h4 h5 h6 head header hgroup hr html li main nav ol option p section summary table tbody td tfoot "
    "th thead title tr ul br".split()
)
UNTRANSLATED = frozenset("script style pre textarea template svg math noscript".split())  # their content stays
VERBATIM_INLINE = frozenset("code kbd samp var tt".split())  # inline, and their text is copied as it is
# Elements with no content and no end tag (the HTML standard's void elements, and the obsolete ones parsed
# the same way): atoms. Those that are also BLOCKS (br, hr) separate units instead.
VOID = frozenset(
    "area base br col embed hr img input link meta source track wbr basefont bgsound frame keygen param".split()
)
# What ``html.unescape`` decodes: an entity with or without its semicolon (html.parser hands such text over
# as data at the end of the input).
_BAD_CHARREF = re.compile(r"&#(?!(?:[0-9]+|[xX][0-9a-fA-F]+)[^0-9a-fA-F])")  # where html.parser's charref fails
_COMMENT_CLOSE = re.compile(r"--!?\s*>")
_SECTION_CLOSE = re.compile(r"\]\s*\]?\s*>")
_CHARREF = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)")


class PositionedParser(HTMLParser):
    """``html.parser`` over ``document`` that says where in it each event starts (``position``)."""

    def __init__(self, document: str, *, convert_charrefs: bool):
        super().__init__(convert_charrefs=convert_charrefs)
        self.document = document
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", document)]

    def position(self) -> int:
        line, column = self.getpos()
        return self.line_starts[line - 1] + column


class HtmlUnits(PositionedParser):
    """Units from HTML: text between block tags, inline tags as marks, entities decoded."""

    def __init__(self, document: str):
        super().__init__(document, convert_charrefs=False)
        self.found: list[Unit] = []
        self.skipping: str | None = None
        self._reset()

    def run(self) -> list[Unit]:
        # html.parser stops at an "&#" that starts no character reference and, at the end, hands over all
        # that follows, tags included, as text; and it drops the "&" of "&T" at the very end. So it reads a
        # copy where such an "&" is a "_", with a space after the end; the handlers take their text from
        # the document itself.
        self.feed(_BAD_CHARREF.sub("_#", self.document) + " ")
        self.close()
        self._flush()
        return self.found

    def _reset(self) -> None:
        self.plain: list[str] = []
        self.offsets: list[int] = []
        self.marks: list[Mark] = []
        # Elements open: (tag, plain offset, start tag as written, where it starts, marks before it)
        self.stack: list[tuple[str, int, str, int, int]] = []
        self.start: int | None = None
        self.end = 0

    def _flush(self) -> None:
        self._unclosed(0)
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
        at = self.position()
        raw = self.document[at : at + len(self.get_starttag_text() or "")]
        if self.skipping:
            return
        if tag in UNTRANSLATED:
            self._flush()
            self.skipping = tag
        elif tag in BLOCKS:
            self._flush()
        elif tag in VOID:
            self._touch(at, at + len(raw))
            self.marks.append(Mark(len(self.plain), len(self.plain), raw, at=at))
        else:
            self._touch(at, at + len(raw))
            self.stack.append((tag, len(self.plain), raw, at, len(self.marks)))

    def handle_startendtag(self, tag: str, attrs: Any) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in BLOCKS and tag not in VOID and not self.skipping:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        at = self.position()
        raw = self.document[at : self.document.index(">", at) + 1]
        if self.skipping:
            if tag == self.skipping:
                self.skipping = None
            return
        if tag in BLOCKS or tag in UNTRANSLATED:
            self._flush()
            return
        self._touch(at, at + len(raw))
        k = next((k for k in range(len(self.stack) - 1, -1, -1) if self.stack[k][0] == tag), None)
        if k is None:  # a stray end tag: an atom
            self.marks.append(Mark(len(self.plain), len(self.plain), raw, at=at))
            return
        self._unclosed(k + 1)
        _, start, open_text, opened, before = self.stack.pop()
        whole = self.document[opened : at + len(raw)]
        around_nothing = not "".join(self.plain[start:]).strip()
        if tag in VERBATIM_INLINE or around_nothing:  # code, or around no words: whole, as written
            del self.marks[before:]
        if around_nothing:
            self.marks.append(Mark(start, start, whole, at=opened))
        elif tag in VERBATIM_INLINE:
            self.marks.append(Mark(start, len(self.plain), open_text, raw, True, opened, whole))
        else:
            mark = Mark(start, len(self.plain), open_text, raw, at=opened)
            inside = self.marks[before:]
            mark, self.marks[before:] = _with_edge_atoms(mark, inside, self.document, self.plain, at)
            self.marks.append(mark)

    def _unclosed(self, depth: int) -> None:
        """Elements open above ``depth`` that an outer end tag (or the block's end) closes: their start tags
        stay where they stood, as atoms."""
        for _, start, open_text, at, _ in self.stack[depth:]:
            self.marks.append(Mark(start, start, open_text, at=at))
        del self.stack[depth:]

    def handle_data(self, data: str) -> None:
        if self.skipping:
            return
        at = self.position()
        data = self.document[at : at + len(data)]  # as written (the parser reads a copy: see ``run``)
        if not data.strip() and self.start is None:
            return
        if data.strip():
            self._touch(at + len(data) - len(data.lstrip()), at + len(data.rstrip()))
        cursor = 0
        for entity in _CHARREF.finditer(data):  # only in the text html.parser hands over at the end
            self._characters(data[cursor : entity.start()], at + cursor)
            self.plain += html.unescape(entity.group())
            self.offsets += [at + entity.start()] * len(html.unescape(entity.group()))
            cursor = entity.end()
        self._characters(data[cursor:], at + cursor)

    def _characters(self, data: str, at: int) -> None:
        for k, char in enumerate(data):
            self.plain.append(" " if char in "\r\n\t" else char)
            self.offsets.append(at + k)

    def _entity(self, raw: str) -> None:
        if self.skipping:
            return
        at = self.position()
        text = html.unescape(raw)
        if text.strip():  # a space entity (&nbsp;) at the unit's edge stays outside it, as it stands
            self._touch(at, at + len(raw))
        elif self.start is None:
            return
        for char in text:
            self.plain.append(char)
            self.offsets.append(at)

    def handle_entityref(self, name: str) -> None:
        self._consumed(f"&{name}")

    def handle_charref(self, name: str) -> None:
        self._consumed(f"&#{name}")

    def _consumed(self, raw: str) -> None:
        """The entity as html.parser consumed it: ``&name``, and its semicolon when one follows."""
        at = self.position()
        self._entity(raw + ";" if self.document.startswith(";", at + len(raw)) else raw)

    def handle_comment(self, data: str) -> None:
        at = self.position()
        close = _COMMENT_CLOSE.match(self.document, at + 4 + len(data))
        if self.document.startswith("<!--", at) and close:
            self._atom(at, close.end())
        else:  # a bogus comment: <!x>, </ x>
            self._atom(at, self._past(">", at))

    def handle_decl(self, decl: str) -> None:  # <!DOCTYPE html>
        self._atom(self.position(), self._past(">", self.position()))

    def handle_pi(self, data: str) -> None:  # <?php x ?>
        self._atom(self.position(), self._past(">", self.position()))

    def unknown_decl(self, data: str) -> None:  # <![CDATA[x]]>
        at = self.position()
        close = _SECTION_CLOSE.match(self.document, at + 3 + len(data))
        self._atom(at, close.end() if close else self._past(">", at))

    def _past(self, text: str, at: int) -> int:
        end = self.document.find(text, at)
        return end + len(text) if end >= 0 else len(self.document)

    def _atom(self, at: int, end: int) -> None:
        """Markup that is neither a tag nor text (a comment, a declaration): kept where it stands."""
        if not self.skipping and self.start is not None:
            self._touch(at, end)
            self.marks.append(Mark(len(self.plain), len(self.plain), self.document[at:end], at=at))


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
