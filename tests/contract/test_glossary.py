"""Glossaries as users write them (TSV, CSV, JSON), refused with the entry named, and their terms found in
sentences longest first, never inside a word of a spaced script."""

from __future__ import annotations

import json

import pytest

from contract.glossary import Glossary, GlossaryError

TSV = "# brand names stay\nChicago\t芝加哥市\nTom\t汤米\nFanyi\t\nNew York\t纽约\nNew York City\t纽约市\n汤姆\tTom\n"


def found(glossary: Glossary, sentence: str) -> list[tuple[str, str]]:
    return [(m.words, m.term.target) for m in glossary.find(sentence)]


def test_the_three_formats_read_the_same_terms_and_an_empty_target_keeps_the_term() -> None:
    tsv = Glossary.parse(TSV.encode(), "terms.tsv")
    rows = [line.split("\t") for line in TSV.splitlines() if not line.startswith("#")]
    csv = Glossary.parse("\n".join(f'"{s}",{t}' for s, t in rows).encode(), "terms.csv")
    as_json = Glossary.parse(json.dumps([{"source": s, "target": t} for s, t in rows]).encode(), "terms.json")
    assert tsv.terms == csv.terms == as_json.terms and len(tsv.terms) == 6
    fanyi = next(t for t in tsv.terms if t.source == "Fanyi")
    assert fanyi.kept and fanyi.target == "Fanyi"
    assert tsv.sha256 != csv.sha256  # of the file as read: a manifest names exactly what was used


def test_terms_are_found_longest_first_whole_words_any_case_and_anywhere_in_chinese() -> None:
    glossary = Glossary.parse(TSV.encode(), "terms.tsv")
    assert found(glossary, "Tomorrow tom met TOM in New York City and new york.") == [
        ("tom", "汤米"), ("TOM", "汤米"), ("New York City", "纽约市"), ("new york", "纽约"),
    ]  # fmt: skip
    assert found(glossary, "Fanyi翻译 is a Fanyi-tool; fanyis are not") == [("Fanyi", "Fanyi"), ("Fanyi", "Fanyi")]
    assert found(glossary, "汤姆住在芝加哥") == [("汤姆", "Tom")]  # Chinese does not space its words
    assert found(glossary, "Atom, Tomas, tom_cat and İstanbul's Tom") == [("Tom", "汤米")]


def test_case_sensitive_terms_and_terms_of_one_target_language() -> None:
    entries = [
        {"source": "Apple", "target": "苹果公司", "case_sensitive": True},
        {"source": "apple", "target": "苹果"},
        {"source": "Tom", "target": "トム", "target_language": "ja"},
    ]
    glossary = Glossary.parse(json.dumps(entries).encode(), "terms.json")
    assert found(glossary, "Apple sells an apple and an APPLE.") == [
        ("Apple", "苹果公司"), ("apple", "苹果"), ("APPLE", "苹果"),
    ]  # fmt: skip
    assert found(glossary.into("zh"), "Tom") == [] and found(glossary.into("ja"), "Tom") == [("Tom", "トム")]


def test_a_thousand_terms_are_found_as_one_is() -> None:
    lines = [f"term{k} word{k}\tT{k}" for k in range(1000)] + ["Chicago\t芝加哥市"]
    glossary = Glossary.parse("\n".join(lines).encode(), "big.tsv")
    assert found(glossary, "In Chicago, term5 word5 and term50 word5.") == [
        ("Chicago", "芝加哥市"), ("term5 word5", "T5"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    "name,data,message",
    [
        ("t.tsv", b"Tom\ta\ntom\tb\n", "t.tsv line 2: 'tom' is already a term (line 1): keep one"),
        ("t.tsv", b"\tb\n", "t.tsv line 1: the source term is empty"),
        ("t.tsv", b"a\tb\tc\n", "t.tsv line 1: 3 fields; a line is source<TAB>target"),
        ("t.tsv", b"caf\xe9\tx\n", "t.tsv is not UTF-8 (byte 3): save it as UTF-8"),
        ("t.json", b'{"source": "a"}', "a JSON glossary is a list of"),
        ("t.json", b'[{"source": "a", "lang": "zh"}]', "t.json entry 1: unknown field 'lang'"),
        ("t.json", b'[{"source": 3}]', "t.json entry 1: source must be str"),
        ("t.json", b"[{", "t.json is not JSON (line 1"),
    ],
)
def test_a_glossary_that_cannot_be_used_is_refused_naming_the_entry(name: str, data: bytes, message: str) -> None:
    with pytest.raises(GlossaryError) as refused:
        Glossary.parse(data, name)
    assert message in str(refused.value)
