"""The parity grids: what users see equals ``transformers`` ``generate`` + ``batch_decode``.

* The text grid, on all six real-like models: greedy and beam 4, one sentence and seven of mixed
  lengths and scripts, natural stop and forced length, each model's languages (two pairs or more
  besides the defaults for the many-to-many ones): the same text, the same ids, scores within 1e-4 (on a
  sentence float32 computes badly, as close to ``generate``'s in float64 as ``generate``'s own: ``_compare``).
* The option grid, on one model of each search-relevant shape (Marian with banned pad, forced EOS
  and renormalized scores; M2M100 with a forced target token; T5): beam 5, length penalty 0.6 / 1.0
  / 2.0, no-repeat n-gram 0 / 3, natural stop and forced length.
* The CLI: ``python -m worker translate --jsonl`` prints the same text as the reference.

The models' weights are drawn from the run's seed (see ``tests/conftest.py``); failures name it.
"""

from __future__ import annotations

import copy
import itertools
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
import torch

from export_tools.fixtures.names import LIKE
from export_tools.verify import sample_sentences
from tests.shared import Lazy
from worker.engine import search
from worker.engine.inference import Inference
from worker.engine.search import top_k
from worker.engine.translator import Translator

MAX_NEW = 24
# Mixed lengths (one to four sentences) and scripts: CJK, digits, emoji, punctuation, spaces at the ends.
SENTENCES = [
    *sample_sentences()[:4],
    "  汤姆有3个苹果。 Price: $4.50 -- ok?!  ",
    "Emoji 😀👍🏽, ©®™, 1,234.5 % and naïve façades.",
    "a",
]
# Per model, the (source, target) languages requested; the first is what a user names most.
REQUESTS: dict[str, list[tuple[str | None, str | None]]] = {
    "opus-mt-en-zh": [(None, None), (None, "cmn_Hans"), (None, "cmn_Hant")],
    "opus-mt-tc-big-en-zle": [(None, "rus"), (None, "ukr"), (None, "bel")],
    "t5-small": [("en", "de"), ("en", "fr"), ("en", "ro")],
    "m2m100_418M": [("en", "zh"), ("fr", "de"), ("zh", "en")],
    "nllb-200-distilled-600M": [("eng_Latn", "zho_Hans"), ("fra_Latn", "deu_Latn"), ("zho_Hans", "eng_Latn")],
    "mbart-large-50-many-to-many-mmt": [("en_XX", "zh_CN"), ("fr_XX", "de_DE"), ("zh_CN", "en_XX")],
}


def models(names: tuple[str, ...]) -> list[Any]:
    """One parameter per model, each in the xdist group of its model: a test process that runs a model's
    cases loads its reference and translator once, not every process all six."""
    return [pytest.param(name, marks=pytest.mark.xdist_group(name)) for name in names]


TEXT_GRID = list(itertools.product((1, 4), ("batch1", "batch7"), ("natural", "forced")))


