"""Segmentation: the labelled lines, long lines, and invariants on any text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.segmentation_cases import CASES, GROWN, HELD_OUT
from benchmarks.segmenters import score
from worker.documents.segment import MAX_RUN, segment


@pytest.mark.parametrize(("text", "expected"), CASES + GROWN)
def test_labelled_lines_split_as_labelled(text: str, expected: list[str]) -> None:
    assert [s.text for s in segment(text)] == expected


@pytest.mark.parametrize("cases", [GROWN, HELD_OUT], ids=["grown", "held-out"])
def test_boundary_f1_is_at_least_099(cases: list[tuple[str, list[str]]]) -> None:
    assert score(lambda text: [s.text for s in segment(text)], cases)["f1"] >= 0.99


def test_empty_and_blank_documents_have_no_sentences() -> None:
    assert segment("") == [] and segment(" \n\n\t \n") == []


def test_sentences_never_cross_lines_and_keep_their_line_numbers() -> None:
    doc = "Shipping Information\n\nFree delivery. Pay later.\nThank you"
    assert [(s.text, s.line) for s in segment(doc)] == [
        ("Shipping Information", 0),
        ("Free delivery.", 2),
        ("Pay later.", 2),
        ("Thank you", 3),
    ]


PARTS = [
    *"ab .?!\n,$1。",
    "Dr. ",
    "e.g. ",
    "3.5 ",
    "Tom has 3 apples. ",
    "\n\n",
    "Ft. ",
    "https://x.org/a?b=1 ",
    "a@b.cn",
]
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
    assert all(covered[i] or document[i].isspace() for i in range(len(document)))


def test_a_long_line_is_cut_at_its_sentence_ends_only() -> None:
    sentences = segment("Tom has 3 apples. " * 600)  # 10,800 characters: over what pysbd gets at once
    assert [s.text for s in sentences] == ["Tom has 3 apples."] * 600
    assert not any(s.cut for s in sentences)


def test_a_line_with_no_sentence_end_is_cut_at_spaces_and_says_so() -> None:
    line = "word " * (MAX_RUN // 2)  # 50,000 characters, not one sentence end
    sentences = segment(line)
    assert "".join(s.text for s in sentences).replace(" ", "") == line.replace(" ", "")
    assert all(s.cut for s in sentences) and max(len(s.text) for s in sentences) <= MAX_RUN
