"""Map window translations back to the sentences each window is responsible for, and rebuild layout.

Stitching by alignment: a window's output is split after sentence-final punctuation; when it has
exactly as many sentences as the window showed, the context sentences' translations are dropped and
the responsible ones kept. Otherwise the caller translates the responsible sentences again without
context (counted as ``restitched``), so a sentence's translation never appears twice or not at all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from worker.text.segment import Sentence
from worker.text.windows import Window

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


def join(left: str, right: str) -> str:
    """Two adjacent sentence translations as the target language writes them: no space around CJK."""
    return left + separator(left, right) + right


def separator(left: str, right: str) -> str:
    if not left or not right or _CJK.match(left[-1]) or _CJK.match(right[0]):
        return ""
    return " "


def assemble(document: str, sentences: Sequence[Sentence], translations: Sequence[str]):
    """The translated document with the source's line layout, and per-sentence ``(source, target)`` spans.

    What lies between sentences is kept verbatim when it holds markup or indents a line; a gap of
    only whitespace becomes the target language's separator (none between Chinese sentences).
    """
    out_lines: list[str] = []
    alignment: list[tuple[tuple[int, int], tuple[int, int]]] = []
    offset, line_start, i = 0, 0, 0
    for number, line in enumerate(document.split("\n")):
        text, cursor = "", line_start
        while i < len(sentences) and sentences[i].line == number:
            sentence, translation = sentences[i], translations[i]
            text = _bridge(text, document[cursor : sentence.start], translation)
            alignment.append(
                ((sentence.start, sentence.end), (offset + len(text), offset + len(text) + len(translation)))
            )
            text, cursor, i = text + translation, sentence.end, i + 1
        tail = document[cursor : line_start + len(line)]
        out_lines.append(text + tail if tail.strip() else text)
        offset += len(out_lines[-1]) + 1
        line_start += len(line) + 1
    return "\n".join(out_lines), alignment


def _bridge(text: str, gap: str, following: str) -> str:
    """``text`` so far plus what stands between it and the next translation."""
    if gap.strip() or not text:  # markup, or the line's indentation
        return text + gap
    return text + separator(text, following) if gap else text
