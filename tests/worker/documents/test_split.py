"""Splitting sentences longer than the window budget."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from worker.documents.segment import Sentence
from worker.documents.split import split_long


def words(text: str) -> int:
    return len(text.split())


def sentence(text: str, offset: int = 10) -> Sentence:
    return Sentence(offset, offset + len(text), 0, text)


def test_a_sentence_within_budget_is_left_alone() -> None:
    s = sentence("Tom has 3 apples.")
    assert split_long(s, words, 10) == [s]


def test_long_sentences_are_cut_at_clause_boundaries_first() -> None:
    s = sentence("Tom bought apples, Anna bought pears, and Peter bought nothing at all today.")
    pieces = split_long(s, words, 7)
    assert [p.text for p in pieces] == [
        "Tom bought apples, Anna bought pears,",
        "and Peter bought nothing at all today.",
    ]


def test_without_clauses_it_cuts_between_words_then_characters() -> None:
    assert [p.text for p in split_long(sentence("a b c d e f g"), words, 3)] == ["a b c", "d e f", "g"]
    assert [p.text for p in split_long(sentence("abcdefgh"), len, 3)] == ["abc", "def", "gh"]


@given(st.lists(st.sampled_from(["word", "x,", "long-word", "y;", "z"]), min_size=1, max_size=60), st.integers(1, 8))
def test_pieces_fit_cover_the_sentence_in_order_and_keep_offsets(parts, budget) -> None:
    text = " ".join(parts)
    s = sentence(text)
    pieces = split_long(s, len, budget * 4)
    assert "".join(p.text for p in pieces).replace(" ", "") == text.replace(" ", "")
    position = s.start
    for p in pieces:
        assert p.start >= position and text[p.start - s.start : p.end - s.start] == p.text
        assert len(p.text) <= budget * 4
        position = p.end
