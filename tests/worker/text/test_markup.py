"""Markup formats: units and marks from Markdown and HTML, marks put back, the skeleton always kept.

The property tests run the document layer with a stand-in translator (a word -> one CJK character
map, so a phrase's translation is a substring of its sentence's, and a shuffled variant, so it is
not): they test the markup logic on thousands of documents in seconds. The real model's runs over
realistic documents are in ``tests/worker/test_documents.py``.
"""

from __future__ import annotations

import random
import re
from html.parser import HTMLParser
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.documents import DocumentTranslator
from worker.engine.search import DecodingOptions
from worker.engine.translator import Translation
from worker.text.markup import Mark, place, units

SENTENCES = ["Tom has 3 apples.", "The meeting starts at 9 am.", "Where is the park?", "Delivery is free today."]


class StandIn:
    """What ``DocumentTranslator`` needs of a ``Translator``: each word becomes one CJK character."""

    max_positions = 512
    artifact = type("Artifact", (), {"precisions": ["int8"]})()

    def __init__(self, shuffle: bool = False):
        self.shuffle = shuffle
        self.tokenizer = type("Tokenizer", (), {"encode": staticmethod(lambda text: text.split() + ["</s>"])})()

    def options(self, **overrides: Any) -> DecodingOptions:
        return DecodingOptions(**{k: v for k, v in overrides.items() if v is not None})

    def at_precision(self, precision: str) -> StandIn:
        return self

    def translate_batch(self, texts: list[str], options: DecodingOptions | None = None) -> list[Translation]:
        return [Translation(self._translate(t), [], 0.0) for t in texts]

    def _translate(self, text: str) -> str:
        words = [w.strip(".?!") for w in text.split() if w.strip(".?!")]
        chars = [w if w.isdigit() else chr(0x4E00 + sum(map(ord, w)) % 2000) for w in words]
        if self.shuffle:
            random.Random(text).shuffle(chars)
        stops = len(re.findall(r"[.?!](?:\s|$)", text))
        return "".join(chars) + "。" * min(1, stops) if stops <= 1 else "。".join(chars[:stops]) + "。"


def translate(document: str, fmt: str, shuffle: bool = False):
    engine = DocumentTranslator(StandIn(shuffle), format=fmt, budget=64)  # type: ignore[arg-type]
    (result,) = engine.translate([("d", document)])
    return result


# ------------------------------------------------------------------------------------------------
# Units and marks


def test_markdown_code_tables_quotes_and_emphasis_become_units_and_marks() -> None:
    doc = "# Where is the *park*?\n\n> > It is raining.\n\n| a | Tom has 3 apples. |\n|---|---|\n\n```\nx = 1\n```\n"
    found = [
        (doc[u.start : u.end], u.plain, [(m.start, m.end, m.open, m.close) for m in u.marks])
        for u in units(doc, "markdown")
    ]
    assert found == [
        ("Where is the *park*?", "Where is the park?", [(13, 17, "*", "*")]),
        ("It is raining.", "It is raining.", []),
        ("a", "a", []),
        ("Tom has 3 apples.", "Tom has 3 apples.", []),
    ]  # the fence, the quote markers and the pipes are no units


def test_markdown_links_code_images_and_entities_map_back_to_the_source() -> None:
    doc = 'See [the docs](https://x.org/a?b=1&c=2 "t"), `x = 1` and ![logo](l.png) &#39;now&#39;.'
    (unit,) = units(doc, "markdown")
    assert unit.plain == "See the docs, x = 1 and  'now'."
    assert [(m.open, m.close, m.verbatim) for m in unit.marks] == [
        ("[", '](https://x.org/a?b=1&c=2 "t")', False),
        ("`", "`", True),
        ("![logo](l.png)", "", False),
    ]
    assert doc[unit.source(unit.plain.index("'now"))] == "&"  # the entity, where it stood


def test_html_block_tags_split_units_and_inline_tags_are_marks() -> None:
    doc = (
        '<h1>Tom&#39;s <b>Shop</b></h1>\n<p class="x">A &amp; B.<br>C <a href="/?a=1&amp;b=2">here</a>.</p><pre>x</pre>'
    )
    found = [(u.plain, [(m.open, m.close) for m in u.marks]) for u in units(doc, "html")]
    assert found == [
        ("Tom's Shop", [("<b>", "</b>")]),
        ("A & B.", []),
        ("C here.", [('<a href="/?a=1&amp;b=2">', "</a>")]),
    ]


def test_marks_go_around_the_whole_translation_or_the_words_they_enclosed() -> None:
    whole = place("The weather is nice today.", "今天天气很好。", [Mark(0, 26, "*", "*")], {})
    assert (whole.text, whole.moved) == ("*今天天气很好。*", False)
    words = place("Tom has 3 apples.", "汤姆有3个苹果。", [Mark(8, 16, "**", "**")], {"3 apples": "3个苹果"})
    assert (words.text, words.moved) == ("汤姆有**3个苹果**。", False)
    code = place("Run x = 1 now.", "现在运行。", [Mark(4, 9, "`", "`", verbatim=True)], {})
    assert code.moved and "`x = 1`" in code.text  # code the model lost is put back, never dropped
    html = place("A & B", "甲 & 乙", [Mark(0, 1, "<b>", "</b>")], {"A": "甲"}, "html")
    assert html.text == "<b>甲</b> &amp; 乙"


