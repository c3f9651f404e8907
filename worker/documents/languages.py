"""Which language a document is written in, and what becomes of it (``source_language: auto``).

A document's language is the one its input row gives (a spec's ``language_column``), else it is decided on
its prose: its text without markup, and without the sentences that are code (``worker.documents.translator``
hands over what its plan found). Each paragraph with at least ``PARAGRAPH_LETTERS`` letters is decided on its
own; a shorter one, or one the detector is unsure of, takes the document's language. The document's language is
that of most of its letters.

Each paragraph then goes one of three ways: in a language the model reads, it is translated from that
language (a many-to-many model is told its own code: ``ModelLanguages.reads``); already in the target
language, it is copied through; in a language the model cannot read, it is copied through untranslated
and flagged ``language_unread`` (its document ``partial``: never ``ok``). A document none of whose
paragraphs can be translated is not translated at all: ``already_target`` (status ``ok``, translation =
source) when it is all in the target language, else ``skipped``, the reason naming its language and what
to use instead. When the detector is unsure of the whole document (a short line, numbers, code), the
job's fallback language stands in for it, flagged ``language_fallback``.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from contract.options import JobOptions
from worker.engine.languages import ModelLanguages, iso

PARAGRAPH_LETTERS = 40  # fewer letters than this: a paragraph takes its document's language
DOCUMENT_LETTERS = 3  # fewer than this: nothing to decide on (numbers, symbols): the fallback
CONFIDENCE = 0.5  # a detection less sure than this is no detection
DETECTED_CHARS = 2000  # what is read of a longer text: its cost grows with length, its answer no more
NO_LANGUAGE = "zxx"  # py3langid's class for numbers, symbols, code
# Five times likelier a priori (BENCHMARKS.md: 76% -> 87% right on short strings of these, and 4% of the
# strings of other languages taken for one of these with confidence, on Debian's catalogues).
COMMON = frozenset("en zh fr de es ja ru pt it ko ar nl pl tr vi sv uk cs".split())
PRIOR = 5.0
NAMES = dict(
    en="English", zh="Chinese", fr="French", de="German", es="Spanish", ja="Japanese", ru="Russian", pt="Portuguese",
    it="Italian", ko="Korean", ar="Arabic", nl="Dutch", pl="Polish", tr="Turkish", vi="Vietnamese", sv="Swedish",
    uk="Ukrainian", cs="Czech",
)  # fmt: skip
_MERGED = {"wuu": "zh", "yue": "zh", "ary": "ar", "arz": "ar", "no": "nb"}


@dataclass(frozen=True)
class Routing:
    """How a job routes its documents: ``reads``, the model's languages (ISO -> the model's code, as
    ``ModelLanguages.reads``); ``target``, the ISO code of the language it writes; ``fallback``, the language
    of a document the detector is unsure of (None: such a document is skipped)."""

    reads: Mapping[str, str | None]
    target: str
    fallback: str | None = None

    @classmethod
    def of(cls, languages: ModelLanguages, options: JobOptions) -> Routing | None:
        """A job's routing on a model of ``languages`` (None: the job is not routed, it names its source language);
        a ValueError that says what the job must name."""
        if not options.routed:
            return None
        source, target = languages.pair(None, options.target_language)
        if not languages.reads:
            raise ValueError(
                "source_language auto: the artifact does not say which language it reads; re-export it with "
                "--pair SOURCE-TARGET, or give the job a source_language instead of auto"
            )
        if target is None:
            raise ValueError("source_language auto: name the job's target_language (this model writes several)")
        fallback = iso(options.fallback_language) if options.fallback_language else source
        if fallback is not None and fallback not in languages.reads:
            reads = ", ".join(languages.reads)
            raise ValueError(f"fallback_language {fallback!r} is not one this model reads ({reads})")
        return cls(languages.reads, target, fallback)


@dataclass(frozen=True)
class Route:
    """What becomes of a document: its language, and per paragraph the model's code to translate it from,
    or the flag it is copied through with (``already_target``, ``language_unread``)."""

    language: str
    paragraphs: list[str | None]  # per paragraph: the model code it is translated from (None: no code to give)
    copied: dict[int, str]  # paragraph -> the flag it is copied through with
    fallback: bool = False  # the detector was unsure: ``language`` is the job's fallback

    @property
    def translated(self) -> bool:
        """Whether any paragraph is translated."""
        return len(self.copied) < len(self.paragraphs)

    @property
    def flags(self) -> list[str]:
        return ["language_fallback"] if self.fallback else []


def route(paragraphs: Sequence[str], routing: Routing, given: str | None = None) -> Route:
    """The route of a document whose paragraphs' prose is ``paragraphs``; ``given``: its language as its input
    row says (a spec's ``language_column``): then nothing is detected."""
    found: list[str | None] = [None] * len(paragraphs)
    if given:
        whole: str | None = iso(given)
    else:
        letters = [sum(ch.isalpha() for ch in text) for text in paragraphs]
        found = [detect(text) if count >= PARAGRAPH_LETTERS else None for text, count in zip(paragraphs, letters)]
        enough = sum(letters) >= DOCUMENT_LETTERS
        whole = _majority(found, letters) or (detect(" ".join(paragraphs)) if enough else None)
    language = whole or routing.fallback or ""
    codes: list[str | None] = []
    copied: dict[int, str] = {}
    for number, own in enumerate(found):
        paragraph_language = own or language
        if paragraph_language != routing.target and paragraph_language in routing.reads:
            codes.append(routing.reads[paragraph_language])
        else:
            copied[number] = "already_target" if paragraph_language == routing.target else "language_unread"
            codes.append(None)
    return Route(language, codes, copied, fallback=whole is None)


def _majority(found: Sequence[str | None], letters: Sequence[int]) -> str | None:
    """The language of most of the letters of the paragraphs decided on their own."""
    weights: Counter[str] = Counter()
    for language, count in zip(found, letters):
        if language is not None:
            weights[language] += count
    return weights.most_common(1)[0][0] if weights else None


def skip_reason(language: str, routing: Routing) -> str:
    """Why a document in ``language`` is not translated, and what to use instead."""
    if not language:
        return "its language could not be told (too little text) and the job has no fallback_language: set one"
    reads = ", ".join(sorted(routing.reads)) or "nothing the artifact declares"
    return (
        f"written in {NAMES.get(language, language)} ({language}), which this artifact does not read (it reads "
        f"{reads}): translate it in a job whose artifact reads {language} (a many-to-many model such as M2M100 or "
        f"NLLB, or an opus-mt-{language}-{routing.target})"
    )


def detect(text: str) -> str | None:
    """The ISO code of the language ``text`` is written in; None when the detector is unsure."""
    model = _model()
    probabilities = model.identifier._decide(text[:DETECTED_CHARS])  # per class; py3langid is pinned (pyproject)
    scores = np.bincount(model.language, weights=probabilities * model.weight, minlength=len(model.languages))
    best = int(scores.argmax())
    total = float(scores.sum()) or 1.0
    language = model.languages[best]
    return language if language != NO_LANGUAGE and scores[best] / total >= CONFIDENCE else None


@dataclass(frozen=True)
class _Model:
    """py3langid's identifier, and per class of it our language (``language``: an index into ``languages``:
    ``wuu``, ``yue`` and ``zh`` are all written Chinese) and its prior (``weight``: ``PRIOR`` for the languages
    data teams meet most, 0 for a second column of a label py3langid holds twice)."""

    identifier: Any
    languages: list[str]
    language: np.ndarray  # one per class
    weight: np.ndarray  # one per class


def load() -> None:
    """Load the identifier now: a worker's main process does, before it forks (``worker.runtime.app``), so its
    processes share the model's memory and none loads it while a chunk waits."""
    _model()


@functools.cache
def _model() -> _Model:
    """py3langid's model (139 languages and ``zxx``, none), loaded once per process: 0.8 s, read only after."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    classes = [str(code) for code in identifier.nb_classes]
    ours = [_MERGED.get(code, iso(code)) for code in classes]
    languages = list(dict.fromkeys(ours))
    weight = [(PRIOR if code in COMMON else 1.0) * (code not in classes[:k]) for k, code in enumerate(classes)]
    return _Model(identifier, languages, np.array([languages.index(o) for o in ours]), np.array(weight))
