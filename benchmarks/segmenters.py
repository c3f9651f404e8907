"""Score sentence segmenters on the labelled set in ``benchmarks.segmentation_cases``.

    python -m benchmarks.segmenters

Per segmenter: cases segmented exactly right, and boundary precision / recall / F1.
"""

from __future__ import annotations

from collections.abc import Callable

from benchmarks.segmentation_cases import CASES


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


SEGMENTERS = {"pysbd": _pysbd, "sentencex": _sentencex, "blingfire": _blingfire}


def boundaries(sentences: list[str]) -> set[int]:
    """Character offsets (whitespace removed) where a sentence ends, the last one excluded."""
    ends, position = set(), 0
    for sentence in sentences[:-1]:
        position += len("".join(sentence.split()))
        ends.add(position)
    return ends


def score(split: Callable[[str], list[str]]) -> dict[str, float]:
    exact = hits = predicted = expected = 0
    for text, gold in CASES:
        got = split(text)
        exact += got == gold
        ours, theirs = boundaries(got), boundaries(gold)
        hits += len(ours & theirs)
        predicted += len(ours)
        expected += len(theirs)
    precision = hits / predicted if predicted else 1.0
    recall = hits / expected if expected else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"exact": exact / len(CASES), "precision": precision, "recall": recall, "f1": f1}


def main() -> None:
    print(f"{len(CASES)} labelled lines")
    print("| segmenter | exact lines | boundary precision | recall | F1 |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, make in SEGMENTERS.items():
        s = score(make())
        print(f"| {name} | {s['exact']:.2f} | {s['precision']:.2f} | {s['recall']:.2f} | {s['f1']:.2f} |")


if __name__ == "__main__":
    main()
