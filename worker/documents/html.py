"""HTML read into units: Python's own ``html.parser``. Of the parsers measured (``python -m benchmarks.markup``)
it is the one that reports where each tag and entity sits in the source, so the skeleton is copied, never
re-serialised (see ``worker.documents.markup``).

This module is ``worker.documents.html``: the package imports absolutely, so ``import html`` below is the
standard library's.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from typing import Any

from worker.documents.marks import Mark, Unit, trim, with_edge_atoms

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
            if (trimmed := trim(unit)) is not None:
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
            mark, self.marks[before:] = with_edge_atoms(mark, inside, self.document, self.plain, at)
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


def html_units(document: str) -> list[Unit]:
    return HtmlUnits(document).run()
