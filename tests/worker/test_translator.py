"""Translator facade and CLI on tiny artifacts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from worker.engine.search import DecodingOptions
from worker.engine.translator import Translator


def test_empty_and_whitespace_sentences_translate_to_empty_without_a_model_call(artifacts) -> None:
    translator = Translator(artifacts["marian"], precision="fp32")
    out = translator.translate_batch(["", "   ", "Tom has 3 apples."], translator.options(beam_size=2))
    assert [t.text for t in out[:2]] == ["", ""]
    assert out[2].tokens


def test_non_strings_are_refused_with_what_was_passed(artifacts) -> None:
    translator = Translator(artifacts["marian"], precision="fp32")
    with pytest.raises(TypeError, match="got int"):
        translator.translate_batch(["fine", 42])  # type: ignore[list-item]


def test_target_language_for_a_multilingual_model_forces_its_token(artifacts) -> None:
    translator = Translator(artifacts["m2m100"], precision="fp32")
    zh = translator.tokenizer.language_ids["zh"]
    fr = translator.tokenizer.language_ids["fr"]
    assert translator.translate_batch(["Tom has 3 apples."], translator.options(beam_size=1))[0].tokens[0] == zh
    fr_options = translator.options(beam_size=1, target_language="fr")
    assert translator.translate_batch(["Tom has 3 apples."], fr_options)[0].tokens[0] == fr
    with pytest.raises(ValueError, match="not in this model's languages"):
        translator.translate_batch(["x"], translator.options(target_language="xx"))


@pytest.mark.parametrize(
    "options",
    [
        dict(beam_size=0),
        dict(beam_size=2, num_hypotheses=3),
        dict(min_new_tokens=9, max_new_tokens=4),
        dict(early_stopping="sometimes"),
    ],
)
def test_contradictory_options_are_refused(options) -> None:
    with pytest.raises(ValueError):
        DecodingOptions(**options)


def test_unknown_options_are_refused_naming_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown decoding options.*beam_size"):
        DecodingOptions.from_generation_config({}, beams=4)


def test_cli_translates_stdin_lines_as_json(artifacts) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "worker", "translate", "--artifact", str(artifacts["marian"]), "--jsonl", "--beam", "2"],
        input="Tom has 3 apples.\n\nThe meeting starts at 9 am.\n",
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["line"] for r in rows] == [1, 2, 3]
    assert rows[1]["translation"] == "" and rows[0]["tokens"]


def test_batches_across_sessions_come_back_in_input_order(artifacts) -> None:
    from export_tools.verify import sample_sentences

    sentences = sample_sentences() * 3
    one = Translator(artifacts["marian"], precision="fp32")
    pooled = Translator(artifacts["marian"], precision="fp32", threads=2, sessions=2, max_tokens=300)
    options = one.options(beam_size=2, max_new_tokens=12)
    assert [t.tokens for t in pooled.translate_batch(sentences, options)] == [
        t.tokens for t in one.translate_batch(sentences, options)
    ]


def test_input_longer_than_the_positions_is_cut_and_flagged(artifacts) -> None:
    translator = Translator(artifacts["marian"], precision="fp32")
    long_text = " ".join(["Tom has 3 apples."] * 60)
    out = translator.translate_batch([long_text], translator.options(beam_size=1, max_new_tokens=4))
    assert "truncated_input" in out[0].flags and "length_limit" in out[0].flags


def test_max_length_ratio_caps_new_tokens(artifacts) -> None:
    translator = Translator(artifacts["marian"], precision="fp32")
    out = translator.translate_batch(["Tom"], translator.options(beam_size=1, min_new_tokens=0, max_length_ratio=1.0))
    assert len(out[0].tokens) <= len(translator.tokenizer.encode("Tom"))


def test_blank_input_never_touches_the_model(artifacts) -> None:
    translator = Translator(artifacts["marian"], precision="fp32")
    assert [t.text for t in translator.translate_batch(["", " \n\t "])] == ["", ""]
    assert translator.pool._pid is None  # no session was ever created


def test_sessions_are_created_after_fork_in_the_child(artifacts) -> None:
    import multiprocessing

    translator = Translator(artifacts["marian"], precision="fp32")
    assert translator.pool._pid is None  # building a Translator creates no session in the parent
    expected = translator.translate_batch(["Tom has 3 apples."], translator.options(beam_size=2))[0].tokens
    context = multiprocessing.get_context("fork")  # what Celery's prefork pool does: the child inherits it
    results = context.Queue()
    process = context.Process(target=_translate_in_child, args=(translator, results))
    process.start()
    child = results.get(timeout=60)
    process.join(timeout=60)
    assert child["tokens"] == expected
    assert child["pid"] != translator.pool._pid and child["pool_pid"] == child["pid"]


def _translate_in_child(translator: Translator, results) -> None:
    import os

    tokens = translator.translate_batch(["Tom has 3 apples."], translator.options(beam_size=2))[0].tokens
    results.put({"tokens": tokens, "pid": os.getpid(), "pool_pid": translator.pool._pid})


def test_several_hypotheses_come_back_best_first_with_their_text(artifacts) -> None:
    translator = Translator(artifacts["marian"], precision="fp32")
    (out,) = translator.translate_batch(["Tom has 3 apples."], translator.options(beam_size=4, num_hypotheses=3))
    assert len(out.hypotheses) == 3
    assert out.hypotheses[0].text == out.text and out.hypotheses[0].tokens == out.tokens
    scores = [h.score for h in out.hypotheses]
    assert scores == sorted(scores, reverse=True)


def test_cuda_without_the_cuda_provider_logs_and_runs_on_cpu(artifacts, caplog) -> None:
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this machine has CUDA: the fallback cannot happen")
    translator = Translator(artifacts["marian"], device="cuda", precision="fp32")
    with caplog.at_level("WARNING"):
        out = translator.translate_batch(["Tom has 3 apples."], translator.options(beam_size=2))
    assert out[0].tokens
    assert "no CUDAExecutionProvider" in caplog.text and "running on CPU" in caplog.text
