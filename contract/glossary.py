"""A glossary: terms that must come out one way (issue 36). Read by ``jobs`` at submit and by the worker.

    source<TAB>target                 TSV (``.tsv``, ``.txt``): one term a line; ``#`` starts a comment line
    source,target                     CSV (``.csv``): the same, quoted as CSV quotes
    [{"source": "Chicago", "target": "芝加哥市"}, {"source": "Fanyi"}]     JSON (``.json``)

A target equal to the source, or empty, keeps the term as it is (a brand, a code identifier). A JSON entry
may say ``"case_sensitive": true`` (by default a term matches whatever its case) and ``"target_language":
"zh"`` (the entry holds only for rows into that language). A glossary that cannot be used is a
``GlossaryError`` naming the line or entry: an empty source, the same source twice for one target
language, a line without its tab.

Terms are found in a sentence longest first, leftmost first, never inside a word: a term that starts or ends
with a letter or digit of a script written with spaces (Latin, Cyrillic, Greek, ...) needs no such letter
beside it there; a Chinese or Japanese term may stand anywhere (those scripts do not space their words).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

# Han, kana, and their compatibility and extension blocks: words are not spaced apart.
_UNSPACED = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
SPACED_WORD = re.compile(f"[^\\W{_UNSPACED}]")  # a letter, digit or '_' of a script that spaces its words
MAX_TERMS = 100_000


class GlossaryError(ValueError):
    """A glossary that cannot be used; the message names the entry and the fix."""


@dataclass(frozen=True)
class Term:
    source: str
    target: str  # equal to ``source``: kept as it is
    case_sensitive: bool = False
    target_language: str | None = None  # only for rows into this language (None: every target)

    @property
    def kept(self) -> bool:
        return self.target == self.source


@dataclass(frozen=True)
class Match:
    """A term found in a sentence: where, and the words as the sentence writes them."""

    start: int
    end: int
    term: Term
    words: str


@dataclass(frozen=True)
class Glossary:
    terms: tuple[Term, ...]
    sha256: str  # of the file as read: what a job's manifest and results name

    @classmethod
    def parse(cls, data: bytes, name: str) -> Glossary:
        """The glossary in ``data``, a file called ``name`` (its suffix says the format)."""
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise GlossaryError(f"{name} is not UTF-8 (byte {err.start}): save it as UTF-8") from None
        entries = _json_entries(text, name) if name.endswith(".json") else _table_entries(text, name)
        if len(entries) > MAX_TERMS:
            raise GlossaryError(f"{name} has {len(entries):,} terms, more than {MAX_TERMS:,}: split the job")
        terms = tuple(_term(entry, where, name) for where, entry in entries)
        _check_unique(terms, [where for where, _ in entries], name)
        return cls(terms, hashlib.sha256(data).hexdigest())

    def into(self, target_language: str | None) -> Glossary:
        """The terms that hold for rows into ``target_language``."""
        terms = tuple(t for t in self.terms if t.target_language in (None, target_language))
        return self if len(terms) == len(self.terms) else Glossary(terms, self.sha256)

    def find(self, sentence: str) -> list[Match]:
        """The terms in ``sentence``, in order, none overlapping: at each place the longest that matches."""
        found = [match for term, pattern in self._candidates(sentence) for match in _found(term, pattern, sentence)]
        found.sort(key=lambda m: (m.start, m.start - m.end))
        kept: list[Match] = []
        for match in found:
            if not kept or match.start >= kept[-1].end:
                kept.append(match)
        return kept

    def _candidates(self, sentence: str) -> list[tuple[Term, re.Pattern[str]]]:
        """The terms that may be in ``sentence``: those whose first two letters (in lower case) are there. A
        thousand terms cost a sentence a few dozen dictionary lookups, not a thousand searches."""
        lowered = sentence.lower()
        if len(lowered) != len(sentence):  # a letter whose lower case is longer (İ): every term is a candidate
            return [entry for entries in self._index.values() for entry in entries]
        pairs = {lowered[k : k + 2] for k in range(len(lowered))}  # the last one is a single letter
        return [entry for pair in pairs for entry in self._index.get(pair, ())]

    @cached_property
    def _index(self) -> dict[str, list[tuple[Term, re.Pattern[str]]]]:
        """Each term and its pattern, by its first two letters in lower case."""
        index: dict[str, list[tuple[Term, re.Pattern[str]]]] = {}
        for term in self.terms:  # the words alone: a pattern with lookarounds takes milliseconds to compile
            pattern = re.compile(re.escape(term.source), 0 if term.case_sensitive else re.IGNORECASE)
            index.setdefault(term.source[:2].lower(), []).append((term, pattern))
        return index


def _found(term: Term, pattern: re.Pattern[str], sentence: str) -> list[Match]:
    """Where ``term`` stands in ``sentence`` as a whole word: an edge that is a letter of a spaced script has no
    such letter beside it (a place that fails is passed by one character, not by the whole match)."""
    starts, ends = SPACED_WORD.match(term.source[0]), SPACED_WORD.match(term.source[-1])
    found, at = [], 0
    while (hit := pattern.search(sentence, at)) is not None:
        start, end = hit.span()
        inside = (starts and start > 0 and SPACED_WORD.match(sentence[start - 1])) or (
            ends and end < len(sentence) and SPACED_WORD.match(sentence[end])
        )
        if not inside:
            found.append(Match(start, end, term, hit.group()))
        at = start + 1
    return found


def _table_entries(text: str, name: str) -> list[tuple[str, dict[str, Any]]]:
    delimiter = "," if name.endswith(".csv") else "\t"
    entries = []
    for number, row in enumerate(csv.reader(io.StringIO(text), delimiter=delimiter), 1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if len(row) > 2:
            raise GlossaryError(f"{name} line {number}: {len(row)} fields; a line is source{_shown(delimiter)}target")
        entries.append((f"line {number}", {"source": row[0], "target": row[1] if len(row) > 1 else ""}))
    return entries


def _shown(delimiter: str) -> str:
    return "<TAB>" if delimiter == "\t" else delimiter


def _json_entries(text: str, name: str) -> list[tuple[str, dict[str, Any]]]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise GlossaryError(f"{name} is not JSON (line {err.lineno}: {err.msg})") from None
    if not isinstance(raw, list) or not all(isinstance(entry, dict) for entry in raw):
        raise GlossaryError(f'{name}: a JSON glossary is a list of {{"source": ..., "target": ...}} objects')
    return [(f"entry {number}", entry) for number, entry in enumerate(raw, 1)]


FIELDS = {"source": str, "target": str, "case_sensitive": bool, "target_language": str}


def _term(entry: dict[str, Any], where: str, name: str) -> Term:
    unknown = set(entry) - set(FIELDS)
    if unknown:
        raise GlossaryError(f"{name} {where}: unknown field {sorted(unknown)[0]!r} (fields: {', '.join(FIELDS)})")
    for key, kind in FIELDS.items():
        if entry.get(key) is not None and not isinstance(entry[key], kind):
            raise GlossaryError(f"{name} {where}: {key} must be {kind.__name__}")
    source, target = (entry.get("source") or "").strip(), (entry.get("target") or "").strip()
    if not source:
        raise GlossaryError(f"{name} {where}: the source term is empty")
    return Term(source, target or source, bool(entry.get("case_sensitive")), entry.get("target_language") or None)


def _check_unique(terms: tuple[Term, ...], places: list[str], name: str) -> None:
    """The same source (as it matches: case folded unless case-sensitive) twice for one target language is
    refused: which target would hold?"""
    seen: dict[tuple[str, str | None], str] = {}
    for term, where in zip(terms, places):
        key = (term.source if term.case_sensitive else term.source.casefold(), term.target_language)
        if key in seen:
            raise GlossaryError(f"{name} {where}: {term.source!r} is already a term ({seen[key]}): keep one")
        seen[key] = where
