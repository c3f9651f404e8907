"""Stitching window outputs back to sentences, and rebuilding the layout."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from worker.documents.markup import text_units
from worker.documents.segment import Sentence, line_spans
from worker.documents.stitch import render, separator, split_target, stitch
from worker.documents.windows import Window


def planned(document: str):
    """Text units and their sentences in unit coordinates, as the document layer plans them."""
    units = text_units(document)
    sentences = [Sentence(a, b, n, u.plain[a:b]) for n, u in enumerate(units) for a, b, _ in line_spans(u.plain)]
    return units, sentences


def test_target_sentences_split_after_final_punctuation_but_not_decimals() -> None:
    assert split_target("它的价格是4.50美元。汤姆有3个苹果！在哪里？") == [
        "它的价格是4.50美元。",
        "汤姆有3个苹果！",
        "在哪里？",
    ]
    assert split_target("It costs $4.50. He left.") == ["It costs $4.50.", "He left."]
    assert split_target("没有句号") == ["没有句号"]


def test_context_translations_are_dropped_when_the_output_aligns() -> None:
    window = Window("d", first=2, last=4, context_before=1)
    assert stitch(window, "甲。乙。丙。") == ["乙。", "丙。"]
    assert stitch(window, "甲。乙丙。") is None  # two sentences for three shown: not aligned


def test_chinese_is_joined_without_spaces_and_latin_with_one() -> None:
    assert separator("汤姆有3个苹果。", "会议开始。") == ""
    assert separator("Tom has 3.", "He left.") == " "


def test_layout_and_alignment_follow_the_source_lines() -> None:
    doc = "Title\n\n  Tom has 3 apples. Anna left.\nEnd"
    units, sentences = planned(doc)
    text, alignment = render(doc, units, sentences, ["标题", "汤姆有3个苹果。", "安娜走了。", "结束"])
    assert text == "标题\n\n  汤姆有3个苹果。安娜走了。\n结束"
    for (src, _), s in zip(alignment, sentences):
        assert doc[src[0] : src[1]] == s.text
    assert [text[a:b] for _, (a, b) in alignment] == ["标题", "汤姆有3个苹果。", "安娜走了。", "结束"]


PARTS = [*"ab .?!\n,$1。", "  ", "Dr. ", "Tom has 3 apples. ", "\n\n", "<b>", "</b> ", "\n# ", "\n- "]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(PARTS), max_size=60).map("".join))
def test_layout_is_kept_and_every_character_appears_once(document: str) -> None:
    """With each sentence 'translated' to itself, only whitespace inside lines may change."""
    units, sentences = planned(document)
    text, alignment = render(document, units, sentences, [s.text for s in sentences])
    assert text.count("\n") == document.count("\n")
    squeeze = lambda line: "".join(line.split())
    assert [squeeze(line) for line in text.split("\n")] == [squeeze(line) for line in document.split("\n")]
    targets = [span for _, span in alignment]
    assert all(a <= b <= c for (a, b), (c, _) in zip(targets, targets[1:]))  # monotonic, never overlapping
    assert [text[a:b] for a, b in targets] == [s.text for s in sentences]
