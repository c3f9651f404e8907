"""Stitching window outputs back to sentences, and rebuilding the layout."""

from __future__ import annotations

from worker.text.segment import segment
from worker.text.stitch import assemble, join, split_target, stitch
from worker.text.windows import Window


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
    assert join("汤姆有3个苹果。", "会议开始。") == "汤姆有3个苹果。会议开始。"
    assert join("Tom has 3.", "He left.") == "Tom has 3. He left."


def test_layout_and_alignment_follow_the_source_lines() -> None:
    doc = "Title\n\n  Tom has 3 apples. Anna left.\nEnd"
    sentences = segment(doc)
    text, alignment = assemble(doc, sentences, ["标题", "汤姆有3个苹果。", "安娜走了。", "结束"])
    assert text == "标题\n\n  汤姆有3个苹果。安娜走了。\n结束"
    for (src, _), s in zip(alignment, sentences):
        assert doc[src[0] : src[1]] == s.text
    assert [text[a:b] for _, (a, b) in alignment] == ["标题", "汤姆有3个苹果。", "安娜走了。", "结束"]
