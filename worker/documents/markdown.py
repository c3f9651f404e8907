"""Markdown read into units: markdown-it-py (CommonMark, with GFM tables and strikethrough), its inline
tokens walked over the source so that every mark says where it stands (see ``worker.documents.markup``)."""

from __future__ import annotations

import functools
import re
import string
from dataclasses import replace
from typing import Any

from worker.documents.marks import Mark, Unit, trim, with_edge_atoms


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
    return trim(Unit(base, base + len(text), plain, [base + o for o in offsets], marks, escaped=escaped))


def _raw_unit(text: str, base: int) -> Unit | None:
    """``text`` translated as plain text, markup and all, and flagged (``markup_unparsed``): never left
    silently in the source language."""
    unit = trim(Unit(base, base + len(text), text, list(range(base, base + len(text) + 1))))
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
            mark, self.marks[before:] = with_edge_atoms(mark, inside, self.source, self.plain, close_at)
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
