"""Window planning invariants (property-based) and a few concrete plans."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.documents.windows import Window, plan_windows

token_lists = st.lists(st.integers(min_value=1, max_value=60), max_size=80)


@given(token_lists, st.integers(min_value=1, max_value=200), st.integers(0, 4))
def test_every_sentence_is_translated_by_exactly_one_window_in_order(tokens, budget, overlap) -> None:
    windows = plan_windows("d", tokens, budget=budget, overlap=overlap)
    responsible = [i for w in windows for i in range(w.first, w.last)]
    assert responsible == list(range(len(tokens)))
    for w in windows:
        assert 0 <= w.start <= w.first < w.last == w.end <= len(tokens)  # context precedes, never follows
        assert w.context_before <= overlap
        if max(tokens[w.first : w.last]) <= budget:
            assert sum(tokens[w.start : w.end]) <= budget or w.last - w.first == 1


def test_empty_document_gives_no_windows() -> None:
    assert plan_windows("d", [], budget=10, overlap=2) == []


def test_windows_pack_up_to_the_budget_with_context_before() -> None:
    assert plan_windows("d", [4, 4, 4, 4, 4], budget=10, overlap=1) == [
        Window("d", 0, 2, 0),
        Window("d", 2, 3, 1),
        Window("d", 3, 4, 1),
        Window("d", 4, 5, 1),
    ]


def test_a_sentence_over_the_budget_gets_a_window_of_its_own_without_context() -> None:
    assert plan_windows("d", [3, 50, 3], budget=10, overlap=2) == [
        Window("d", 0, 1, 0),
        Window("d", 1, 2, 0),
        Window("d", 2, 3, 0),
    ]


@pytest.mark.parametrize("bad", [dict(budget=0), dict(budget=5, overlap=-1)])
def test_bad_settings_are_refused(bad) -> None:
    with pytest.raises(ValueError):
        plan_windows("d", [1, 2], **bad)


def test_no_window_and_no_context_reaches_across_a_paragraph_start() -> None:
    tokens = [5, 5, 5, 5, 5, 5]
    windows = plan_windows("d", tokens, budget=12, overlap=1, breaks=[3, 5])
    assert [(w.start, w.first, w.last) for w in windows] == [(0, 0, 2), (1, 2, 3), (3, 3, 5), (5, 5, 6)]
    whole = plan_windows("d", tokens, budget=12, overlap=1)
    assert [(w.start, w.first, w.last) for w in whole][2:] == [(2, 3, 4), (3, 4, 5), (4, 5, 6)]  # context crosses