class Reference:
    """One model as ``transformers`` users run it: the model, its AutoTokenizer, the request's framing."""

    def __init__(self, name: str, folder: Path):
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        self.name = name
        self.model = AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.renormalize = bool(getattr(self.model.generation_config, "renormalize_logits", False))
        self._float64: Reference | None = None

    def in_float64(self) -> Reference:
        """The same model in float64 (made on first use): the exact arithmetic both float32 sides stray from."""
        if self._float64 is None:
            exact = copy.copy(self)
            exact.model = copy.deepcopy(self.model).double()
            self._float64 = exact._float64 = exact
        return self._float64

    def generate(self, texts: list[str], languages: tuple[str | None, str | None], **options: Any) -> dict:
        """Ids, text and scores of ``generate`` + ``batch_decode`` for these texts and languages."""
        source, target = languages
        kwargs: dict[str, Any] = {}
        if hasattr(self.tokenizer, "src_lang"):  # many-to-many: source token in the framing, target forced
            self.tokenizer.src_lang = source
            token = getattr(self.tokenizer, "lang_code_to_token", {}).get(target, target)
            kwargs["forced_bos_token_id"] = self.tokenizer.convert_tokens_to_ids(token)
        elif self.name.startswith("opus") and target:  # Marian: the user writes the >>lang<< token
            texts = [f">>{target}<< {t}" for t in texts]
        elif source and target:  # T5: what the translation pipeline applies for the task
            task = dict(self.model.config.task_specific_params[f"translation_{source}_to_{target}"])
            prefix = task.pop("prefix")
            texts = [prefix + t for t in texts]
            task.pop("max_length", None)
            kwargs |= task
        encoded = self.tokenizer(texts, return_tensors="pt", padding=True)
        with torch.no_grad():
            out = self.model.generate(
                **encoded,
                **(kwargs | options),
                do_sample=False,
                output_scores=True,  # beam search returns sequences_scores only with these
                output_logits=self._needs_logits(options),  # 35 x 256k floats a step: only when read
                return_dict_in_generate=True,
            )
        eos = self.model.generation_config.eos_token_id
        tokens = [_until(row[1:], eos) for row in out.sequences.tolist()]
        return {
            "tokens": tokens,
            "text": self.tokenizer.batch_decode(out.sequences, skip_special_tokens=True),
            "scores": self._scores(out, tokens, options),
        }

    def _needs_logits(self, options: dict[str, Any]) -> bool:
        return options.get("num_beams", 1) == 1 and not self.renormalize

    def _scores(self, out: Any, tokens: list[list[int]], options: dict[str, Any]) -> list[float]:
        if options.get("num_beams", 1) > 1:
            return list(out.sequences_scores.tolist())
        # Greedy: the (renormalized) log-probability of each chosen token; a forced token counts 0. As
        # compute_transition_scores(normalize_logits=True) gives it: a float32 log_softmax, which misses
        # up to ~1e-4 of a peaked distribution's mass over a 256k vocabulary, as ONNX Runtime's does
        # (logsumexp would not). Step by step: stacked, they would be (batch, steps, V) copies of 170 MB.
        chosen = out.sequences[:, 1:]
        logprobs = torch.zeros(chosen.shape, dtype=torch.float64)
        for t, processed in enumerate(out.scores):  # (batch, V) after the logits processors
            token = chosen[:, t : t + 1]
            if self.renormalize:
                logprob = processed.gather(1, token)[:, 0]
            else:
                logprob = out.logits[t].log_softmax(-1).gather(1, token)[:, 0]
            forced = torch.isfinite(processed).sum(-1) == 1
            logprobs[:, t] = torch.where(forced, 0.0, logprob)
        penalty = options.get("length_penalty", 1.0)
        return [float(logprobs[b, : len(seq)].sum()) / len(seq) ** penalty for b, seq in enumerate(tokens)]


def _until(row: list[int], eos: int) -> list[int]:
    return row[: row.index(eos) + 1] if eos in row else row


@pytest.fixture(scope="module")
def references(tiny_models: Mapping[str, Path]) -> Mapping[str, Reference]:
    return Lazy(LIKE, lambda name: Reference(name, tiny_models[name]))


@pytest.fixture(scope="module")
def translators(artifacts: Mapping[str, Path]) -> Mapping[str, Translator]:
    return Lazy(LIKE, lambda name: Translator(artifacts[name], precision="fp32"))


def _ours(
    translator: Translator,
    texts: list[str],
    languages: tuple[str | None, str | None],
    phrases: list[list[str]] | None = None,
    **options: Any,
):
    source, target = languages
    request = translator.options(source_language=source, target_language=target, num_hypotheses=1, **options)
    return translator.translate_batch(texts, request, None, phrases)


