"""The search on a fake decoder whose next-token probabilities are written by hand, so every expected id
and score below is worked out from the table next to it.

Ids: 0 is the decoder start, 1 is EOS, 2-5 are words. A table maps the tokens so far (decoder start
included) to the next token's probabilities; the mass they leave is spread evenly over the other ids,
and a history the table lacks gets ``DEFAULT``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from worker.engine.inference import EncoderState, Step
from worker.engine.search import (
    BeamDecoder,
    DecodingOptions,
    Finished,
    ForcedBos,
    ForcedEos,
    GreedyDecoder,
    Hypothesis,
    LengthPenalty,
    LogitFilters,
    MinLength,
    NoRepeatNGram,
    RepetitionPenalty,
    SearchResult,
    SuppressTokens,
    Vocabulary,
    for_batch,
    generate,
    log_softmax,
)

V, START, EOS = 6, 0, 1
VOCAB = Vocabulary(decoder_start=START, eos=EOS)
DEFAULT = {EOS: 0.5}  # the other five ids get 0.1 each
Table = dict[tuple[int, ...], dict[int, float]]


def logprobs(probs: dict[int, float]) -> np.ndarray:
    """Log-probabilities over the vocabulary: ``probs``, and what they leave shared by the other ids."""
    rest = [i for i in range(V) if i not in probs]
    left = max(1.0 - sum(probs.values()), 1e-9 * len(rest))
    p = np.array([probs.get(i, left / len(rest) if rest else 0.0) for i in range(V)])
    return np.log(p).astype(np.float32)


class FakeInference:
    """An ``Inference`` whose cache is each row's history and whose logits come from ``table`` (the
    same for every sentence) or, per sentence, from ``tables``. ``steps`` records (rows, top_k)."""

    def __init__(self, table: Table | None = None, tables: list[Table] | None = None, logits: np.ndarray | None = None):
        self.tables = tables or [table or {}]
        self.fixed = logits
        self.steps: list[tuple[int, int | None]] = []
        self.caches: list[tuple[int, int]] = []  # (slots, positions) of each cache made

    def state(self, batch: int) -> EncoderState:
        return EncoderState([np.arange(batch)], np.ones((batch, 1), dtype=np.int64))

    def step(self, tokens, state, past, top_k=None, bans=None) -> Step:
        self.steps.append((len(tokens), top_k))
        history = np.concatenate([past[0], tokens], axis=1)
        beams = len(tokens) // len(state.mask)
        sentences = state.cross[0][np.arange(len(tokens)) // beams]
        logits = np.stack([self._logits(int(s), tuple(h)) for s, h in zip(sentences, history.tolist())])
        if not top_k:
            return Step(logits, None, None, [history])
        allowed = log_softmax(logits)
        if bans is not None:
            for row, (ids, values) in enumerate(zip(*bans)):
                np.add.at(allowed[row], ids, values)
        ids = np.argsort(-allowed, axis=1, kind="stable")[:, :top_k]
        mass = np.log(np.exp(allowed).sum(axis=1, keepdims=True))  # the graph's candidates: renormalized
        return Step(np.take_along_axis(allowed - mass, ids, axis=1), ids, mass, [history])

    def _logits(self, sentence: int, history: tuple[int, ...]) -> np.ndarray:
        if self.fixed is not None:
            return self.fixed
        table = self.tables[sentence % len(self.tables)]
        return logprobs(table.get(history, DEFAULT))

    def empty_past(self, rows: int, positions: int, slots: int) -> list[np.ndarray]:
        self.caches.append((slots, positions))
        return [np.zeros((rows, 0), dtype=np.int64)]

    def reorder(self, past: list[np.ndarray], rows: np.ndarray) -> list[np.ndarray]:
        return [past[0][rows]]

    def select(self, state: EncoderState, sentences: np.ndarray) -> EncoderState:
        return EncoderState([state.cross[0][sentences]], state.mask[sentences])


def search(
    inference: FakeInference, batch: int = 1, vocab: Vocabulary = VOCAB, forced_bos: int | None = None, **options
) -> list[SearchResult]:
    options.setdefault("max_new_tokens", 8)
    return generate(inference, inference.state(batch), DecodingOptions(**options), vocab, forced_bos)


def best(result: SearchResult) -> tuple[list[int], float]:
    return result.hypotheses[0].tokens, result.hypotheses[0].score


L = math.log


# -- greedy ---------------------------------------------------------------------------------------


def test_greedy_takes_the_likeliest_token_each_step_and_scores_the_mean_log_probability() -> None:
    table = {(0,): {2: 0.6, 3: 0.3}, (0, 2): {3: 0.7}, (0, 2, 3): {EOS: 0.8}}
    ((tokens, score),) = [best(r) for r in search(FakeInference(table))]
    assert tokens == [2, 3, EOS]
    assert score == pytest.approx((L(0.6) + L(0.7) + L(0.8)) / 3, abs=1e-6)


def test_greedy_sentences_leave_the_batch_when_they_end_and_come_back_in_input_order() -> None:
    tables = [
        {(0,): {EOS: 0.9}},
        {(0,): {2: 0.9}, (0, 2): {EOS: 0.9}},
        {(0,): {3: 0.9}, (0, 3): {3: 0.9}, (0, 3, 3): {3: 0.9}},
    ]
    fake = FakeInference(tables=tables)
    results = search(fake, batch=3, max_new_tokens=3)
    assert [r.hypotheses[0].tokens for r in results] == [[EOS], [2, EOS], [3, 3, 3]]
    assert [r.hit_length_limit for r in results] == [False, False, True]
    assert [rows for rows, _ in fake.steps] == [3, 2, 1]


def test_greedy_divides_by_the_length_to_the_power_of_the_penalty() -> None:
    table = {(0,): {2: 0.6}, (0, 2): {EOS: 0.5}}
    (result,) = search(FakeInference(table), length_penalty=2.0)
    assert best(result) == ([2, EOS], pytest.approx((L(0.6) + L(0.5)) / 2**2, abs=1e-6))


# -- beam -----------------------------------------------------------------------------------------

# Greedy takes 2 (0.5) and then can only end badly; beam 2 keeps 3 (0.4) alive and finds 3 EOS.
DETOUR: Table = {(0,): {2: 0.5, 3: 0.4}, (0, 2): {4: 0.35, 5: 0.25}, (0, 3): {EOS: 0.9}, (0, 2, 4): {EOS: 0.5}}


def test_greedy_misses_what_beam_search_finds() -> None:
    (greedy,) = search(FakeInference(DETOUR), max_new_tokens=3)
    (beam,) = search(FakeInference(DETOUR), beam_size=2, max_new_tokens=3)
    assert best(greedy)[0] == [2, 4, EOS]
    assert best(beam) == ([3, EOS], pytest.approx((L(0.4) + L(0.9)) / 2, abs=1e-6))


def test_beam_search_returns_num_hypotheses_best_first() -> None:
    (result,) = search(FakeInference(DETOUR), beam_size=2, num_hypotheses=2, max_new_tokens=3)
    assert [h.tokens for h in result.hypotheses] == [[3, EOS], [2, 4, EOS]]
    assert result.hypotheses[1].score == pytest.approx((L(0.5) + L(0.35) + L(0.5)) / 3, abs=1e-6)


def test_beam_search_scores_one_row_per_sentence_first_then_beams_and_drops_ended_sentences() -> None:
    tables = [{(0,): {EOS: 0.7, 2: 0.2}, (0, 2): {EOS: 0.9}}, DETOUR]
    fake = FakeInference(tables=tables)
    results = search(fake, batch=2, beam_size=2, max_new_tokens=3)
    assert [best(r)[0] for r in results] == [[EOS], [3, EOS]]
    assert fake.steps[0] == (2, 4)  # one row per sentence, 2K candidates each
    assert fake.steps[1] == (4, 4)  # both sentences' two beams
    assert all(rows == 2 for rows, _ in fake.steps[2:])  # sentence 0 is done: only sentence 1's beams


@pytest.mark.parametrize(("beams", "slots"), [(1, 3), (2, 6)])
def test_the_cache_is_made_once_with_a_slot_per_row_and_a_position_per_step(beams: int, slots: int) -> None:
    """Made at the batch's full size, the cache is never grown by a copy while the batch runs; a step
    writes one position and the last new token is never fed back."""
    fake = FakeInference(logits=logprobs({2: 0.9}))
    search(fake, batch=3, beam_size=beams, max_new_tokens=5, min_new_tokens=5)
    assert fake.caches == [(slots, 5)]
    assert len(fake.steps) == 5


# Early stopping, beam 2, length penalty 1. Step 1: EOS (0.3) is in the top 2 and finishes at log 0.3;
# 2 and 3 run. Step 2: 3 EOS finishes at log(0.2 * 0.9) / 2 = -0.857: two finished, worst -1.204; 2 4
# runs at log(0.5 * 0.8) = -0.916. Step 3: 2 4 EOS finishes at log(0.5 * 0.8 * 0.9) / 3 = -0.340, the
# best; the running 2 4 x stand at log(0.4 * 0.02) = -4.83, worst finished -0.857.
EARLY: Table = {
    (0,): {2: 0.5, EOS: 0.3, 3: 0.2},
    (0, 2): {4: 0.8, EOS: 0.2},
    (0, 3): {EOS: 0.9, 5: 0.1},
    (0, 2, 4): {EOS: 0.9},
}


@pytest.mark.parametrize(
    ("early_stopping", "steps", "tokens", "why"),
    [
        (True, 2, [3, EOS], "stops once two hypotheses have finished"),
        (
            False,
            3,
            [2, 4, EOS],
            "after step 2, -0.916 / 2 could beat -1.204; after step 3, -4.83 / 3 cannot beat -0.857",
        ),
        (
            "never",
            4,
            [2, 4, EOS],
            "running beams count at the longest length: -4.83 / 8 could beat -0.857, -7.13 / 8 not",
        ),
    ],
)
def test_early_stopping_decides_when_a_sentence_is_done(early_stopping, steps, tokens, why) -> None:
    fake = FakeInference(EARLY)
    (result,) = search(fake, beam_size=2, max_new_tokens=8, early_stopping=early_stopping)
    assert (len(fake.steps), best(result)[0]) == (steps, tokens), why


# Length penalty, beam 2: EOS finishes at step 1 with log 0.4; 2 EOS at step 2 with log(0.6 * 0.55).
PENALTY: Table = {(0,): {2: 0.6, EOS: 0.4}, (0, 2): {EOS: 0.55, 3: 0.45}}


def test_eos_finishes_a_hypothesis_only_from_the_top_beams() -> None:
    """EOS is third at step 1, outside the top 2: generate drops it, though at log 0.25 (no length
    penalty) it would beat both hypotheses that finish at step 2."""
    table = {(0,): {2: 0.4, 3: 0.35, EOS: 0.25}, (0, 2): {EOS: 0.5}, (0, 3): {EOS: 0.5}}
    (result,) = search(FakeInference(table), beam_size=2, num_hypotheses=2, length_penalty=0.0)
    assert [h.tokens for h in result.hypotheses] == [[2, EOS], [3, EOS]]
    assert result.hypotheses[0].score == pytest.approx(L(0.4 * 0.5), abs=1e-6)


def test_the_length_penalty_ranks_finished_hypotheses() -> None:
    (raw,) = search(FakeInference(PENALTY), beam_size=2, length_penalty=0.0)
    (per_token,) = search(FakeInference(PENALTY), beam_size=2, length_penalty=1.0)
    assert best(raw) == ([EOS], pytest.approx(L(0.4), abs=1e-6))  # -0.916 beats -1.109
    assert best(per_token) == ([2, EOS], pytest.approx(L(0.6 * 0.55) / 2, abs=1e-6))  # -0.554 beats -0.916


def test_length_penalty_divides_in_the_scores_own_precision() -> None:
    rank = LengthPenalty(0.6)
    assert rank(np.float64(-6.0), 3) == -6.0 / 3**0.6
    assert rank(np.float32(-6.0), 3).dtype == np.float32
    assert rank(np.float32(-6.0), 3) == np.float32(-6.0) / np.float32(3**0.6)


def test_finished_hypotheses_keep_the_best_size_best_first_and_the_earlier_of_equals() -> None:
    pool = Finished(2)
    pool.add([Hypothesis([2], -1.0)])
    assert not pool.full
    pool.add([Hypothesis([3], -0.5), Hypothesis([4], -1.0), Hypothesis([5], -2.0)])
    assert pool.full and [h.tokens for h in pool.hypotheses] == [[3], [2]] and pool.worst == -1.0


# -- logit filters --------------------------------------------------------------------------------


def test_forced_bos_is_the_first_token_and_scores_zero() -> None:
    assert [ForcedBos(4).forced_token(n) for n in (1, 2)] == [4, None]
    table = {(0,): {2: 0.9}, (0, 4): {EOS: 0.8}}
    for beams in (1, 2):
        fake = FakeInference(table)
        (result,) = search(fake, forced_bos=4, beam_size=beams)
        assert best(result) == ([4, EOS], pytest.approx(L(0.8) / 2, abs=1e-6))
        assert fake.steps[0] == (1, 1)  # the forced step asks the graph for nothing it would use


def test_forced_eos_ends_every_hypothesis_at_the_length_limit() -> None:
    assert [ForcedEos(EOS, max_length=4).forced_token(n) for n in (2, 3)] == [None, EOS]
    vocab = Vocabulary(decoder_start=START, eos=EOS, forced_eos=EOS)
    for beams in (1, 2):
        (result,) = search(FakeInference({(0,): {2: 0.9}}), vocab=vocab, beam_size=beams, max_new_tokens=2)
        assert result.hypotheses[0].tokens == [2, EOS] and result.hit_length_limit


def test_suppressed_tokens_are_never_generated() -> None:
    assert SuppressTokens([2]).banned(np.zeros((2, 1), dtype=np.int64)) == [{2}, {2}]
    vocab = Vocabulary(decoder_start=START, eos=EOS, suppressed=(2,))
    for beams in (1, 2):
        (result,) = search(FakeInference({(0,): {2: 0.9, 3: 0.06}, (0, 3): {EOS: 0.9}}), vocab=vocab, beam_size=beams)
        assert best(result)[0] == [3, EOS]


def test_no_repeat_ngram_bans_the_token_that_would_repeat_an_ngram() -> None:
    assert NoRepeatNGram(2).banned(np.array([[0, 2, 3, 2], [0, 2, 3, 4]])) == [{3}, set()]
    assert NoRepeatNGram(3).banned(np.array([[0, 2, 3, 4, 2, 3]])) == [{4}]
    assert NoRepeatNGram(3).banned(np.array([[0]])) == [set()]
    table = {(0,): {2: 0.9}, (0, 2): {3: 0.9}, (0, 2, 3): {2: 0.9}, (0, 2, 3, 2): {3: 0.9, 4: 0.06}}
    (result,) = search(FakeInference(table), no_repeat_ngram_size=2, max_new_tokens=4)
    assert best(result)[0] == [2, 3, 2, 4]


def test_min_length_bans_eos_until_enough_tokens() -> None:
    assert MinLength(EOS, min_length=3).banned(np.zeros((1, 2), dtype=np.int64)) == [{EOS}]
    assert MinLength(EOS, min_length=3).banned(np.zeros((1, 3), dtype=np.int64)) == [set()]
    table = {(0,): {EOS: 0.9, 2: 0.06}, (0, 2): {EOS: 0.9, 3: 0.06}, (0, 2, 3): {EOS: 0.9}}
    (result,) = search(FakeInference(table), min_new_tokens=2)
    assert best(result)[0] == [2, 3, EOS]


def test_repetition_penalty_rescales_the_tokens_already_generated() -> None:
    scores = np.array([[2.0, -1.0, 0.5, 3.0]], dtype=np.float32)
    RepetitionPenalty(2.0).apply(scores, np.array([[0, 1]]))
    assert scores.tolist() == [[1.0, -2.0, 0.5, 3.0]]


def test_a_rescaling_filter_takes_the_full_vocabulary() -> None:
    fake = FakeInference(DETOUR)
    search(fake, repetition_penalty=1.3, max_new_tokens=3)
    assert all(top_k is None for _, top_k in fake.steps)
    fake = FakeInference(DETOUR)
    search(fake, no_repeat_ngram_size=2, max_new_tokens=3)
    assert all(top_k == 1 for _, top_k in fake.steps)


def test_greedy_filters_raw_logits_and_beam_log_probabilities() -> None:
    """Token 2 (logit 2.0) was generated before, token 3 has 1.5: with penalty 1.5 the raw logit 2.0
    becomes 1.33 < 1.5, but its log-probability -0.47 becomes -0.71 > -0.97 (token 3's)."""
    logits = np.array([[-9.0, -9.0, 2.0, 1.5, -9.0, -9.0]], dtype=np.float32)
    filters = LogitFilters([RepetitionPenalty(1.5)])
    sequences = np.array([[START, 2]])
    greedy = GreedyDecoder(1, DecodingOptions(), VOCAB).from_logits(logits, sequences, filters)
    beam = BeamDecoder(1, DecodingOptions(beam_size=2), VOCAB).from_logits(logits, sequences, filters)
    assert greedy.ids.tolist() == [[3]]
    assert int(beam.ids[0, beam.values[0].argmax()]) == 2


def test_renormalize_divides_by_what_the_bans_left() -> None:
    vocab = Vocabulary(decoder_start=START, eos=EOS, suppressed=(2,))
    table = {(0,): {2: 0.5, EOS: 0.4}}
    (plain,) = search(FakeInference(table), vocab=vocab)
    (renormalized,) = search(FakeInference(table), vocab=vocab, renormalize=True)
    assert best(plain) == ([EOS], pytest.approx(L(0.4), abs=1e-6))
    assert best(renormalized) == ([EOS], pytest.approx(L(0.4 / 0.5), abs=1e-6))


def test_filters_come_in_generates_order_and_the_first_forced_token_wins() -> None:
    options = DecodingOptions(repetition_penalty=1.2, no_repeat_ngram_size=3, min_new_tokens=1, max_new_tokens=1)
    vocab = Vocabulary(decoder_start=START, eos=EOS, suppressed=(5,), forced_eos=EOS)
    filters = LogitFilters.of(options, vocab, forced_bos=4)
    kinds = [RepetitionPenalty, NoRepeatNGram, MinLength, ForcedBos, ForcedEos, SuppressTokens]
    assert [type(f) for f in filters.filters] == kinds
    assert filters.forced_token(1) == 4  # max_length 2: both force at length 1
    assert LogitFilters.of(DecodingOptions(), VOCAB, None).filters == []


def test_bans_reach_the_graph_padded_to_the_longest_row_at_an_id_the_row_does_not_ban() -> None:
    filters = LogitFilters([SuppressTokens([5]), NoRepeatNGram(2)])
    ids, values = filters.ban_arrays(np.array([[0, 2, 3, 2, 4, 2], [0, 7, 0, 7, 0, 7], [0, 2, 3, 4, 6, 8]]))
    assert ids.tolist() == [[3, 4, 5], [0, 5, 1], [5, 0, 0]]  # the graph writes a padding id's own logit back
    assert values.tolist() == [[-np.inf] * 3, [-np.inf, -np.inf, 0.0], [-np.inf, 0.0, 0.0]]


# -- options for a batch --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "longest", "positions", "limits"),
    [
        (dict(max_new_tokens=100), 10, None, (100, 0)),
        (dict(max_new_tokens=100, max_length_ratio=1.5), 10, None, (15, 0)),
        (dict(max_new_tokens=100, min_new_tokens=20, max_length_ratio=1.5), 10, None, (20, 20)),
        (dict(max_new_tokens=100, max_length_ratio=0.25), 10, None, (3, 0)),
        (dict(max_new_tokens=100, max_length_ratio=0.01), 10, None, (1, 0)),
        (dict(max_new_tokens=400, min_new_tokens=300), 10, 128, (128, 128)),
        (dict(max_new_tokens=400, max_length_ratio=2.0), 100, 128, (128, 0)),
    ],
)
def test_a_batch_caps_new_tokens_by_its_longest_source_and_the_positions(options, longest, positions, limits) -> None:
    resolved = for_batch(DecodingOptions(**options), longest_source=longest, max_positions=positions)
    assert (resolved.max_new_tokens, resolved.min_new_tokens) == limits
