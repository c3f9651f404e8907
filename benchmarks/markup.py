"""Markup handling, measured: which HTML parser, and where the marks land in real translations.

    python -m benchmarks.markup [--artifact artifacts/demo]

1. HTML parsers (html.parser, lxml, html5lib, selectolax): does what comes back reproduce the page
   byte for byte (tags, attribute quoting, entities, the parts a parser "repairs"), and how fast is it
   on a 1 MB page. A translation must keep the page's markup exactly, so only a parser that says where
   each tag sits in the source can be used to copy it rather than re-serialise it.
2. Mark placement with the demo model: documents whose emphasis, links and code sit around whole
   sentences, numbers and names, or other words; how many marks went back around the same words and
   how many had to move (flag ``markup_moved``).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from pathlib import Path

PAGE = (
    '<!DOCTYPE html>\n<html lang="en"><head><meta charset=utf-8><title>Shop</title></head><body>\n'
    "<h1 class='t'>Tom&#39;s <b>Shop</b></h1>\n<p>Tom has <b>3 apples</b> &amp; <i>pears</i>.<br>"
    'Delivery is <a href="/free?a=1&amp;b=2">free</a>.</p>\n<ul><li>Price: &euro;20 <img src=x.png alt=x>\n'
    "<li>Unclosed item</ul>\n<pre>x = 1</pre><!-- note -->\n</body></html>\n"
)


class Echo:
    """A translator whose translation of a sentence is the sentence: what is left is the markup handling."""

    max_positions = None
    artifact = type("Artifact", (), {"precisions": ["fp32"]})()
    tokenizer = type("Tokenizer", (), {"encode": staticmethod(lambda text: text.split())})()

    def options(self, **overrides: object) -> object:
        from worker.engine.search import DecodingOptions

        return DecodingOptions()

    def translate_batch(self, texts: list[str], options: object = None, memory: object = None) -> list[object]:
        from worker.engine.translation import Translation

        return [Translation(t, [], 0.0) for t in texts]


def _html_parser(page: str) -> str:
    from worker.documents.translator import DocumentTranslator

    (result,) = DocumentTranslator(Echo(), format="html", max_chars=10**8).translate([("page", page)])  # type: ignore[arg-type]
    return result.translation


def _lxml(page: str) -> str:
    import lxml.html

    return str(lxml.html.tostring(lxml.html.document_fromstring(page), encoding="unicode", doctype="<!DOCTYPE html>"))


def _html5lib(page: str) -> str:
    import html5lib

    return str(html5lib.serialize(html5lib.parse(page), omit_optional_tags=False))


def _selectolax(page: str) -> str:
    from selectolax.lexbor import LexborHTMLParser

    return str(LexborHTMLParser(page).html)


PARSERS: dict[str, Callable[[str], str]] = {
    "html.parser (ours)": _html_parser,
    "lxml": _lxml,
    "html5lib": _html5lib,
    "selectolax": _selectolax,
}


def parsers() -> None:
    import re

    tags = lambda page: re.findall(r"<[^>]*>", page)
    print("| parser | tags and attributes as written | page back byte for byte | first difference | time for 1 MB |")
    print("| --- | --- | --- | --- | ---: |")
    big = PAGE * (2**20 // len(PAGE))
    for name, run in PARSERS.items():
        try:
            back = run(PAGE)
        except ImportError:
            print(f"| {name} | not installed | | | |")
            continue
        at = next((i for i, (a, b) in enumerate(zip(back, PAGE)) if a != b), min(len(back), len(PAGE)))
        same = back == PAGE
        started = time.perf_counter()
        run(big)
        seconds = time.perf_counter() - started
        diff = "" if same else f"`{PAGE[at : at + 24]!r}` -> `{back[at : at + 24]!r}`"
        kept = "yes" if tags(back) == tags(PAGE) else "no"
        print(f"| {name} | {kept} | {'yes' if same else 'no'} | {diff} | {seconds:.2f} s |")


def placement(artifact: Path, documents: int = 40) -> None:
    import json

    from export_tools.cli import DEMO_DEV_SET
    from worker.documents.translator import DocumentTranslator
    from worker.engine.translator import Translator

    rows = [json.loads(line) for line in DEMO_DEV_SET.read_text().splitlines()]
    sentences = [r["source"] for r in rows if r["source"].count(". ") == 0][:200]
    rng = random.Random(3)
    kinds = {
        "around a sentence": lambda s: f"*{s}*",
        "around a number": lambda s: _around(s, r"\d[\d,.:%]*", "**"),
        "around a name": lambda s: _around(s, r"\b[A-Z][a-z]+\b", "**", skip_first=False),
        "link on words": lambda s: "[" + " ".join(s.split()[:2]) + "](https://x.org/?a=1) " + " ".join(s.split()[2:]),
        "code in a sentence": lambda s: s.rstrip(".") + " with `x = 1`.",
    }
    translator = Translator(artifact, threads=2)
    engine = DocumentTranslator(translator, format="markdown")
    print("| marks | sentences | kept around the same words | moved (`markup_moved`) |")
    print("| --- | ---: | ---: | ---: |")
    for kind, make in kinds.items():
        docs = [(str(i), make(rng.choice(sentences))) for i in range(documents)]
        results = engine.translate(docs)
        moved = sum("markup_moved" in s.flags for r in results for s in r.sentences)
        total = sum(len(r.sentences) for r in results)
        print(f"| {kind} | {total} | {total - moved} | {moved} |")


def _around(sentence: str, pattern: str, delimiter: str, skip_first: bool = True) -> str:
    import re

    matches = list(re.finditer(pattern, sentence))
    if not matches:
        return sentence
    match = matches[-1] if skip_first else matches[0]
    return sentence[: match.start()] + delimiter + match.group() + delimiter + sentence[match.end() :]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifact", type=Path, default=Path("artifacts/demo"), help="the demo artifact")
    args = parser.parse_args()
    parsers()
    print()
    placement(args.artifact)


if __name__ == "__main__":
    main()
