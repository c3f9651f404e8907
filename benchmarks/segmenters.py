"""Score sentence segmenters on the labelled sets in ``benchmarks.segmentation_cases``.

    python -m benchmarks.segmenters

Per segmenter and set (the first 40 lines, the 60 grown towards pysbd's misses, 80 written blind, all): lines
segmented exactly right, and boundary precision / recall / F1. "ours" is ``worker.documents.segment``:
pysbd with the corrections described there.
"""

from __future__ import annotations

from collections.abc import Callable

from benchmarks.segmentation_cases import CASES, GROWN, HELD_OUT


def _pysbd() -> Callable[[str], list[str]]:
    import pysbd

    segmenter = pysbd.Segmenter(language="en", clean=False)
    return lambda text: [s.strip() for s in segmenter.segment(text) if s.strip()]


def _sentencex() -> Callable[[str], list[str]]:
    import sentencex

    return lambda text: [s.strip() for s in sentencex.segment("en", text) if s.strip()]


def _blingfire() -> Callable[[str], list[str]]:
    import blingfire

    return lambda text: [s.strip() for s in blingfire.text_to_sentences(text).split("\n") if s.strip()]


def _ours() -> Callable[[str], list[str]]:
    from worker.documents.segment import segment

    return lambda text: [s.text for s in segment(text)]


SEGMENTERS = {"ours": _ours, "pysbd": _pysbd, "sentencex": _sentencex, "blingfire": _blingfire}
SETS = {"first 40": CASES, "grown 60": GROWN, "held-out 80": HELD_OUT, "all 180": CASES + GROWN + HELD_OUT}


def boundaries(sentences: list[str]) -> set[int]:
    """Character offsets (whitespace removed) where a sentence ends, the last one excluded."""
    ends, position = set(), 0
    for sentence in sentences[:-1]:
        position += len("".join(sentence.split()))
        ends.add(position)
    return ends


def score(split: Callable[[str], list[str]], cases: list[tuple[str, list[str]]]) -> dict[str, float]:
    exact = hits = predicted = expected = 0
    for text, gold in cases:
        got = split(text)
        exact += got == gold
        ours, theirs = boundaries(got), boundaries(gold)
        hits += len(ours & theirs)
        predicted += len(ours)
        expected += len(theirs)
    precision = hits / predicted if predicted else 1.0
    recall = hits / expected if expected else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"exact": exact / len(cases), "precision": precision, "recall": recall, "f1": f1}


def main() -> None:
    print("| segmenter | set | exact lines | boundary precision | recall | F1 |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for name, make in SEGMENTERS.items():
        split = make()
        for label, cases in SETS.items():
            s = score(split, cases)
            print(f"| {name} | {label} | {s['exact']:.3f} | {s['precision']:.3f} | {s['recall']:.3f} | {s['f1']:.3f} |")


if __name__ == "__main__":
    main()
