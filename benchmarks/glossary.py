"""What a glossary costs the document layer: the demo dev set without a glossary and with 1,000 terms (the
issue's three, ``Chicago -> 芝加哥市``, ``Tom -> 汤米``, ``Fanyi`` kept, among 997 real English strings from
Debian's gettext catalogues), in one process, in pairs of rounds whose order alternates.

    python -m benchmarks.glossary                  # 5 pairs of rounds over the 247 sentences of the dev set
    python -m benchmarks.glossary --rounds 11
    python -m benchmarks.glossary --methods        # how each way of enforcing terms does on the dev set
    python -m benchmarks.glossary --methods --artifact build/like/nllb --target zho_Hans   # on another artifact

Demo artifact (INT8, 2 threads, the model's own search), 25 documents an engine call. Also prints how many
sentences carry a term and how many of their terms were put in, and the cost of finding terms alone.

``--methods``: the dev set's sentences that hold one of the issue's terms, through (a) placement alone (the
translation without a glossary, each term's rendering replaced: ``worker.documents.terms``), (b) constrained
search alone (``worker.engine.constrained``, every target a phrase), and (c) what the document layer does
(placement, then constrained search for the sentences placement missed). Per method: sentences holding all
their targets, those equal to the reference with the targets in it (``芝加哥`` -> ``芝加哥市``, ``汤姆`` -> ``汤米``),
their mean character similarity to it, and the engine's wall time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from benchmarks.documents import ARTIFACT, ensure_artifact
from benchmarks.routing import paired_rounds, timed_round

ISSUE = "Chicago\t芝加哥市\nTom\t汤米\nFanyi\t\n"


def _terms(count: int) -> str:
    """The issue's terms and enough unrelated real ones (the catalogues' short English strings) to make ``count``."""
    from tests.worker.documents.test_languages import strings

    words = sorted({s.strip() for s in strings("en", short=True, count=4 * count) if "\t" not in s})
    return ISSUE + "".join(f"{w}\tX{k}\n" for k, w in enumerate(words[: count - 3]))


# What the reference says where the issue's glossary wants its own target.
REFERENCE_TERMS = {"芝加哥": "芝加哥市", "汤姆": "汤米"}


def compare_methods(artifact: str, target: str | None) -> None:
    """Placement, constrained search and both, on the dev set's sentences that hold a term (see the docstring)."""
    import difflib

    from contract.glossary import Glossary
    from export_tools.cli import DEMO_DEV_SET
    from worker.documents import terms
    from worker.documents.translator import DocumentTranslator
    from worker.engine.translator import Translator

    glossary = Glossary.parse(ISSUE.encode(), "terms.tsv")
    rows = [json.loads(line) for line in DEMO_DEV_SET.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if glossary.find(r["source"])]
    sources, wanted = [r["source"] for r in rows], [_with_terms(r["reference"]) for r in rows]
    matches = [glossary.find(s) for s in sources]
    phrases = [list(dict.fromkeys(m.term.target for m in found)) for found in matches]
    translator = Translator(artifact, precision="int8", threads=2)
    options = translator.options(target_language=target)
    documents = [(str(k), s) for k, s in enumerate(sources)]
    translator.translate_batch(sources, options)  # warm-up

    def placed() -> list[str]:
        plain = [r.translation for r in DocumentTranslator(translator).translate(documents, options)]
        words = sorted({m.words for found in matches for m in found})
        alone = dict(zip(words, (t.text for t in translator.translate_batch(words, options))))
        return [terms.apply(text, found, alone).translation for text, found in zip(plain, matches)]

    methods = {
        "placement": placed,
        "constrained search": lambda: [t.text for t in translator.translate_batch(sources, options, None, phrases)],
        "placement, then constrained search": lambda: [
            r.translation for r in DocumentTranslator(translator, glossary=glossary).translate(documents, options)
        ],
    }
    print(f"{artifact}: {len(sources)} sentences hold a term")
    print("| method | all targets in | equal to the reference | similarity | seconds |")
    print("|---|---:|---:|---:|---:|")
    for name, run in methods.items():
        started = time.perf_counter()
        out = run()
        seconds = time.perf_counter() - started
        carried = sum(all(p in text for p in want) for text, want in zip(out, phrases))
        equal = sum(text == reference for text, reference in zip(out, wanted))
        similar = statistics.mean(difflib.SequenceMatcher(None, t, r).ratio() for t, r in zip(out, wanted))
        print(f"| {name} | {carried} | {equal} | {similar:.3f} | {seconds:.2f} |", flush=True)


def _with_terms(reference: str) -> str:
    for plain, term in REFERENCE_TERMS.items():
        reference = reference.replace(term, plain).replace(plain, term)
    return reference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="pairs of rounds (plain, with the glossary)")
    parser.add_argument("--terms", type=int, default=1000, help="terms in the glossary")
    parser.add_argument("--methods", action="store_true", help="compare the ways of enforcing terms, then stop")
    parser.add_argument("--artifact", default=str(ARTIFACT), help="artifact for --methods (default: the demo)")
    parser.add_argument("--target", help="target language for --methods, as the artifact names it (zho_Hans)")
    args = parser.parse_args()
    if args.methods:
        if args.artifact == str(ARTIFACT):
            ensure_artifact()
        compare_methods(args.artifact, args.target)
        return

    from contract.glossary import Glossary
    from export_tools.cli import DEMO_DEV_SET
    from worker.documents.translator import DocumentTranslator
    from worker.engine.translator import Translator

    ensure_artifact()
    sources = [json.loads(line)["source"] for line in DEMO_DEV_SET.read_text().splitlines() if line.strip()]
    documents = [(str(k), text) for k, text in enumerate(sources)]
    glossary = Glossary.parse(_terms(args.terms).encode(), "terms.tsv")
    translator = Translator(ARTIFACT, precision="int8", threads=2)
    plain, termed = DocumentTranslator(translator), DocumentTranslator(translator, glossary=glossary)
    timed_round(plain, documents[:25])  # warm-up: sessions, caches
    started = time.perf_counter()
    with_terms = [text for _, text in documents if glossary.find(text)]
    finding = (time.perf_counter() - started) / len(documents)
    results = [r for k in range(0, len(documents), 25) for r in termed.translate(documents[k : k + 25])]
    put, missed = sum(r.terms for r in results), sum(r.terms_missed for r in results)
    print(f"{len(glossary.terms)} terms; {len(with_terms)} of {len(documents)} sentences hold one; {put} put in, "
          f"{missed} missed; finding terms alone {1000 * finding:.3f} ms a sentence")  # fmt: skip
    walls = []
    for number, (base, with_glossary) in enumerate(paired_rounds(plain, termed, documents, args.rounds), 1):
        walls.append(with_glossary[0] / base[0])
        print(f"pair {number}: plain {len(documents) / base[0]:.1f} docs/s, with the glossary "
              f"{len(documents) / with_glossary[0]:.1f} docs/s; ratio {walls[-1]:.4f}", flush=True)  # fmt: skip
    spread = f"min {min(walls):.4f}, max {max(walls):.4f}"
    print(f"with/without wall, median of {args.rounds} pairs: {statistics.median(walls):.4f} ({spread})")


if __name__ == "__main__":
    main()
