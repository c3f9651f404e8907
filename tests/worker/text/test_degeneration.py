"""Degeneration checks on single translations, and the document layer's retry."""

from __future__ import annotations

from worker.documents import DocumentTranslator
from worker.engine.translator import Translator
from worker.text.degeneration import symptoms


def test_loops_length_limits_and_extreme_ratios_are_detected() -> None:
    assert symptoms("Hello there, how are you?", "你好你好你好你好你好") == ["repetition"]
    assert symptoms("Tom has 3 apples.", "汤姆有3个苹果。", hit_length_limit=True) == ["length_limit"]
    assert symptoms("The meeting starts at nine in the morning.", "会") == ["length_ratio"]
    assert symptoms("There are 19 chairs.", "有195把椅子。") == ["numbers"]


def test_good_translations_and_legit_numbers_are_left_alone() -> None:
    assert symptoms("Tom bought 1,111 apples for $4.50.", "汤姆花4.50美元买了1,111个苹果。") == []
    assert symptoms("Wait...", "等等……") == []
    assert symptoms("It opens on March 5, 2025.", "它于2025年3月5日开放。") == []  # "March" became 3


def test_a_looping_model_is_retried_in_fp32_and_the_document_flagged(artifacts) -> None:
    translator = Translator(artifacts["opus-mt-en-zh"], precision="int8")  # random weights: it loops
    (result,) = DocumentTranslator(translator).translate([("d", "Tom has 3 apples. The meeting starts at 9 am.")])
    assert result.status == "ok"
    assert {"degenerate", "retried"} <= set(result.flags)
    assert len(result.alignment) == 2
    assert translator.at_precision("fp32") is translator.at_precision("fp32") is not translator
    assert translator._siblings.keys() == {"fp32"}  # the retry ran on the fp32 graphs
