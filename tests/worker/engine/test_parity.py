"""The parity grid: our fp32 search is token-identical to ``transformers`` ``generate``, scores within 1e-4.

Grid per architecture: greedy, beam 4, beam 5; batch 1 and batch 7 of very different lengths;
length penalty 0.6, 1.0, 2.0 (beam only: greedy has none); no-repeat n-gram 0 and 3; natural stop
and forced length (EOS banned until the limit).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch

from export_tools.fixtures.tiny import ARCHS
from export_tools.verify import sample_sentences
from worker.engine import search
from worker.engine.inference import pad_batch
from worker.engine.translator import Translator

BATCHES = {"batch1": [3], "batch7": list(range(7))}  # indices into sample_sentences (1 to 4 sentences each)
GRID = [
    (beams, lp, ngram, stop, batch)
    for beams, ngram, stop, batch in itertools.product((1, 4, 5), (0, 3), ("natural", "forced"), BATCHES)
    for lp in ((1.0,) if beams == 1 else (0.6, 1.0, 2.0))
]
MAX_NEW = 24


@pytest.fixture(scope="module")
def references(tiny_models: dict[str, Path]):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    loaded = {}
    for arch in ARCHS:
        model = AutoModelForSeq2SeqLM.from_pretrained(tiny_models[arch], attn_implementation="eager").eval()
        loaded[arch] = (model, AutoTokenizer.from_pretrained(tiny_models[arch]))
    return loaded


def hf_generate(model, sources: list[list[int]], pad: int, eos: int, beams: int, **kwargs):
    ids, mask = (torch.from_numpy(a) for a in pad_batch(sources, pad))
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            num_beams=beams,
            do_sample=False,
            output_scores=True,
            output_logits=True,
            return_dict_in_generate=True,
            **kwargs,
        )
    tokens = []
    for row in out.sequences.tolist():
        generated = row[1:]
        tokens.append(generated[: generated.index(eos) + 1] if eos in generated else generated)
    if beams > 1:
        return tokens, out.sequences_scores.tolist()
    # Greedy's score: the model's log-probability of each chosen token; a forced token counts 0, as in beam search.
    logprobs = torch.stack(out.logits, dim=1).log_softmax(-1)  # (batch, steps, V) from the raw logits
    forced = torch.isfinite(torch.stack(out.scores, dim=1)).sum(-1) == 1  # (batch, steps)
    scores = [
        float(sum(0.0 if forced[b, t] else logprobs[b, t, tok] for t, tok in enumerate(seq)) / len(seq))
        for b, seq in enumerate(tokens)
    ]
    return tokens, scores


def assert_parity(arch: str, batch: str, artifacts, references, **options) -> None:
    """Ours and generate on the same sources and options: same tokens, scores within 1e-4."""
    model, tokenizer = references[arch]
    translator = Translator(artifacts[arch], precision="fp32")
    sources = [tokenizer(sample_sentences()[i]).input_ids for i in BATCHES[batch]]
    ours = translator.generate_ids(sources, translator.options(num_hypotheses=1, **options))
    hf_options = {{"beam_size": "num_beams"}.get(k, k): v for k, v in options.items()}
    beams = hf_options.pop("num_beams")
    theirs, scores = hf_generate(model, sources, translator.pad_id, translator.vocab.eos, beams, **hf_options)
    assert [r.hypotheses[0].tokens for r in ours] == theirs
    np.testing.assert_allclose([r.hypotheses[0].score for r in ours], scores, atol=1e-4, rtol=0)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(("beams", "lp", "ngram", "stop", "batch"), GRID)
def test_search_matches_generate(arch, beams, lp, ngram, stop, batch, artifacts, references) -> None:
    minimum = MAX_NEW if stop == "forced" else 0
    assert_parity(
        arch,
        batch,
        artifacts,
        references,
        beam_size=beams,
        length_penalty=lp,
        no_repeat_ngram_size=ngram,
        max_new_tokens=MAX_NEW,
        min_new_tokens=minimum,
    )


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("beams", [1, 4])
def test_full_vocabulary_path_matches_generate(arch, beams, artifacts, references, monkeypatch) -> None:
    """Repetition penalty, and n-gram bans beyond the candidate margin, take the full-vocabulary path."""
    monkeypatch.setattr(search, "NGRAM_MARGIN", 0)
    assert_parity(
        arch,
        "batch7",
        artifacts,
        references,
        beam_size=beams,
        repetition_penalty=1.3,
        no_repeat_ngram_size=2,
        max_new_tokens=MAX_NEW,
    )
    assert_parity(
        arch, "batch7", artifacts, references, beam_size=beams, no_repeat_ngram_size=1, max_new_tokens=MAX_NEW
    )


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("beams", [1, 4])
def test_io_binding_path_gives_the_same_results(arch, beams, artifacts) -> None:
    """The IO-binding path (the CUDA one) run on the CPU provider: same tokens and scores as plain runs."""
    sources = [Translator(artifacts[arch], precision="fp32").tokenizer.encode(s) for s in sample_sentences()]
    results = []
    for bound in (False, True):
        translator = Translator(artifacts[arch], precision="fp32", io_binding=bound)
        options = translator.options(beam_size=beams, max_new_tokens=MAX_NEW, num_hypotheses=1)
        results.append(
            [
                (r.hypotheses[0].tokens, round(r.hypotheses[0].score, 5))
                for r in translator.generate_ids(sources, options)
            ]
        )
    assert results[0] == results[1]
