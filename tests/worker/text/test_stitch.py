"""Stitching window outputs back to sentences, and rebuilding the layout."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_markup_is_copied_to_its_place_in_the_translation() -> None:
    doc = "# Where is the park?\n<p>Tom has 3 apples.</p>\n\n- <b>Free</b> delivery."
    sentences = segment(doc)
    text, _ = assemble(doc, sentences, ["公园在哪里？", "汤姆有3个苹果。", "免费", "送货。"])
    assert (
        text == "# 公园在哪里？\n<p>汤姆有3个苹果。</p>\n\n- <b>免费</b> 送货。"
    )  # markup between sentences is copied as it stands


PARTS = [*"ab .?!\n,$1。", "  ", "Dr. ", "Tom has 3 apples. ", "\n\n", "<b>", "</b> ", "\n# ", "\n- "]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(PARTS), max_size=60).map("".join))
def test_layout_is_kept_and_every_character_appears_once(document: str) -> None:
    """With each sentence 'translated' to itself, only whitespace inside lines may change."""
    sentences = segment(document)
    text, alignment = assemble(document, sentences, [s.text for s in sentences])
    assert text.count("\n") == document.count("\n")
    squeeze = lambda line: "".join(line.split())
    assert [squeeze(line) for line in text.split("\n")] == [squeeze(line) for line in document.split("\n")]
    targets = [span for _, span in alignment]
    assert all(a <= b <= c for (a, b), (c, _) in zip(targets, targets[1:]))  # monotonic, never overlapping
    assert [text[a:b] for a, b in targets] == [s.text for s in sentences]
