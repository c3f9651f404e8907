"""Glossary terms in translations (``worker.documents.terms``): put in where the model wrote the term, or the
sentence flagged ``term_missed``; sentences without a term exactly as without a glossary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contract.glossary import Glossary
from export_tools.cli import DEMO_DEV_SET
from worker.documents import terms
from worker.documents.translator import DocumentTranslator
from worker.engine.search import DecodingOptions
from worker.engine.translation import Translation
from worker.engine.translator import Translator

ISSUE = "Chicago\t芝加哥市\nTom\t汤米\nFanyi\tFanyi\n"  # the issue's glossary: two names, one brand kept


def test_a_target_goes_where_the_model_wrote_the_term_or_the_term_is_missed() -> None:
    glossary = Glossary.parse(ISSUE.encode(), "g.tsv")
    matches = glossary.find("Tom lives in Chicago; Fanyi too.")
    alone = {"Tom": "汤姆和汤姆是朋友。", "Chicago": "芝加哥距离芝加哥。", "Fanyi": "格蕾丝为这个瓶子付了2欧元。"}
    put = terms.apply("汤姆住在芝加哥，格蕾丝也是。", matches, alone)  # renderings: the starts the sentence holds
    assert (put.translation, put.applied, put.missed) == ("汤米住在芝加哥市，Fanyi也是。", 3, 0)
    kept = terms.apply("汤米住在芝加哥市。", matches[:2], {})  # targets already there stay
    assert (kept.translation, kept.applied, kept.missed) == ("汤米住在芝加哥市。", 2, 0)
    missed = terms.apply("他住在那里。", matches[:2], alone)  # no rendering of either in the translation
    assert (missed.translation, missed.applied, missed.missed) == ("他住在那里。", 0, 2)
    latin = Glossary.parse(b"Tom\tTommy\n", "g.tsv").find("Tom is here.")
    assert terms.apply("Thomas Tom est ici.", latin, {"Tom": "Tom ist"}).translation == "Thomas Tommy est ici."


def test_the_demo_dev_set_carries_every_term_or_says_it_does_not(demo_artifact: Path) -> None:
    """The issue's glossary on the demo dev set (real references, held out from training): each sentence with a
    term has its target, or is flagged ``term_missed``; every other sentence (the first 40 of them) is translated
    exactly as without a glossary, and a glossary of terms the set does not contain changes nothing."""
    glossary = Glossary.parse(ISSUE.encode(), "g.tsv")
    sources = [json.loads(line)["source"] for line in DEMO_DEV_SET.read_text().splitlines() if line.strip()]
    sources = [s for s in sources if glossary.find(s)] + [s for s in sources if not glossary.find(s)][:40]
    documents = [(str(k), source) for k, source in enumerate(sources)]
    translator = Translator(demo_artifact)
    plain = DocumentTranslator(translator).translate(documents)
    termed = DocumentTranslator(translator, glossary=glossary).translate(documents)
    with_terms = {k for k, (_, text) in enumerate(documents) if glossary.find(text)}
    assert len(with_terms) >= 10
    carried = lambda k: all(m.term.target in termed[k].translation for m in glossary.find(documents[k][1]))
    hits = {k for k in with_terms if carried(k)}
    missed = {k for k in with_terms if "term_missed" in termed[k].flags}
    assert hits | missed == with_terms and not hits & missed
    assert len(hits) >= 0.9 * len(with_terms), f"{len(hits)} of {len(with_terms)} carried their terms"
    assert all(termed[k].terms == len(glossary.find(documents[k][1])) for k in hits)
    others = [k for k in range(len(documents)) if k not in with_terms]
    assert [termed[k].translation for k in others] == [plain[k].translation for k in others]
    unrelated = Glossary.parse("Zanzibar\t桑给巴尔\nquux\t\n".encode(), "u.tsv")
    seen = lambda r: (r.translation, r.status, r.flags, r.sentences, r.terms)
    assert [seen(r) for r in DocumentTranslator(translator, glossary=unrelated).translate(documents)] == [
        seen(r) for r in plain
    ]


class Scripted:
    """What ``DocumentTranslator`` needs of a ``Translator``, answering from ``script``: text -> translation, and
    (text, target) -> what a constrained search writes."""

    max_positions = 512
    artifact = type("Artifact", (), {"precisions": ["int8"]})()
    tokenizer = type("Tokenizer", (), {"encode": staticmethod(lambda text: text.split() + ["</s>"])})()

    def __init__(self, script: dict[Any, str]):
        self.script = script

    def options(self, **overrides: Any) -> DecodingOptions:
        return DecodingOptions(**{k: v for k, v in overrides.items() if v is not None})

    def translate_batch(self, texts: list[str], options: Any = None, memory: Any = None, phrases: Any = None):
        wanted = phrases or [[] for _ in texts]
        keys = [(text, *must) if must else text for text, must in zip(texts, wanted)]
        return [Translation(self.script.get(key, ""), [], 0.0) for key in keys]


@pytest.mark.parametrize(
    ("forced", "translation", "flags", "counts"),
    [
        ("汤米有3个苹果。", "汤米有3个苹果。", {"term_forced"}, (1, 0)),  # written where it belongs: kept
        ("汤姆有3个苹果。汤米。", "汤姆有3个苹果。", {"term_missed"}, (0, 1)),  # tacked on after the end
        ("他有3个苹果。", "他有3个苹果。", {"term_missed"}, (0, 1)),  # the search did not write it either
        ("汤米有3个苹果苹果苹果苹果苹果苹果苹果苹果苹果苹果苹果苹果。", "他有3个苹果。", {"term_missed"}, (0, 1)),
    ],
)
def test_a_term_placement_misses_is_searched_for_and_kept_only_if_it_reads_as_one_sentence(
    forced: str, translation: str, flags: set[str], counts: tuple[int, int]
) -> None:
    glossary = Glossary.parse(b"Tom\t\xe6\xb1\xa4\xe7\xb1\xb3\n", "g.tsv")  # Tom -> 汤米
    source = "Tom has 3 apples."
    # The model translates "Tom" alone as something the sentence's translation does not hold: placement misses.
    plain = "汤姆有3个苹果。" if "汤姆" in forced else "他有3个苹果。"
    script = {source: plain, "Tom": "托马斯", (source, "汤米"): forced}
    (result,) = DocumentTranslator(Scripted(script), glossary=glossary).translate([("d", source)])  # type: ignore[arg-type]
    assert result.translation == translation
    assert flags <= set(result.flags) and (result.terms, result.terms_missed) == counts
    assert result.status == ("partial" if "term_missed" in flags else "ok")
