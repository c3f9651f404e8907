"""Lexically constrained beam search (``worker.engine.constrained``) on the hand-written fake decoder of
``test_search.py``: ids 0 start, 1 EOS, 2-5 words; a table maps a history to the next token's probabilities."""

from __future__ import annotations

import numpy as np
import pytest

from tests.worker.engine.test_search import FakeInference, search
from worker.engine.constrained import ConstrainedBeamDecoder, Phrases, Progress, _allocated, _Candidate
from worker.engine.search import DecodingOptions, SearchResult, Vocabulary, generate

VOCAB = Vocabulary(decoder_start=0, eos=1)
# The model wants "2 EOS" and nothing else: a phrase of 4 and 5 is far from what it would write.
SHORT = {(0,): {2: 0.9}, (0, 2): {1: 0.9}}


def constrained(
    inference: FakeInference, phrases: list[Phrases], beams: int = 2, max_new_tokens: int = 8
) -> list[SearchResult]:
    options = DecodingOptions(beam_size=beams, max_new_tokens=max_new_tokens)
    decoder = ConstrainedBeamDecoder(phrases, options, VOCAB)
    return generate(inference, inference.state(len(phrases)), options, VOCAB, decoder=decoder)


def holds(tokens: list[int], way: tuple[int, ...]) -> bool:
    return any(tuple(tokens[i : i + len(way)]) == way for i in range(len(tokens)))


def test_progress_follows_a_phrase_gives_it_up_and_starts_it_again() -> None:
    phrases: Phrases = (((2, 3, 4),), ((5,), (3, 5)))  # the second phrase may be written two ways
    p = Progress().after(2, phrases)
    assert (p.phrase, p.at, p.tokens, p.advancing(phrases)) == (0, 1, 1, {3})
    p = p.after(3, phrases)
    assert (p.tokens, p.advancing(phrases)) == (2, {4})
    given_up = p.after(2, phrases)  # not 4: the phrase is given up, and 2 starts it again
    assert (given_up.phrase, given_up.at, given_up.tokens) == (0, 1, 1)
    done = p.after(4, phrases)
    assert (done.written, done.tokens, done.phrase, done.complete(phrases)) == ({0}, 3, -1, False)
    assert done.advancing(phrases) == {5, 3}  # each way of the phrase not written
    other_way = done.after(3, phrases).after(5, phrases)
    assert other_way.complete(phrases) and other_way.tokens == 5
    assert Progress().after(1, phrases) == Progress()


def test_the_beam_is_filled_from_the_banks_in_turn_most_advanced_first() -> None:
    def c(score: float, bank: int) -> _Candidate:
        return _Candidate(score, 0, 2, Progress(), bank)

    order = _allocated([c(-1.0, 0), c(-0.5, 0), c(-9.0, 2), c(-3.0, 1), c(-0.1, 0), c(-8.0, 2)])
    assert [(x.bank, x.score) for x in order] == [(2, -8.0), (1, -3.0), (0, -0.1), (2, -9.0), (0, -0.5), (0, -1.0)]


@pytest.mark.parametrize("beams", [2, 4])
def test_every_hypothesis_writes_its_phrase_before_it_ends(beams: int) -> None:
    phrase = ((4, 5),)
    (result,) = constrained(FakeInference(SHORT), [(phrase,)], beams=beams)
    assert result.hypotheses and all(h.complete and holds(h.tokens, (4, 5)) for h in result.hypotheses)
    assert result.hypotheses[0].tokens[-1] == 1
    (plain,) = search(FakeInference(SHORT), beam_size=beams)
    assert plain.hypotheses[0].tokens == [2, 1]  # what the model writes when nothing is asked of it


def test_a_phrase_the_model_writes_anyway_changes_nothing() -> None:
    table = {(0,): {2: 0.6}, (0, 2): {3: 0.7}, (0, 2, 3): {1: 0.9}}
    (result,) = constrained(FakeInference(table), [(((3,),),)], beams=4)
    (plain,) = search(FakeInference(table), beam_size=4)
    assert result.hypotheses[0].tokens == plain.hypotheses[0].tokens == [2, 3, 1]
    assert result.hypotheses[0].score == pytest.approx(plain.hypotheses[0].score)


def test_each_sentence_of_a_batch_writes_its_own_phrases() -> None:
    phrases = [(((4, 5),),), (((3,),), ((5,),)), (((2,),),)]
    results = constrained(FakeInference(SHORT), phrases, beams=3)
    for result, wanted in zip(results, phrases):
        best = result.hypotheses[0]
        assert best.complete and all(holds(best.tokens, way) for (way,) in wanted), (best, wanted)


def test_a_length_limit_too_short_for_the_phrase_says_the_hypothesis_is_incomplete() -> None:
    (result,) = constrained(FakeInference(SHORT), [(((4, 5, 3, 2),),)], beams=2, max_new_tokens=2)
    assert result.hit_length_limit and not result.hypotheses[0].complete


def test_a_constrained_search_needs_phrases() -> None:
    with pytest.raises(ValueError, match="needs phrases"):
        ConstrainedBeamDecoder([()], DecodingOptions(beam_size=2), VOCAB)
    assert np.array_equal(ConstrainedBeamDecoder([(((2,),),)], DecodingOptions(beam_size=2), VOCAB).sequences(), [[0]])
