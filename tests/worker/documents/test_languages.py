"""Language identification and routing (``source_language: auto``) on real text no one here wrote: the
translations Debian's gettext catalogues ship (``/usr/share/locale/<lang>/LC_MESSAGES/*.mo``)."""

from __future__ import annotations

import functools
import gettext
import random
import re
from pathlib import Path

import pytest

from contract.options import JobOptions
from worker.documents.languages import Routing, detect, route
from worker.documents.translator import DocumentTranslator
from worker.engine.languages import ModelLanguages, iso
from worker.engine.translator import Translator

LOCALE = Path("/usr/share/locale")
CATALOGUES = {"en": "fr", "zh": "zh_CN", "fr": "fr", "de": "de", "es": "es", "ja": "ja", "ru": "ru", "pt": "pt_BR"}
_PLACEHOLDER = re.compile(r"%(\d+\$)?[-+ #0]*\d*(\.\d+)?[hlLqjzt]*[a-zA-Z%]|\{[^}]*\}|<[^>]+>|[_&](?=\w)")


@functools.cache
def strings(language: str, *, short: bool, count: int = 120) -> list[str]:
    """A seeded sample of one language's translated strings (English: the catalogues' own msgids), placeholders
    and markup taken out: ``short`` ones under 30 characters, else from 30 to 300. Which catalogues a machine
    has depends on its packages: the thresholds below hold on several sets (a minimal one, and one with a
    desktop's gtk, gstreamer and PackageKit)."""
    found: set[str] = set()
    for path in sorted((LOCALE / CATALOGUES[language] / "LC_MESSAGES").glob("*.mo")):
        if path.name.startswith("iso_"):
            continue  # iso-codes: names of places, languages and currencies, which belong to no one language
        try:
            with path.open("rb") as handle:
                catalogue = gettext.GNUTranslations(handle)._catalog  # type: ignore[attr-defined]
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        for msgid, msgstr in catalogue.items():
            source = msgid if isinstance(msgid, str) else msgid[0]
            text = source if language == "en" else msgstr
            if not source or not isinstance(text, str) or (language != "en" and text == source):
                continue
            text = " ".join(_PLACEHOLDER.sub(" ", text).split())
            if sum(ch.isalpha() for ch in text) >= 3 and (len(text) < 30) == short and len(text) <= 300:
                found.add(text)
    if len(found) < count:
        pytest.skip(f"too few {language} strings in {LOCALE} ({len(found)}): install Debian's translations")
    return random.Random(7).sample(sorted(found), count)


@pytest.mark.parametrize("language", sorted(CATALOGUES))
def test_each_language_of_the_catalogues_is_told_apart(language: str) -> None:
    found = [(text, detect(text)) for text in strings(language, short=False)]
    wrong = [(text, other) for text, other in found if other not in (language, None)]
    right = sum(other == language for _, other in found)
    # The rest: unsure (they take the job's fallback). 0.8, not more: Brazilian UI strings of a few words read as
    # Spanish or unsure more often in some machines' catalogues (pt: 100 of 120 with chromium's installed).
    assert right >= 0.8 * len(found) and len(wrong) <= 0.05 * len(found), wrong


@pytest.mark.parametrize("language", ["en", "zh", "fr", "de"])
def test_short_strings_are_told_right_or_said_to_be_unsure(language: str) -> None:
    texts = strings(language, short=True)
    decided = [(text, found) for text in texts if (found := detect(text)) is not None]
    wrong = [(text, found) for text, found in decided if found != language]
    assert len(decided) >= len(texts) // 6  # many short strings are unsure (they take the fallback)...
    assert len(wrong) <= 0.15 * len(decided), wrong  # ...and those decided mostly rightly (en: 21 of 24)


@pytest.mark.parametrize("text", ["12345", "3.14 + 2.71", "https://example.com/a/b", "---", "", "x = foo(bar)[0]"])
def test_numbers_symbols_and_code_have_no_language(text: str) -> None:
    assert detect(text) is None


def test_a_paragraph_in_another_language_takes_its_own_route() -> None:
    # Mostly English (the document's language, which a paragraph with none, "42", takes), one French paragraph.
    english, french = " ".join(strings("en", short=False)[:10]), " ".join(strings("fr", short=False)[:2])
    routing = Routing({"en": None}, "zh", "en")
    mixed = route([english, french, "42"], routing)
    assert mixed.language == "en" and mixed.copied == {1: "language_unread"} and mixed.translated
    assert not mixed.fallback
    chinese = route([" ".join(strings("zh", short=False)[:4])], routing)
    assert chinese.language == "zh" and chinese.copied == {0: "already_target"} and not chinese.translated
    assert route(["12345"], routing).fallback and route(["12345"], routing).language == "en"


def test_a_models_codes_read_as_iso_and_back() -> None:
    assert [iso(code) for code in ("fra_Latn", "zh_CN", "cmn_Hans", "pt-BR", "en_XX", "arb_Arab")] == [
        "fr", "zh", "zh", "pt", "en", "ar",
    ]  # fmt: skip
    nllb = ModelLanguages.of(_Codes(["zho_Hant", "fra_Latn", "cmn_Hans", "zho_Hans", "eng_Latn"]), None)
    assert nllb.reads == {"en": "eng_Latn", "fr": "fra_Latn", "zh": "zho_Hans"} and nllb.reads == nllb.writes
    assert nllb.pair(None, "zh") == ("en", "zh")  # the model's own default source, the target asked for


class _Codes:
    """A many-to-many tokenizer's language codes, as ``Tokenizer`` lists them."""

    def __init__(self, codes: list[str]):
        self.language_ids = {code: k for k, code in enumerate(codes)}
        self.tasks: list[dict[str, str]] = []
        self.source_role, self.target_role = "token", "forced_bos"
        self.default_source, self.default_target = "eng_Latn", None


def test_a_mixed_corpus_on_the_demo_model_translates_english_only(demo_artifact: Path) -> None:
    """English is translated; Chinese comes back as it was (``already_target``); French, German, Spanish,
    Japanese and Russian are skipped, each naming its language; numbers fall back to English."""
    translator = Translator(demo_artifact, precision="int8")
    assert translator.languages.reads == {"en": None} and translator.languages.writes == {"zh": None}
    documents = [("en", "Tom has 3 apples. The meeting starts at 9 am.")]
    others = [language for language in CATALOGUES if language != "en"]
    documents += [(language, " ".join(strings(language, short=False)[:3])) for language in others]
    documents += [("numbers", "12345 67 890")]
    routing = Routing.of(translator.languages, _auto())
    results = {r.id: r for r in DocumentTranslator(translator, routing=routing).translate(documents)}
    assert results["en"].status == "ok" and results["en"].source_language == "en" and results["en"].translation
    chinese = results["zh"]
    assert (chinese.status, chinese.translation, chinese.flags) == ("ok", dict(documents)["zh"], ["already_target"])
    for language in ("fr", "de", "es", "ja", "ru", "pt"):
        skipped = results[language]
        assert skipped.status == "skipped" and skipped.translation == "" and skipped.source_language == language
        assert f"({language}), which this artifact does not read" in (skipped.error or "")
    assert "language_fallback" in results["numbers"].flags and results["numbers"].source_language == "en"


def _auto() -> JobOptions:
    return JobOptions(source_language="auto")
