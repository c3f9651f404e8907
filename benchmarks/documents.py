"""Document-layer benchmark: time per sentence for documents of 10, 100 and 1,000 sentences.

    python -m benchmarks.documents

Demo artifact (INT8, 2 threads, the model's beam 4), documents built from demo-domain sentences
(7 per paragraph), with overlap 0 and 1 so the cost of context sentences shows. Then the planning
alone (sanitise, segment, split, count tokens, windows) of documents of 0.1, 1 and 10 MB, to show
it stays linear in the document's length. Builds the demo artifact under build/bench-docs if it is
missing.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from export_tools.fixtures import demo_corpus
from worker.engine.translator import Translator

ARTIFACT = Path("build/bench-docs/demo")
SIZES = (10, 100, 1000)
PLAN_MEGABYTES = (0.1, 1, 10)


def document(sentences: int, seed: int) -> str:
    rng = random.Random(seed)
    parts = [demo_corpus.sentence(rng).en for _ in range(sentences)]
    return "\n\n".join(" ".join(parts[i : i + 7]) for i in range(0, sentences, 7))


def ensure_artifact() -> None:
    """Build the demo artifact under build/bench-docs if it is missing."""
    if not (ARTIFACT / "manifest.json").exists():
        from export_tools.build import build
        from export_tools.cli import DEMO_CHECKPOINT

        build(str(DEMO_CHECKPOINT), ARTIFACT, ["fp32", "int8"], force=True)


def main() -> None:
    from worker.documents.translator import DocumentTranslator
    from worker.engine.translator import Translator

    ensure_artifact()
    translator = Translator(ARTIFACT, precision="int8", threads=2)
    print("| sentences | overlap | seconds | ms per sentence | windows retranslated |")
    print("| ---: | ---: | ---: | ---: | --- |")
    for overlap in (0, 1):
        documents = DocumentTranslator(translator, overlap=overlap)
        documents.translate([("warm-up", document(5, 0))])
        for size in SIZES:
            started = time.perf_counter()
            (result,) = documents.translate([(f"doc-{size}", document(size, size))])
            elapsed = time.perf_counter() - started
            restitched = "yes" if "restitched" in result.flags else "no"
            print(f"| {size} | {overlap} | {elapsed:.2f} | {1000 * elapsed / size:.1f} | {restitched} |", flush=True)
    plan_rows(translator)


def plan_rows(translator: Translator) -> None:
    from worker.documents.translator import DocumentTranslator

    documents = DocumentTranslator(translator, max_chars=11_000_000)
    sentence_chars = len(document(1000, 0)) / 1000
    print("\n| document | layout | sentences | windows | planning seconds | seconds per MB |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for megabytes in PLAN_MEGABYTES:
        for layout in ("paragraphs", "one line"):
            text = document(int(megabytes * 1e6 / sentence_chars), 7)
            text = text.replace("\n\n", " ") if layout == "one line" else text
            started = time.perf_counter()
            plan = documents.plan("big", text)
            elapsed = time.perf_counter() - started
            size = len(text.encode()) / 1e6
            counts = f"{len(plan.sentences):,} | {len(plan.windows):,}"
            print(f"| {size:.1f} MB | {layout} | {counts} | {elapsed:.1f} | {elapsed / size:.1f} |", flush=True)


if __name__ == "__main__":
    main()
