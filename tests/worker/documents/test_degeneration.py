"""Degeneration checks on single translations, and the document layer's retry."""

from __future__ import annotations

from worker.documents.degeneration import SYMPTOMS, symptoms
from worker.documents.translator import DocumentTranslator
from worker.engine.translator import Translator


def test_loops_length_limits_and_extreme_ratios_are_detected() -> None:
    assert symptoms("Hello there, how are you?", "你好你好你好你好你好") == ["repetition"]
    assert symptoms("Tom has 3 apples.", "汤姆有3个苹果。", hit_length_limit=True) == ["length_limit"]
    assert symptoms("The meeting starts at nine in the morning.", "会") == ["length_ratio"]
    assert symptoms("There are 19 chairs.", "有195把椅子。") == ["numbers"]


def test_good_translations_and_legit_numbers_are_left_alone() -> None:
    assert symptoms("Tom bought 1,111 apples for $4.50.", "汤姆花4.50美元买了1,111个苹果。") == []
    assert symptoms("Wait...", "等等……") == []
    assert symptoms("It opens on March 5, 2025.", "它于2025年3月5日开放。") == []  # "March" became 3


def test_empty_translations_of_words_are_a_symptom() -> None:
    assert symptoms("y.", "") == ["empty"] and symptoms("y.", "  ") == ["empty"]
    assert symptoms("...", "") == []  # nothing to translate, nothing missing


def test_suspect_sentences_are_retried_with_a_wider_beam_on_the_same_sessions(artifacts, monkeypatch) -> None:
    translator = Translator(artifacts["opus-mt-en-zh"], precision="int8")  # random weights: they loop
    calls: list[tuple[str, int, list[str]]] = []  # (precision, beam, sentences) of every model call
    real = Translator.translate_batch
    record = lambda self, texts, options, *a: calls.append((self.precision, options.beam_size, list(texts))) or real(
        self, texts, options, *a
    )
    monkeypatch.setattr(Translator, "translate_batch", record)
    options = translator.options(beam_size=1, max_new_tokens=24)
    documents = [("d", "Tom has 3 apples. The meeting starts at 9 am.")]
    (result,) = DocumentTranslator(translator).translate(documents, options)
    assert {precision for precision, _, _ in calls} == {"int8"}  # no other precision's sessions are made for it
    assert calls[0][1] == 1
    retried = [text for _, beam, texts in calls[1:] if beam == 4 for text in texts]
    assert retried, f"no sentence was retried with a wider beam: {calls}"
    assert len(result.sentences) == 2
    for sentence in result.sentences:
        source = "Tom has 3 apples. The meeting starts at 9 am."[slice(*sentence.source)]
        assert ("retried" in sentence.flags) == (source in retried)
        left = set(sentence.flags) & SYMPTOMS
        assert left == set(symptoms(source, result.translation[slice(*sentence.target)])) - {"length_limit"} | (
            left & {"length_limit"}
        )
    assert result.status == ("partial" if set(result.flags) & SYMPTOMS else "ok")
