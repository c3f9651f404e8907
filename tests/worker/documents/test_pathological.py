"""Input built to be slow stays linear: work is counted (tokenizer calls, pattern starts), never timed.

Before, a 100,000-character line without a space took 367 s: splitting recounted every prefix of an
over-long word (one tokenizer call per character), sentence ends were searched from every mark of a
run of punctuation, e-mail addresses from every character of a long word, and pysbd looked each of
a piece's sentences up from the piece's start."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import pytest

from export_tools.fixtures import demo_corpus
from worker.documents import segment as segment_module
from worker.documents.segment import Sentence, segment
from worker.documents.split import split_long
from worker.documents.translator import DocumentTranslator
from worker.engine.translator import Translator

BUDGET = 64


class Counting:
    """A token count (a token every ``chars`` characters) that counts its calls."""

    def __init__(self, chars: int = 3) -> None:
        self.chars, self.calls = chars, 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        return math.ceil(len(text) / self.chars)


def no_space(chars: int, seed: int = 1) -> str:
    """Demo-domain prose with every space taken out: sentence ends glued to the next word, no space."""
    rng = random.Random(seed)
    text = ""
    while len(text) < chars:
        text += "".join(demo_corpus.sentence(rng).en.split())
    return text[:chars]


@pytest.mark.parametrize("text", [no_space(100_000), "a" * 100_000, "." * 100_000], ids=["prose", "a", "dots"])
def test_a_100k_word_is_cut_into_pieces_within_budget_that_cover_it(text: str) -> None:
    count = Counting()
    pieces = split_long(Sentence(0, len(text), 0, text), count, BUDGET)
    assert "".join(p.text for p in pieces) == text and all(count(p.text) <= BUDGET for p in pieces)
    assert all(p.end == q.start for p, q in zip(pieces, pieces[1:]))
    assert all(len(p.text) == BUDGET * count.chars for p in pieces[:-1])  # each piece as long as fits


def test_cutting_a_word_counts_each_piece_a_logarithmic_number_of_times() -> None:
    """Galloping then halving to the first character past the budget: about 2 log2(piece) calls per
    piece, where counting every prefix took one per character."""
    calls = {}
    for chars in (25_000, 100_000):
        count = Counting()
        pieces = split_long(Sentence(0, chars, 0, "a" * chars), count, BUDGET)
        calls[chars] = count.calls
        assert count.calls <= len(pieces) * (2 * math.log2(BUDGET * count.chars) + 4)
    assert calls[100_000] <= 4.2 * calls[25_000]


def test_cutting_between_words_counts_each_piece_a_logarithmic_number_of_times() -> None:
    text = " ".join(["word"] * 25_000)
    count = Counting(chars=5)
    pieces = split_long(Sentence(0, len(text), 0, text), count, BUDGET)
    assert " ".join(p.text for p in pieces) == text and all(count(p.text) <= BUDGET for p in pieces)
    assert count.calls <= len(pieces) * (2 * math.log2(BUDGET) + 6)  # not one call per word


def test_a_run_of_sentence_punctuation_is_tried_from_its_first_mark_only() -> None:
    """Tried from every mark, each try rescanned the run to its end: quadratic in a line of dots."""
    line = "Stop" + "." * 50 + " Go"
    assert [m.span() for m in segment_module._SAFE_END.finditer(line)] == [(4, 55)]
    assert segment_module._SAFE_END.match(line, 5) is None  # inside the run


def test_an_address_is_looked_for_at_most_64_characters_before_its_at() -> None:
    """The local part of an address is at most 64 characters (RFC 5321): a long word with no @ is not
    rescanned to its end from every character."""
    text = "x" * 100 + "@example.com"
    assert segment_module._PROTECTED.search(text).span() == (36, 112)  # type: ignore[union-attr]
    assert segment_module._PROTECTED.search("tom.lee+news@example.com").span() == (0, 24)  # type: ignore[union-attr]


def test_pysbd_sentences_are_found_in_one_pass_not_by_its_span_search(monkeypatch) -> None:
    """pysbd's own span search looks every sentence up from the piece's start: quadratic in a piece
    of many equal sentences (``.….…``). The segmenter never calls it."""
    import pysbd

    def refuse(*_: object) -> None:
        raise AssertionError("pysbd's quadratic span search was used")

    monkeypatch.setattr(pysbd.Segmenter, "sentences_with_char_spans", refuse)
    line = "Tom has 3 apples. " * 2_000
    assert [s.text for s in segment(line)] == ["Tom has 3 apples."] * 2_000
    sentences = segment(".…" * 10_000)
    assert "".join(s.text for s in sentences) == ".…" * 10_000


def test_neighbouring_sentences_without_a_word_are_one_sentence() -> None:
    """Each is copied, not translated; 50,000 of them were 50,000 token counts and 5,556 windows."""
    assert [s.text for s in segment(".…" * 50_000)] == [".…" * 50_000]
    worded = ["Tom has 3 apples.", "...", "What?", "— ok"]  # a wordless sentence between worded ones stays
    assert [s.text for s in segment(" ".join(worded))] == worded
    assert [s.text for s in segment("Wow!!! 😀😀. Great. ... !!!")] == ["Wow!!! 😀😀.", "Great.", "... !!!"]


@pytest.fixture(scope="module")
def documents(demo_artifact: Path) -> DocumentTranslator:
    return DocumentTranslator(Translator(demo_artifact, precision="int8"), budget=BUDGET)


def test_planning_a_100k_line_without_spaces_fits_the_budget_with_linear_tokenizer_calls(documents) -> None:
    tokenizer = documents.translator.tokenizer
    encode = tokenizer.encode
    calls = {}
    for chars in (25_000, 100_000):
        text = no_space(chars)
        counted = [0]

        def counting(text: str, framing: object = None, counted: list[int] = counted) -> list[int]:
            counted[0] += 1
            return encode(text, framing)  # type: ignore[arg-type]

        tokenizer.encode = counting  # type: ignore[method-assign]
        try:
            plan = documents.plan("long", text)
        finally:
            del tokenizer.encode
        calls[chars] = counted[0]
        assert "".join(s.text for s in plan.sentences) == text  # nothing lost, nothing added
        assert all(len(encode(s.text)) <= BUDGET for s in plan.sentences)
        assert counted[0] <= 20 * len(plan.sentences)  # a few calls per piece, not one per character
    assert calls[100_000] <= 4.4 * calls[25_000]


def test_long_runs_and_blobs_plan_within_budget(documents) -> None:
    rng = random.Random(0)
    base64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    blob = "".join(rng.choice(base64) for _ in range(20_000))
    for text in ("." * 20_000, "!" * 20_000, "a." * 10_000, ".…" * 10_000, blob, "x" * 19_999 + "@", "https://" + blob):
        plan = documents.plan("odd", text)
        assert re.sub(r"\s", "", "".join(s.text for s in plan.sentences)) == text
        assert all(len(documents.translator.tokenizer.encode(s.text)) <= BUDGET for s in plan.sentences)
