"""What ``source_language: auto`` costs a job: the demo corpus through the document layer with and without
routing, in one process, in pairs of rounds (plain then routed, then routed then plain, ...), the ratio taken
pair by pair.

    python -m benchmarks.routing                    # examples/corpus.jsonl x 3, 5 pairs of rounds
    python -m benchmarks.routing --copies 1 --rounds 3

Demo artifact (INT8, 2 threads, the model's own search), documents 25 at a time as a chunk's are. The
language identifier is loaded before the first round, as a worker loads it before it forks its processes
(``worker.runtime.app``): what is measured is what detection adds per document, not its load. Also prints
the detection alone (``route`` of every document's prose) per document. Builds the demo artifact under
build/bench-docs if it is missing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from benchmarks.documents import ARTIFACT, ensure_artifact

CORPUS = Path("examples/corpus.jsonl")
BATCH = 25  # documents per engine call, as the demo job's chunks


def _documents(copies: int) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]
    return [(f"{k}-{row['id']}", row["text"]) for k in range(copies) for row in rows]


def timed_round(engine: object, documents: Sequence[tuple[str, str]]) -> tuple[float, float]:
    """Wall and CPU seconds (this process's, ONNX Runtime's threads included) of one pass over ``documents``."""
    wall, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(documents), BATCH):
        engine.translate(documents[start : start + BATCH])  # type: ignore[attr-defined]
    return time.perf_counter() - wall, time.process_time() - cpu


def paired_rounds(
    plain: object, other: object, documents: Sequence[tuple[str, str]], rounds: int
) -> Iterator[tuple[tuple[float, float], tuple[float, float]]]:
    """``rounds`` pairs of rounds, ``plain``'s and ``other``'s (wall and CPU seconds each), each pair's order
    the other way round from the last: neither always runs second."""
    for number in range(rounds):
        if number % 2 == 0:
            yield timed_round(plain, documents), timed_round(other, documents)
        else:
            second = timed_round(other, documents)
            yield timed_round(plain, documents), second


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=3, help="copies of the demo corpus (200 documents each)")
    parser.add_argument("--rounds", type=int, default=5, help="pairs of rounds (plain, routed)")
    args = parser.parse_args()

    from contract.options import JobOptions
    from worker.documents import languages
    from worker.documents.translator import DocumentTranslator
    from worker.engine.translator import Translator

    ensure_artifact()
    documents = _documents(args.copies)
    translator = Translator(ARTIFACT, precision="int8", threads=2)
    routing = languages.Routing.of(translator.languages, JobOptions(source_language="auto"))
    assert routing is not None
    plain, routed = DocumentTranslator(translator), DocumentTranslator(translator, routing=routing)
    languages.load()
    timed_round(plain, documents[:BATCH])  # warm-up: sessions, caches
    started = time.perf_counter()
    for _, text in documents:
        languages.route(text.split("\n\n"), routing)
    detection = (time.perf_counter() - started) / len(documents)
    walls, cpus = [], []
    for number, (base, auto) in enumerate(paired_rounds(plain, routed, documents, args.rounds), 1):
        walls.append(auto[0] / base[0])
        cpus.append(auto[1] / base[1])
        print(
            f"pair {number}: plain {base[0]:.2f} s ({len(documents) / base[0]:.1f} docs/s, {base[1]:.2f} CPU s), "
            f"routed {auto[0]:.2f} s ({auto[1]:.2f} CPU s); routed/plain wall {walls[-1]:.4f}, CPU {cpus[-1]:.4f}",
            flush=True,
        )
    print(f"{len(documents)} documents; detection alone {1000 * detection:.2f} ms a document")
    for name, ratios in (("wall", walls), ("CPU", cpus)):
        spread = f"min {min(ratios):.4f}, max {max(ratios):.4f}"
        print(f"routed/plain {name}, median of {args.rounds} pairs: {statistics.median(ratios):.4f} ({spread})")


if __name__ == "__main__":
    main()
