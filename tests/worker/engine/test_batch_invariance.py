"""A sentence's translation does not depend on its batch: the ids and the score of every hypothesis are
bit-identical whether it is translated alone or among any other sentences, padded to any length. Sources
are padded to a multiple of 16 positions (``worker/engine/inference.py: pad_batch``): without it fp32's
sums over the source changed in their last bits with the padding, and quantization only hid that most of
the time. INT8 quantizes activations one row at a time, static INT8 on fixed calibrated grids
(``export_tools/precision.py``); with one scale per batch (ONNX Runtime's ``DynamicQuantizeLinear``) it
did not hold."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from export_tools.verify import sample_sentences
from tests.shared import Lazy
from worker.engine.translator import Translator

SENTENCES = [
    *sample_sentences(),
    "Tom bought 3 apples for $4.50 at the supermarket on Monday.",
    "Yes.",
    "The committee, which had met twice before the vote, published a long report on the budget.",
]


CASES = (
    "opus-mt-en-zh:fp32",
    *(f"{model}:{precision}" for model in ("opus-mt-en-zh", "t5-small") for precision in ("int8", "int8-static")),
)


@pytest.fixture(scope="module")
def translators(artifacts: Mapping[str, Path]) -> Mapping[str, Translator]:
    def make(case: str) -> Translator:
        model, precision = case.split(":")
        return Translator(artifacts[model], precision=precision)

    return Lazy(CASES, make)


@pytest.mark.parametrize("name", CASES)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    target=st.sampled_from(SENTENCES),
    others=st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=7),
    position=st.integers(0, 7),
)
def test_ids_and_scores_are_the_same_alone_and_in_any_batch(
    translators: Mapping[str, Translator], name: str, target: str, others: list[str], position: int
) -> None:
    translator = translators[name]
    options = translator.options(beam_size=3, num_hypotheses=3, max_new_tokens=12)
    framing = translator.framing(options, require_target=False)
    source = lambda text: translator.tokenizer.encode(text, framing)
    batch = [source(text) for text in others]
    batch.insert(min(position, len(batch)), source(target))
    (alone,) = translator.generate_ids([source(target)], options)
    among = translator.generate_ids(batch, options)[min(position, len(others))]
    assert [(h.tokens, h.score) for h in among.hypotheses] == [(h.tokens, h.score) for h in alone.hypotheses]


def test_fp32_scores_do_not_depend_on_how_far_the_batch_pads_a_sentence(translators: Mapping[str, Translator]) -> None:
    """Without padding to a multiple of 16, a quarter of such pairs differed in their last bits."""
    translator = translators["opus-mt-en-zh:fp32"]
    options = translator.options(beam_size=3, num_hypotheses=3, max_new_tokens=2)
    rng = np.random.default_rng(0)
    eos = translator.vocab.eos
    for _ in range(40):
        short, long = sorted(int(n) for n in rng.choice(np.arange(2, 120), 2, replace=False))
        target, other = ([int(t) for t in rng.integers(10, 5000, n - 1)] + [eos] for n in (short, long))
        (alone,) = translator.generate_ids([target], options)
        beside = translator.generate_ids([target, other], options)[0]
        assert [h.score for h in beside.hypotheses] == [h.score for h in alone.hypotheses], (short, long)
