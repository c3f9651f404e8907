"""Markup formats: units and marks from Markdown and HTML, marks put back, the skeleton always kept.

The property tests run the document layer with a stand-in translator (a word -> one CJK character
map, so a phrase's translation is a substring of its sentence's, and a shuffled variant, so it is
not): they test the markup logic on thousands of documents in seconds. The real model's runs over
realistic documents are in ``tests/worker/test_documents.py``.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from html.parser import HTMLParser
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.documents.degeneration import SYMPTOMS
from worker.documents.marks import Mark
from worker.documents.markup import place, units
from worker.documents.structure import differences
from worker.documents.translator import MARKUP_SYMPTOMS, DocumentTranslator
from worker.engine.search import DecodingOptions
from worker.engine.translation import Translation

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

    def translate_batch(
        self, texts: list[str], options: object = None, memory: object = None, phrases: object = None
    ) -> list[Translation]:
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
    sentence = lambda: rng.choice(SENTENCES)
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


# ------------------------------------------------------------------------------------------------
# Nothing lost, nothing repeated, nothing silently left in the source language


class Identity(StandIn):
    """The translation is the source: whatever the output loses or repeats, the markup layer did. Every
    sentence counts as a whole window's worth of tokens, so each is translated alone: an English
    "translation" of several sentences would not split back the way the source did (not a markup matter)."""

    def __init__(self) -> None:
        super().__init__()
        self.tokenizer = type("Tokenizer", (), {"encode": staticmethod(lambda text: ["x"] * 32)})()

    def _translate(self, text: str) -> str:
        return text


def identity(document: str, fmt: str):
    (result,) = DocumentTranslator(Identity(), format=fmt, budget=32).translate([("d", document)])  # type: ignore[arg-type]
    return result


@pytest.mark.parametrize(
    ("line", "plain"),
    [
        ("Tom &amp; Jerry are a pair.", "Tom & Jerry are a pair."),
        ("AT&amp;T &#38; Co &AMP; more.", "AT&T & Co & more."),
        ("Tom &amp;amp; Jerry.", "Tom &amp; Jerry."),
        ("Tom \\\\ Jerry \\* here.", "Tom \\ Jerry * here."),
        ("Tom &amp Jerry &copy here.", "Tom &amp Jerry &copy here."),  # no semicolon: no entity in CommonMark
    ],
)
def test_markdown_entities_and_escapes_map_back_and_their_line_is_translated(line: str, plain: str) -> None:
    (unit,) = units(line, "markdown")
    assert (unit.plain, unit.raw) == (plain, False)
    result = translate(line, "markdown")
    assert not re.search("Tom|Jerry", result.translation) and result.status == "ok", result.translation
    assert "markup_unparsed" not in result.flags


@pytest.mark.parametrize(
    "line",
    [
        "See [the docs](<a)b>) now, Tom.",
        'See [the docs](b "t)") now, Tom.',
        "![a [b] c](x.png) Tom has 3 apples.",
        "Go to <http://a.b/%20x?y=1&amp;z> now, Tom.",
    ],
)
def test_markdown_links_images_and_autolinks_map_back_and_their_line_is_translated(line: str) -> None:
    (unit,) = units(line, "markdown")
    assert not unit.raw and "Tom" in unit.plain
    result = translate(line, "markdown")
    assert "Tom" not in result.translation and "markup_unparsed" not in result.flags, result.translation
    assert markdown_skeleton(result.translation) == markdown_skeleton(line)
    same = identity(line, "markdown").translation
    assert (markdown_skeleton(same), markdown_text(same)) == (markdown_skeleton(line), markdown_text(line))


def test_a_table_cell_with_an_escaped_pipe_is_translated_and_the_pipe_kept_escaped() -> None:
    doc = "| Tom \\| Jerry | `a\\|b` |\n|---|---|\n| x | y |"
    first, second = units(doc, "markdown")[:2]
    assert (first.plain, [m.open for m in first.marks]) == ("Tom  Jerry", ["\\|"])  # the pipe: an atom
    assert (second.plain, [m.open for m in second.marks]) == ("a\\|b", ["`"])  # code: as it stands
    result = translate(doc, "markdown")
    assert "Tom" not in result.translation and result.translation.count("\\|") == 2, result.translation
    assert markdown_skeleton(result.translation) == markdown_skeleton(doc)
    assert identity(doc, "markdown").translation == doc


def test_a_markdown_line_whose_markup_cannot_be_mapped_is_translated_as_text_and_flagged(monkeypatch) -> None:
    from worker.documents import markdown

    def unmatched(self: Any, children: Any) -> Any:
        raise markdown._Unmatched("test")

    monkeypatch.setattr(markdown._InlineMatch, "run", unmatched)
    doc = "# Title\n\nTom has **3 apples**."
    found = units(doc, "markdown")
    assert [(u.plain, u.raw, doc[u.start : u.end]) for u in found] == [
        ("Title", True, "Title"),
        ("Tom has **3 apples**.", True, "Tom has **3 apples**."),
    ]
    result = translate(doc, "markdown")
    assert "Tom" not in result.translation and result.translation.startswith("# ")
    assert result.status == "partial" and "markup_unparsed" in result.flags
    assert all("markup_unparsed" in s.flags for s in result.sentences)


@pytest.mark.parametrize(
    ("document", "plain"),
    [
        ("<p>AT&T rocks; yes</p>", "AT&T rocks; yes"),
        ("<p>x &#169 y; z</p>", "x © y; z"),
        ("<p>x &#x41z; &copy2 b; &amp c;</p>", "x Az; ©2 b; & c;"),
        ("<p>a &amp; b &notin; c</p>", "a & b ∉ c"),
        ("<p>a &amp", "a &"),  # at the end of the input the parser hands the entity over as data
    ],
)
def test_html_entities_with_or_without_semicolon_are_decoded_once(document: str, plain: str) -> None:
    (unit,) = units(document, "html")
    assert unit.plain == plain
    assert html_text(identity(document, "html").translation) == html_text(document)


@pytest.mark.parametrize(
    "document",
    [
        "<p>Hello <meta charset=x> world</p>",
        '<p>A <video controls><source src="a.mp4"><track src="t.vtt"></video> b</p>',
        "<p>Tom <b>bye</p>",
        "<p>Tom <b>has <i>three</b> apples</p>",
        "<p>a <embed src=x> b <link rel=x> c <param name=x> d <area> e <col> f <base href=x> g</p>",
        "<p>Tom <span class=x>has</p><p>three</span> apples</p>",
        "<p>a <source src=x/> b</p>",
    ],
)
def test_html_void_and_unclosed_tags_are_kept(document: str) -> None:
    result = identity(document, "html")
    assert tags(result.translation) == tags(document), result.translation
    assert html_text(result.translation) == html_text(document)
    assert result.status == "ok"


def test_an_empty_element_put_back_on_its_own_keeps_its_close() -> None:
    placed = place("A b", "甲 乙", [Mark(2, 2, "<video>", "</video>")], {}, "html")
    assert "<video></video>" in placed.text


def assert_status_explained(result: Any) -> None:
    """Markup that could not be lifted out, or that the translation changed (``markup_changed``), makes
    its document partial; nothing else here may, but the translation checks (runs of spaces between
    atoms read as a repetition)."""
    assert result.status == "ok" or set(result.flags) & (SYMPTOMS | MARKUP_SYMPTOMS), result.flags
    assert not set(result.flags) & MARKUP_SYMPTOMS or result.status != "ok"


def tags(document: str) -> Counter[str]:
    return Counter(map(repr, html_skeleton(document)))


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def html_text(document: str) -> str:
    """The text a browser shows, entities decoded, without whitespace."""
    parser = _Text()
    parser.feed(document)
    parser.close()
    return "".join("".join(parser.text).split())


def markdown_text(document: str) -> str:
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    text = [
        child.content
        for token in parser.parse(document)
        for child in (token.children or [])
        if child.type in ("text", "code_inline")
    ]
    return "".join("".join(text).split())


WORDS = ["Tom", "has", "three", "apples", "the", "park", "is", "free", "today", "AT", "T", "où", "汤姆"]
ENTITIES = ["&amp;", "&copy;", "&#169;", "&#xA9;", "&eacute;", "&notin;", "&AMP;", "&nbsp;", "&lt;", "&gt;", "&#35;"]
BARE = ["&amp", "&copy", "&#169", "&#xa9", "&T", "&", "&unknown;", "&#;", "&#xZ;", "&# ", "&#169a"]  # HTML decodes some
ONLY = {
    True: [
        "<?php x ?>",
        "<!x>",
        "<![CDATA[y]]>",
        "<!-- z -->",
        "<code>x &lt; 1</code>",
        '<a href="/x?a=1&amp;b=2">T</a>',
    ],  # fmt: skip
    False: ["\\*", "\\_", "\\[", "\\\\", "\\#", "\\>", "`x &lt; 1`", "*Tom has*", "**T**", "[T](/x?a=1&b=2)"],
}
VOID = ["<br>", "<hr>", '<img src="x.png">', "<wbr>", "<meta charset=x>", "<source src=a>", "<embed src=e>",
        "<link rel=x>", "<param name=p>", "<track src=t>", "<area>", "<col>", "<base href=b>", "<input>",
        "<br/>"]  # fmt: skip
UNCLOSED = ["<b>", "<i>", '<span class="x">', "<a href=/x>", "</b>", "</span>"]


def _pieces(html: bool) -> st.SearchStrategy[str]:
    words = st.sampled_from(WORDS) | st.sampled_from(WORDS).map(lambda w: w + ";" if html else w + ".")
    entities = st.sampled_from(ENTITIES + BARE + ONLY[html])
    attached = st.tuples(st.sampled_from(WORDS), entities, st.sampled_from(WORDS)).map("".join)
    tags = st.sampled_from(VOID + UNCLOSED) | st.sampled_from(["b", "i", "em"]).map(lambda t: f"<{t}>x</{t}>")
    return words | entities | attached | tags


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(_pieces(html=True), min_size=1, max_size=12, unique=True), min_size=1, max_size=4),
       st.booleans())  # fmt: skip
def test_html_with_random_entities_void_and_unclosed_tags_keeps_every_tag_and_word_once(
    blocks: list[list[str]], wrapped: bool
) -> None:
    document = "\n".join(f"<p>{' '.join(b)}</p>" if wrapped else " ".join(b) for b in blocks)
    result = identity(document, "html")
    assert tags(result.translation) == tags(document), result.translation
    assert html_text(result.translation) == html_text(document), result.translation
    assert_status_explained(result)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(_pieces(html=False), min_size=1, max_size=12, unique=True), min_size=1, max_size=4))
def test_markdown_with_random_entities_and_inline_html_keeps_every_tag_and_word_once(blocks: list[list[str]]) -> None:
    document = "\n\n".join(" ".join(b) for b in blocks)
    result = identity(document, "markdown")
    assert Counter(map(repr, markdown_skeleton(result.translation))) == Counter(map(repr, markdown_skeleton(document)))
    assert markdown_text(result.translation) == markdown_text(document), result.translation
    assert_status_explained(result)


# ------------------------------------------------------------------------------------------------
# Real documents' constructs (issue 31): each kept with the real structure check


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize(
    "document",
    [
        "Read the [guide][docs] and [please\ndonate today][].\n\n[docs]: https://a.org/d\n[please donate today]: https://a.org/p\n",
        "See [Flask] for more.\n\n[Flask]: https://flask.org/\n",
        "[![Build Status](https://ci.org/b.svg)](https://ci.org/job) Tom has 3 apples.\n",
        "Tom has 3 apples and `.x` files and `idna.encode()` here.\n",
        "Run `git commit\n--no-verify` to skip it. Where is the park?\n",
        "> Tom *has 3\n> apples* today.\n",
        "Website: https://github.com/x/y_z\n\nhttps://a.org/b\n",
    ],
)
def test_markdown_links_code_and_addresses_from_real_readmes_keep_their_structure(document: str, shuffle: bool) -> None:
    result = translate(document, "markdown", shuffle)
    assert differences(document, result.translation, "markdown") == [], result.translation


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize(
    "document",
    [
        '<p><a href="a.html">Next</a> | <a href="b.html">Up</a> | <a href="c.html">Index</a></p>',
        '<p><small>Where is <a href="/park">the park</a>?</small></p>',
        "<p>Call <code>setsockopt(fd, SOL_IP, ...)</code> now.</p>",
        '<p>Mail <CODE CLASS="email">&#60;<A HREF="mailto:x@y.org">x@y.org</A>&#62;</CODE> today.</p>',
        '<p><a name="xsltDebug"/>Tom has 3 apples.</p>',
        "<p>Tom has 3 apples.</p>\r\n<pre>x = 1\r\ny = 2</pre>\r\n",
    ],
)
def test_html_from_real_pages_keeps_nesting_code_and_anchors(document: str, shuffle: bool) -> None:
    result = translate(document, "html", shuffle)
    assert differences(document, result.translation, "html") == [], result.translation


def test_code_goes_back_as_the_source_wrote_it_even_when_the_translation_lost_it() -> None:
    source = "Tom has 3 apples and .x files."
    placed = place(source, "汤姆有3个苹果。明年价格下降了7%。", [Mark(21, 23, "`", "`", True, whole="`.x`")], {})
    assert placed.moved and placed.text.count("`.x`") == 1 and placed.text.startswith("汤姆")


def test_marks_that_cannot_nest_as_in_the_source_go_to_their_relative_places() -> None:
    source = "Next Up Index"  # three sibling links whose words the translation does not have
    marks = [Mark(0, 4, "<a href=n>", "</a>"), Mark(5, 7, "<a href=u>", "</a>"), Mark(8, 13, "<a href=i>", "</a>")]
    placed = place(source, "下一个 上 索引", marks, {}, "html")
    assert placed.moved
    assert re.fullmatch(r"(<a href=[nui]>[^<]*</a>[^<]*){3}", placed.text), placed.text  # siblings, never nested


def test_crlf_documents_come_back_with_crlf_and_spans_into_the_source_as_written() -> None:
    document = "# Where is the park?\r\n\r\nTom has 3 apples.\r\n\r\n```\r\nx = 1\r\n```\r\n"
    result = translate(document, "markdown")
    assert result.translation.count("\r\n") == document.count("\r\n")
    assert "\n" not in result.translation.replace("\r\n", "")
    assert "```\r\nx = 1\r\n```\r\n" in result.translation
    (start, end) = result.sentences[1].source
    assert document[start:end] == "Tom has 3 apples."
    start, end = result.sentences[1].target
    assert "\r" not in result.translation[start:end] and result.translation[start:end]


class Backticks(StandIn):
    """A model that writes Markdown of its own: a code span the source never had."""

    def _translate(self, text: str) -> str:
        return "汤姆有`3`个苹果。"


def test_a_translation_whose_structure_changed_is_flagged_and_never_ok() -> None:
    engine = DocumentTranslator(Backticks(), format="markdown")  # type: ignore[arg-type]
    (result,) = engine.translate([("d", "# Tom has 3 apples.\n\n[Tom](https://t.org) has 3 apples.\n")])
    assert result.status == "partial" and "markup_changed" in result.flags
    (clean,) = DocumentTranslator(StandIn(), format="markdown").translate([("d", "# Tom has 3 apples.\n")])  # type: ignore[arg-type]
    assert clean.status == "ok" and "markup_changed" not in clean.flags


@pytest.mark.parametrize(
    ("document", "fmt"),
    [
        ('<p>Tom <span class="x">has <img src="x.png"></span> 3 apples.</p>', "html"),
        ("<p><a href=u><img src=i> Tom has</a> 3 apples.</p>", "html"),
        ("See [Tom ![i](y)](u) now. [![b](x) Tom has](u) 3 apples.", "markdown"),
    ],
)
def test_an_atom_at_the_edge_of_an_elements_words_stays_inside_it(document: str, fmt: str) -> None:
    for shuffle in (False, True):
        result = translate(document, fmt, shuffle)
        assert differences(document, result.translation, fmt) == [], result.translation
