"""What the document layer translates: ``Unit``s of plain text with their markup lifted out into
``Mark``s, and what every format builds its units with (trimming, bare addresses, atoms at a mark's edges).

The formats: ``worker.documents.markdown`` and ``worker.documents.html`` read a document into units;
``worker.documents.markup`` dispatches by format and puts the marks back around the translation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

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


def with_edge_atoms(
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


def trim(unit: Unit) -> Unit | None:
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