def _compare(
    translator: Translator,
    reference: Reference,
    texts: list[str],
    languages: tuple[str | None, str | None],
    beams: int,
    case: str,
    seed: int,
    phrases: list[list[str]] | None = None,
    **options: Any,
) -> list[Any]:
    """Ours and ``generate`` on the same request: the same ids and text, scores within 1e-4 per token; with
    ``phrases``, for the sentences that have none (the others are returned with the rest, to be checked apart).

    A score is a sum of n log-probabilities over ``n ** length_penalty``; on random weights float32
    itself (torch's or ours) strays ~2e-5 per log-probability from exact arithmetic (up to 1e-4 on a
    peaked distribution over a 256k vocabulary, see ``Reference._scores``), so a long hypothesis at
    length penalty 0.6 may differ by more than 1e-4 without either side being wrong. Some sentences are
    worse conditioned still (``generate``'s own float32 mean log-probability 2.3e-4 from float64's on one
    of a random T5's, ours 3.7e-4): where the scores differ by more than the tolerance, ours must be as
    close to ``generate``'s in float64 as the tolerance plus twice ``generate``'s own float32 error. For
    the same reason, where beam search had to cut between two candidates closer than ``TIE``, either
    side's pick is right: a sentence whose ids differ passes only if our own search of it met such a tie."""
    ours = _ours(translator, texts, languages, phrases, beam_size=beams, **options)
    theirs = reference.generate(texts, languages, num_beams=beams, **options)
    where = f"{case}, model weights seed {seed}"
    power = 1.0 - options.get("length_penalty", 1.0)
    for i, (mine, tokens, text, score) in enumerate(zip(ours, theirs["tokens"], theirs["text"], theirs["scores"])):
        if phrases and phrases[i]:
            continue
        if mine.tokens != tokens and _tied(
            translator, texts[i], languages, _diverge(mine.tokens, tokens), beams, options
        ):
            continue
        assert (mine.tokens, mine.text) == (tokens, text), f"{where}, sentence {i}"
        tolerance = 1e-4 * max(1.0, len(mine.tokens) ** power)
        if abs(mine.score - score) > tolerance:
            exact = reference.in_float64().generate([texts[i]], languages, num_beams=beams, **options)
            strays = abs(score - exact["scores"][0])  # generate's own float32 error on this sentence
            assert exact["tokens"][0] == tokens and abs(mine.score - exact["scores"][0]) <= tolerance + 2 * strays, (
                f"{where}: score {mine.score} vs {score} (tolerance {tolerance:.1e}; in float64 "
                f"{exact['scores'][0]}, ids {'the same' if exact['tokens'][0] == tokens else exact['tokens'][0]})"
            )
    assert len(ours) == len(theirs["tokens"]), where
    return ours


TIE = 1e-4  # two beam scores closer than this are the same score to float32 (as the score tolerance says)


def _tied(
    translator: Translator, text: str, languages: tuple[str | None, str | None], at: int, beams: int, options: dict
) -> bool:
    """Whether our beam search of ``text`` (alone: fp32 gives the same search in any batch) cut between
    two candidates closer than ``TIE`` at a step that could make the hypotheses differ from token ``at``
    on: the step that chooses token t decides among prefixes of t + 1 tokens, so only steps >= ``at``."""
    gaps: list[float] = []

    def recorded(scores: np.ndarray, k: int) -> np.ndarray:
        gaps.append(cut_gap(scores, k))  # two cuts a step: the best 2K candidates, then the K that run on
        return top_k(scores, k)

    with mock.patch.object(search, "top_k", recorded):
        _ours(translator, [text], languages, beam_size=beams, **options)
    return min(gaps[2 * at :], default=np.inf) < TIE


