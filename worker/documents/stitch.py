"""Map window translations back to the sentences each window is responsible for, and rebuild the document.

Stitching by alignment: a window's output is split after sentence-final punctuation; when it has
exactly as many sentences as the window showed, the context sentences' translations are dropped and
the responsible ones kept. Otherwise the caller translates the responsible sentences again without
context (counted as ``restitched``), so a sentence's translation never appears twice or not at all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from worker.documents.marks import Unit
from worker.documents.segment import Sentence
from worker.documents.windows import Window

# A target sentence ends after these, plus any closing quotes or brackets that follow.
_TARGET_END = re.compile(r"[。！？!?…]+[”’」』）)\]\"']*|\.[”’\"')\]]*(?=\s|$)")
_CJK = re.compile(r"[\u3000-\u303f\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


def split_target(text: str) -> list[str]:
    """Sentences of a translation, each keeping its final punctuation."""
    pieces, start = [], 0
    for match in _TARGET_END.finditer(text):
        piece = text[start : match.end()].strip()
        if piece:
            pieces.append(piece)
        start = match.end()
    tail = text[start:].strip()
    return [*pieces, tail] if tail else pieces


def stitch(window: Window, translation: str) -> list[str] | None:
    """Translations of the window's responsible sentences, or None when the output does not align."""
    shown = window.end - window.start
    sentences = split_target(translation)
    if shown == window.last - window.first == 1:
        return [translation.strip()]
    if len(sentences) != shown:
        return None
    return sentences[window.context_before : window.context_before + window.last - window.first]


def separator(left: str, right: str) -> str:
    """What goes between two adjacent sentence translations: no space around CJK, one otherwise."""
    if not left or not right or _CJK.match(left[-1]) or _CJK.match(right[0]):
        return ""
    return " "


def render(
    document: str,
    units: Sequence[Unit],
    sentences: Sequence[Sentence],
    translations: Sequence[str],
    plain: Sequence[str] | None = None,
) -> tuple[str, list[tuple[tuple[int, int], tuple[int, int]]]]:
    """The translated document and per sentence its ``(source span, target span)``.

    Each unit's region is replaced by its sentences' translations, joined as the target language
    writes them (no space around CJK, judged on the ``plain`` translations when markup was put back
    into ``translations``); everything between units (line breaks, indentation, block markup, code)
    is copied as it stands. ``sentences`` are in their unit's plain coordinates (``Sentence.line`` is
    the unit's index), in order."""
    plain = translations if plain is None else plain
    out: list[str] = []
    alignment: list[tuple[tuple[int, int], tuple[int, int]]] = []
    length, cursor, i = 0, 0, 0
    for number, unit in enumerate(units):
        out.append(document[cursor : unit.start])
        length += len(out[-1])
        text, previous = "", None
        while i < len(sentences) and sentences[i].line == number:
            sentence, translation = sentences[i], translations[i]
            if previous is not None and translation and unit.plain[previous : sentence.start]:
                text += separator(plain[i - 1], plain[i])
            source = (unit.source(sentence.start), unit.source(sentence.end))
            alignment.append((source, (length + len(text), length + len(text) + len(translation))))
            text, previous, i = text + translation, sentence.end, i + 1
        out.append(text)
        length += len(text)
        cursor = unit.end
    out.append(document[cursor:])
    return "".join(out), alignment
