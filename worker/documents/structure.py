"""What a translation must keep of its source document's markup, and a check that it did.

A document's ``structure`` is what a reader of the format would see besides the words: the blocks in
order (headings, lists, quotes, tables, code blocks byte for byte), every code span and element byte
for byte, every link and image with its target, inline markup nested as it was, bare addresses, and
the line endings. Words may move inside a sentence, so marks around them may change order among
themselves: inline structure is compared as a multiset of paths (the marks around each one, outermost
first), block structure as a sequence.

``differences(source, translation, fmt)`` names what changed; the document layer runs it on every
translated document, and a document it finds anything in is never ``ok`` (flag ``markup_changed``).
The same check measures the real-document corpus (``tests/worker/documents/test_real_documents.py``,
``python -m benchmarks.real_documents``). Parsers are the ones the units come from: markdown-it-py and
``html.parser``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from worker.documents.html import BLOCKS, PositionedParser
from worker.documents.markdown import markdown_parser
from worker.documents.marks import BARE_ADDRESS

_VERBATIM_HTML = frozenset("code kbd samp var tt pre script style textarea".split())
_VOID_HTML = frozenset(
    "area base br col embed hr img input link meta source track wbr basefont bgsound frame keygen param".split()
)


@dataclass(frozen=True)
class Structure:
    """``blocks`` in order; ``inline`` and ``verbatim`` as multisets; ``endings``: how many ``\\r\\n`` and
    lone ``\\n`` (HTML: whether any ``\\r\\n``)."""

    blocks: tuple[str, ...]
    inline: Counter[str]
    verbatim: Counter[str]
    addresses: Counter[str]
    endings: tuple[int, int]


def structure(document: str, fmt: str) -> Structure:
    endings = (document.count("\r\n"), document.count("\n") - document.count("\r\n"))
    if fmt == "html":  # a line break in text is a space: lines may join, but \r\n stay where they were
        endings = (min(endings[0], 1), 0)
    if fmt == "markdown":
        return _markdown_structure(document, endings)
    if fmt == "html":
        return _HtmlStructure(document).run(endings)
    return Structure((), Counter(), Counter(), Counter(), endings)


def differences(source: str, translation: str, fmt: str) -> list[str]:
    """What the translation lost or changed of the source's structure, one phrase each (empty: nothing)."""
    before, after = structure(source, fmt), structure(translation, fmt)
    found = []
    if before.blocks != after.blocks:
        found.append(f"blocks: {_first_change(before.blocks, after.blocks)}")
    for name in ("inline", "verbatim", "addresses"):
        lost, added = getattr(before, name) - getattr(after, name), getattr(after, name) - getattr(before, name)
        if lost or added:
            found.append(f"{name}: lost {_few(lost)}, added {_few(added)}")
    if before.endings != after.endings:
        found.append(f"line endings: \\r\\n/\\n {before.endings} -> {after.endings}")
    return found


def _first_change(a: tuple[str, ...], b: tuple[str, ...]) -> str:
    k = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"at block {k}: {a[k] if k < len(a) else 'end'!r:.80} -> {b[k] if k < len(b) else 'end'!r:.80}"


def _few(items: Counter[str]) -> str:
    shown = [f"{k!r:.80}" for k in list(items.elements())[:3]]
    return "[" + ", ".join(shown) + (", ..." if sum(items.values()) > 3 else "") + "]"


def _addresses(texts: Iterable[str]) -> Counter[str]:
    return Counter(m.group() for text in texts for m in BARE_ADDRESS.finditer(text))


# ------------------------------------------------------------------------------------------------
# Markdown


def _markdown_structure(document: str, endings: tuple[int, int]) -> Structure:
    blocks: list[str] = []
    inline: Counter[str] = Counter()
    verbatim: Counter[str] = Counter()
    texts: list[str] = []
    for token in markdown_parser().parse(document.replace("\r\n", "\n")):
        if token.type == "inline":
            for path, child in _inline_paths(token.children or []):
                if child.type in ("code_inline", "html_inline"):
                    verbatim[f"{child.type} {child.content}"] += 1
                elif child.type == "text":
                    texts.append(child.content)
                elif child.type not in ("softbreak", "hardbreak", "text_special"):
                    inline[" > ".join(path)] += 1
            continue
        described = f"{token.type} {token.tag} {token.markup}".rstrip() if token.nesting >= 0 else token.type
        if token.type in ("fence", "code_block", "html_block"):
            verbatim[f"{token.type} {token.info} {token.content}"] += 1
        blocks.append(described)
    return Structure(tuple(blocks), inline, verbatim, _addresses(texts), endings)


def _inline_paths(children: list[Any]) -> Iterator[tuple[list[str], Any]]:
    """Each inline token with the marks around it, outermost first (an opening token's path ends in itself)."""
    path: list[str] = []
    for child in children:
        if child.nesting == -1:
            path.pop()
            continue
        if child.nesting == 1:
            path.append(_markdown_mark(child))
        yield list(path) if child.nesting == 1 else [*path, _markdown_mark(child)], child


def _markdown_mark(token: Any) -> str:
    if token.type == "link_open":
        return f"link {token.attrs.get('href', '')}"
    if token.type == "image":
        return f"image {token.attrs.get('src', '')}"
    return token.tag or token.type  # em and strong whatever their delimiter: ``_`` may become ``*``


# ------------------------------------------------------------------------------------------------
# HTML


class _HtmlStructure(PositionedParser):
    """Block elements in order; every other element as its path of start tags; verbatim elements' source."""

    def __init__(self, document: str):
        super().__init__(document, convert_charrefs=True)
        self.blocks: list[str] = []
        self.inline: Counter[str] = Counter()
        self.verbatim: Counter[str] = Counter()
        self.texts: list[str] = []
        self.open: list[tuple[str, str, int]] = []  # (tag, start tag as written, where its content starts)

    def run(self, endings: tuple[int, int]) -> Structure:
        self.feed(self.document)
        self.close()
        self.blocks += [f"unclosed {raw}" for _, raw, _ in self.open]
        return Structure(tuple(self.blocks), self.inline, self.verbatim, _addresses(self.texts), endings)

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        raw = self.get_starttag_text() or tag
        if tag in BLOCKS or tag in _VERBATIM_HTML:
            self.blocks.append(raw) if tag in BLOCKS else None
        if any(t in _VERBATIM_HTML for t, _, _ in self.open):
            return  # inside code: its source is compared whole
        path = " > ".join([r for t, r, _ in self.open if t not in BLOCKS] + [raw])
        if tag not in BLOCKS:
            self.inline[path] += 1
        if tag not in _VOID_HTML:
            self.open.append((tag, raw, self.position() + len(raw)))

    def handle_startendtag(self, tag: str, attrs: Any) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID_HTML:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        names = [t for t, _, _ in self.open]
        if tag not in names:
            self.blocks.append(f"stray </{tag}>")
            return
        while self.open:
            name, raw, content_at = self.open.pop()
            if name == tag:
                break
            self.blocks.append(f"unclosed {raw}")  # an element closed by an outer end tag: its nesting is broken
        if tag in _VERBATIM_HTML and not any(t in _VERBATIM_HTML for t in names[: names.index(tag)]):
            self.verbatim[f"{raw}{self.document[content_at : self.position()]}"] += 1
        if tag in BLOCKS:
            self.blocks.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        if not any(t in _VERBATIM_HTML for t, _, _ in self.open):
            self.texts.append(data)
