"""The structure check: every kind of change a translation can make to a document's markup is named."""

from __future__ import annotations

import pytest

from worker.documents.structure import differences

MARKDOWN = (
    "# Title\n\nSee [the guide][g] and `x.y()` at https://a.org/b.\n\n"
    "- *one* **two**\n\n```\ncode\n```\n\n[g]: https://g.org/\n"
)
HTML = '<p>See <a href="/g">the <b>guide</b></a> and <code>x &lt; y</code>.</p>\n<pre>a\nb</pre>\n'


@pytest.mark.parametrize(
    ("translation", "found"),
    [
        (MARKDOWN.replace("# Title", "## Title"), "blocks"),
        (MARKDOWN.replace("```\ncode", "```\n代码"), "verbatim"),
        (MARKDOWN.replace("`x.y()`", "`x.y`"), "verbatim"),
        (MARKDOWN.replace("[the guide][g]", "the guide"), "inline"),
        (MARKDOWN.replace("[the guide][g]", "[指南][h]"), "inline"),  # no definition: no link
        (MARKDOWN.replace("**two**", "**two"), "inline"),
        (MARKDOWN.replace("https://a.org/b", "https://a.org/c"), "addresses"),
        (MARKDOWN.replace("\n", "\r\n"), "line endings"),
        (MARKDOWN.replace("Title\n\n", "Title\n"), "line endings"),
    ],
)
def test_each_change_to_a_markdown_document_is_named(translation: str, found: str) -> None:
    assert any(d.startswith(found) for d in differences(MARKDOWN, translation, "markdown"))


def test_words_and_emphasis_style_are_no_structure() -> None:
    translation = MARKDOWN.replace("Title", "标题").replace("*one*", "_一_").replace("See", "见")
    assert differences(MARKDOWN, translation, "markdown") == []


@pytest.mark.parametrize(
    ("translation", "found"),
    [
        (HTML.replace('<a href="/g">the <b>guide</b></a>', '<b><a href="/g">the guide</a></b>'), "inline"),
        (HTML.replace('<a href="/g">', '<a href="/h">'), "inline"),
        (HTML.replace("x &lt; y", "x < y"), "verbatim"),  # the same text, not the same bytes
        (HTML.replace("<pre>a\nb</pre>", "<pre>a b</pre>"), "verbatim"),
        (HTML.replace("</p>", ""), "blocks"),
        (HTML.replace("\n", "\r\n"), "line endings"),
    ],
)
def test_each_change_to_an_html_document_is_named(translation: str, found: str) -> None:
    assert any(d.startswith(found) for d in differences(HTML, translation, "html"))


def test_sibling_links_reordered_by_the_words_are_the_same_structure_and_nested_ones_are_not() -> None:
    source = '<p><a href="a">A</a> and <a href="b">B</a></p>'
    assert differences(source, '<p><a href="b">乙</a>和<a href="a">甲</a></p>', "html") == []
    assert differences(source, '<p><a href="a">甲<a href="b">乙</a></a></p>', "html")