def _diverge(a: list[int], b: list[int]) -> int:
    """The first position where ``a`` and ``b`` differ."""
    return next((n for n, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def cut_gap(scores: np.ndarray, k: int) -> float:
    """Over the rows of ``scores``, the smallest gap between the k-th and the (k+1)-th largest, among
    possible scores (above generate's "impossible" one)."""
    ranked = -np.sort(-scores, axis=1)
    if ranked.shape[1] <= k:
        return np.inf
    possible = ranked[:, k] > search.NEG / 2
    return float((ranked[possible, k - 1] - ranked[possible, k]).min(initial=np.inf))


def test_cut_gap_measures_the_cut() -> None:
    scores = np.array([[0.0, -1.0, -1.00001, -5.0], [0.0, -2.0, search.NEG - 3.0, search.NEG]], dtype=np.float32)
    assert cut_gap(scores, 2) == pytest.approx(1e-5, abs=1e-6)
    assert cut_gap(scores[1:], 2) == np.inf
    assert cut_gap(scores, 1) == pytest.approx(1.0)


@pytest.mark.parametrize("name", models(LIKE))
@pytest.mark.parametrize(("beams", "batch", "stop"), TEXT_GRID)
def test_text_ids_and_scores_equal_generate_and_batch_decode(
    name, beams, batch, stop, references, translators, model_seed
) -> None:
    texts = SENTENCES if batch == "batch7" else SENTENCES[1:2]
    languages = REQUESTS[name][TEXT_GRID.index((beams, batch, stop)) % len(REQUESTS[name])]
    minimum = MAX_NEW if stop == "forced" else 0
    case = f"{name} {languages} beams={beams} {batch} {stop}"
    _compare(
        translators[name],
        references[name],
        texts,
        languages,
        beams,
        case,
        model_seed,
        max_new_tokens=MAX_NEW,
        min_new_tokens=minimum,
    )


# Two families a glossary is tried on (Marian's sentencepiece pair, NLLB's fast tokenizer), into Chinese; per
# sentence of SENTENCES, the targets its translation must hold ("unrelated": a glossary matching none of them).
TERM_FAMILIES = {"opus-mt-en-zh": (None, None), "nllb-200-distilled-600M": ("eng_Latn", "zho_Hans")}
TERMS = {"unrelated": [[]] * 7, "terms": [["芝加哥市"], [], ["汤米", "Fanyi"], [], [], ["芝加哥市"], []]}


@pytest.mark.parametrize("name", models(tuple(TERM_FAMILIES)))
@pytest.mark.parametrize(("beams", "batch", "glossary"), list(itertools.product((1, 4), ("batch1", "batch7"), TERMS)))
def test_terms_are_written_and_every_other_sentence_is_what_generate_writes(
    name, beams, batch, glossary, references, translators, model_seed
) -> None:
    """A constrained search writes every target of its sentence (``worker.engine.constrained``); every sentence
    without one, in the same call, is generate's, ids, text and score."""
    texts, phrases = (SENTENCES, TERMS[glossary]) if batch == "batch7" else (SENTENCES[2:3], TERMS[glossary][2:3])
    case = f"{name} {glossary} beams={beams} {batch}"
    translator = translators[name]
    ours = _compare(
        translator,
        references[name],
        texts,
        TERM_FAMILIES[name],
        beams,
        case,
        model_seed,
        phrases,
        max_new_tokens=MAX_NEW,
    )
    for mine, wanted in zip(ours, phrases):
        for target in wanted:
            ways = translator.tokenizer.phrase(target)
            assert any(_holds(mine.tokens, way) for way in ways), f"{case}: {target} not written in {mine.tokens}"
            assert target in mine.text, f"{case}: {target} not in {mine.text!r}, model weights seed {model_seed}"


def _holds(tokens: list[int], way: tuple[int, ...]) -> bool:
    return any(tuple(tokens[i : i + len(way)]) == way for i in range(len(tokens)))


OPTION_MODELS = ("opus-mt-en-zh", "m2m100_418M", "t5-small")
OPTION_GRID = [
    (beams, lp, ngram, stop, batch)
    for beams, ngram, stop, batch in itertools.product((1, 4, 5), (0, 3), ("natural", "forced"), ("batch1", "batch7"))
    for lp in ((1.0,) if beams == 1 else (0.6, 1.0, 2.0))
]


@pytest.mark.parametrize("name", models(OPTION_MODELS))
@pytest.mark.parametrize(("beams", "lp", "ngram", "stop", "batch"), OPTION_GRID)
def test_search_options_match_generate(
    name, beams, lp, ngram, stop, batch, references, translators, model_seed
) -> None:
    texts = SENTENCES if batch == "batch7" else SENTENCES[3:4]
    languages = REQUESTS[name][0]
    options = dict(
        max_new_tokens=MAX_NEW,
        min_new_tokens=MAX_NEW if stop == "forced" else 0,
        length_penalty=lp,
        no_repeat_ngram_size=ngram,
    )
    case = f"{name} beams={beams} lp={lp} ngram={ngram} {stop} {batch}"
    _compare(translators[name], references[name], texts, languages, beams, case, model_seed, **options)


@pytest.mark.parametrize("name", models(OPTION_MODELS))
@pytest.mark.parametrize("beams", [1, 4])
def test_repetition_penalty_takes_the_full_vocabulary_and_matches(
    name, beams, references, translators, model_seed, monkeypatch
) -> None:
    steps: list[bool] = []
    real_step = Inference.step
    monkeypatch.setattr(
        Inference, "step", lambda self, *a, **k: steps.append(k.get("top_k") is None) or real_step(self, *a, **k)
    )
    languages = REQUESTS[name][0]
    options = dict(max_new_tokens=MAX_NEW, repetition_penalty=1.3, no_repeat_ngram_size=2)
    case = f"{name} beams={beams} repetition penalty"
    _compare(translators[name], references[name], SENTENCES, languages, beams, case, model_seed, **options)
    assert any(steps), "the full-vocabulary path never ran"


@pytest.mark.parametrize("name", models(("opus-mt-en-zh", "nllb-200-distilled-600M", "t5-small")))
@pytest.mark.parametrize("beams", [1, 4])
def test_io_binding_path_gives_the_same_results(name, beams, artifacts) -> None:
    """The IO-binding path (the CUDA one) run on the CPU provider: same tokens and scores as plain runs."""
    results = []
    for bound in (False, True):
        translator = Translator(artifacts[name], precision="fp32", io_binding=bound)
        options = translator.options(beam_size=beams, max_new_tokens=MAX_NEW, num_hypotheses=1)
        sources = [translator.tokenizer.encode(s) for s in SENTENCES]
        results.append(
            [
                (r.hypotheses[0].tokens, round(r.hypotheses[0].score, 5))
                for r in translator.generate_ids(sources, options)
            ]
        )
    assert results[0] == results[1]


@pytest.mark.parametrize("name", models(LIKE))
def test_the_cli_prints_what_transformers_prints(name, artifacts, references, translators, model_seed) -> None:
    source, target = REQUESTS[name][1]  # m2m100 fr -> de, t5 en -> fr, nllb and mbart fr -> de, marian zh / uk
    languages = [*(["--source-language", source] if source else []), *(["--target-language", target] if target else [])]
    result = subprocess.run(
        [sys.executable, "-m", "worker", "translate", "--artifact", str(artifacts[name]), "--precision", "fp32",
         "--beam", "4", "--max-new-tokens", str(MAX_NEW), "--jsonl", *languages],
        input="".join(s + "\n" for s in SENTENCES), capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    theirs = references[name].generate(SENTENCES, (source, target), num_beams=4, max_new_tokens=MAX_NEW)
    where = f"{name} {source}->{target}, model weights seed {model_seed}"
    assert len(rows) == len(SENTENCES), where
    limit = {"max_new_tokens": MAX_NEW}
    for i, (row, tokens, text) in enumerate(zip(rows, theirs["tokens"], theirs["text"])):
        at = _diverge(row["tokens"], tokens)
        if row["tokens"] != tokens and _tied(translators[name], SENTENCES[i], (source, target), at, 4, limit):
            continue  # a cut between candidates closer than float32 can tell: either pick is right (_compare)
        assert (row["tokens"], row["translation"]) == (tokens, text), f"{where}, sentence {i}"


@pytest.mark.xdist_group("m2m100_418M")
def test_routed_documents_are_read_as_their_own_language(translators, references, model_seed) -> None:
    """``source_language: auto`` on M2M100: each document is read as the language found in it (its own code in
    the source framing, the target forced), and what the engine gives for it is ``generate``'s with the
    tokenizer's ``src_lang`` set to that language, on real text in three languages (Debian's catalogues)."""
    from contract.options import JobOptions
    from tests.worker.documents.test_languages import strings
    from worker.documents.languages import Routing
    from worker.documents.translator import DocumentTranslator

    translator, reference = translators["m2m100_418M"], references["m2m100_418M"]
    documents = [
        (f"{code}-{k}", text) for code in ("en", "fr", "de") for k, text in enumerate(strings(code, short=False)[:3])
    ]
    routing = Routing.of(translator.languages, JobOptions(source_language="auto", target_language="zh"))
    options = translator.options(target_language="zh", beam_size=1, max_new_tokens=MAX_NEW)
    calls: list[tuple[list[str], Any, list[Any]]] = []
    engine = translator.translate_batch

    def recorded(texts: list[str], request: Any, memory: Any = None, phrases: Any = None) -> list[Any]:
        calls.append((list(texts), request, out := engine(texts, request, memory, phrases)))
        return out

    with mock.patch.object(translator, "translate_batch", recorded):
        results = DocumentTranslator(translator, routing=routing).translate(documents, options)
    assert {r.id: r.source_language for r in results} == {i: i.split("-")[0] for i, _ in documents}
    first = [request.source_language for _, request, _ in calls if request.beam_size == 1]
    # The windows: one engine call a language, the first three (a window that does not align is translated
    # again sentence by sentence, one call a language; a guard retry searches wider).
    assert sorted(first[:3]) == ["de", "en", "fr"] and set(first[3:]) <= {"de", "en", "fr"}
    for texts, request, outputs in calls:
        case = f"M2M100 read as {request.source_language}, model weights seed {model_seed}"
        theirs = reference.generate(
            texts, (request.source_language, "zh"), num_beams=request.beam_size, max_new_tokens=MAX_NEW,
            **({"no_repeat_ngram_size": request.no_repeat_ngram_size} if request.no_repeat_ngram_size else {}),
        )  # fmt: skip
        assert [o.tokens for o in outputs] == theirs["tokens"] and [o.text for o in outputs] == theirs["text"], case