# ------------------------------------------------------------------------------------------------
# The skeleton: everything but the text, identical in every output


def markdown_skeleton(document: str) -> list[tuple]:
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    found: list[tuple] = []
    for token in parser.parse(document):
        if token.type != "inline":
            kept = token.content if token.type in ("fence", "code_block", "html_block") else ""
            found.append((token.type, token.tag, token.markup if token.type != "heading_open" else "", kept))
            continue
        for child in token.children or []:
            if child.type not in ("text", "softbreak", "hardbreak"):
                kept = child.content if child.type in ("code_inline", "html_inline") else ""
                found.append((child.type, sorted((child.attrs or {}).items()), kept))
    return found


class _Tags(HTMLParser):
    """Tags with their attributes, comments, and the text of elements that must stay as they are."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple] = []
        self.raw: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.found.append(("start", tag, attrs))
        self.raw += [tag] if tag in ("pre", "script", "style", "code") else []

    def handle_endtag(self, tag: str) -> None:
        self.found.append(("end", tag))
        if self.raw and self.raw[-1] == tag:
            self.raw.pop()

    def handle_comment(self, data: str) -> None:
        self.found.append(("comment", data))

    def handle_data(self, data: str) -> None:
        if self.raw and data.strip():
            self.found.append(("raw", data))


def html_skeleton(document: str) -> list[tuple]:
    parser = _Tags()
    parser.feed(document)
    return parser.found


BLOCKS_MD = [
    "# {s}", "## {s} {s}", "{s} {s}", "*{s}*", "_{s}_", "**{s}** {s}", "- {s}", "1. {s}", "> {s}", "> > {s}",
    "{a} **{w}** {b}", "{a} `x = 1` {b}", "See [{w}](https://x.org/a?b=1&c=2) {b}", "{a} _{w}_ {b}",
    "| {w} | {s} |\n|---|---|\n| {s} | $4.50 |", "```\nx = 1\n```", "    code line", "{s} &#39;{w}&#39;",
    "![logo](l.png) {s}", "{a} <b>{w}</b> {b}",
]  # fmt: skip
BLOCKS_HTML = [
    "<p>{s}</p>", "<h2>{s} {s}</h2>", "<p>{a} <b>{w}</b> {b}</p>", "<p><i>{s}</i></p>", "<ul><li>{s}</li></ul>",
    '<p>{a} <a href="/x?a=1&amp;b=2">{w}</a> {b}</p>', "<p>{a} &amp; {b}</p>", "<pre>x = 1</pre>",
    "<p>{a} <code>make test</code> {b}</p>", '<p>{s}<br>{s} <img src="x.png"></p>', "<!-- note -->",
    "<table><tr><td>{s}</td><td>$4.50</td></tr></table>", "<script>var a = '<b>';</script>", "<div>{s} {s}</div>",
]  # fmt: skip


def _fill(template: str, rng: random.Random) -> str:
    sentence = lambda: rng.choice(SENTENCES)  # noqa: E731
    return template.format(s=sentence(), a="Tom has", b="today.", w=rng.choice(["3 apples", "the park", "free"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(BLOCKS_MD), min_size=1, max_size=8), st.integers(0, 1000), st.booleans())
def test_every_markdown_output_keeps_the_input_skeleton(blocks: list[str], seed: int, shuffle: bool) -> None:
    rng = random.Random(seed)
    document = "\n\n".join(_fill(b, rng) for b in blocks)
    result = translate(document, "markdown", shuffle)
    assert result.status in ("ok", "partial")
    assert markdown_skeleton(result.translation) == markdown_skeleton(document), result.translation


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(BLOCKS_HTML), min_size=1, max_size=8), st.integers(0, 1000), st.booleans())
def test_every_html_output_keeps_the_input_skeleton(blocks: list[str], seed: int, shuffle: bool) -> None:
    rng = random.Random(seed)
    document = "\n".join(_fill(b, rng) for b in blocks)
    result = translate(document, "html", shuffle)
    assert html_skeleton(result.translation) == html_skeleton(document), result.translation


def test_the_text_format_leaves_markup_to_the_model() -> None:
    assert [u.plain for u in units("*Tom has 3 apples.*\n<b>x</b> &amp; y", "text")] == [
        "*Tom has 3 apples.*",
        "<b>x</b> &amp; y",
    ]


def test_unknown_formats_are_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="text, markdown, html"):
        DocumentTranslator(StandIn(), format="rst")  # type: ignore[arg-type]
