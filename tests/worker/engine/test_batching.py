"""Token-budget batching invariants."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from worker.engine.batching import plan_batches

lengths_lists = st.lists(st.integers(min_value=1, max_value=300), max_size=60)


@given(lengths_lists, st.integers(min_value=1, max_value=5000), st.integers(min_value=1, max_value=5))
def test_every_sentence_is_in_exactly_one_batch_within_budget(lengths, budget, beams) -> None:
    batches = plan_batches(lengths, max_tokens=budget, beams=beams, target_estimate=lambda n: 2 * n)
    seen = sorted(i for b in batches for i in b.indices)
    assert seen == list(range(len(lengths)))
    for b in batches:
        assert len(b.indices) == 1 or b.cost <= budget
        assert [lengths[i] for i in b.indices] == sorted((lengths[i] for i in b.indices), reverse=True)


def test_empty_input_gives_no_batches() -> None:
    assert plan_batches([], max_tokens=100, beams=4, target_estimate=lambda n: n) == []


def test_short_sentences_share_a_batch_and_long_ones_do_not() -> None:
    batches = plan_batches([10, 10, 10, 200], max_tokens=400, beams=1, target_estimate=lambda n: n)
    assert [b.indices for b in batches] == [(3,), (0, 1, 2)]


def test_a_smaller_decoder_takes_more_tokens_a_batch_up_to_a_cap() -> None:
    from worker.engine.translator import MAX_TOKENS, default_budget

    assert default_budget({"decoder_layers": 6, "d_model": 512}) == MAX_TOKENS  # opus-mt, t5-small
    assert default_budget({"decoder_layers": 12, "d_model": 1024}) == MAX_TOKENS  # larger: never below
    assert default_budget({"decoder_layers": 6, "d_model": 256}) == 2 * MAX_TOKENS  # half the cache per token
    assert default_budget({"decoder_layers": 3, "d_model": 192}) == 3 * MAX_TOKENS  # the demo model: the cap
    assert default_budget({}) == MAX_TOKENS  # a manifest without the model's shape
