"""Documents translate to exactly the concatenation of their sentences' own translations, layout kept."""

from __future__ import annotations

import json
import random

import pytest

from export_tools.cli import DEMO_DEV_SET
from worker.documents import DocumentTranslator
from worker.engine.translator import Translator
from worker.text.segment import segment
from worker.text.split import split_long


@pytest.fixture(scope="module")
def known(demo_artifact):
    """Demo-domain sentences and their single-sentence translations (from the model itself)."""
    translator = Translator(demo_artifact, threads=2)
    rows = [json.loads(line) for line in DEMO_DEV_SET.read_text().splitlines()]
    sources = [r["source"] for r in rows if r["source"].count(". ") + r["source"].count("? ") == 0][:120]
    translations = [t.text for t in translator.translate_batch(sources)]
    return translator, list(zip(sources, translations))


@pytest.mark.parametrize("overlap", [0, 1])
@pytest.mark.parametrize("count", [1, 2, 50, 500])
def test_document_is_the_concatenation_of_its_sentence_translations(known, count: int, overlap: int) -> None:
    translator, pairs = known
    rng = random.Random(count)
    chosen = [rng.choice(pairs) for _ in range(count)]
    paragraphs = [chosen[i : i + 7] for i in range(0, count, 7)]  # 7 sentences a paragraph
    source = "\n\n".join(" ".join(en for en, _ in p) for p in paragraphs)
    expected = "\n\n".join("".join(zh for _, zh in p) for p in paragraphs)
    (result,) = DocumentTranslator(translator, budget=64, overlap=overlap).translate([("doc", source)])
    assert result.status == "ok" and len(result.sentences) == count
    assert result.timings["total"] >= result.timings["translate"] > 0
    assert result.translation.split("\n\n") and len(result.translation.split("\n\n")) == len(paragraphs)
    got = [result.translation[slice(*s.target)] for s in result.sentences]
    differ = [(en, zh, out) for (en, zh), out in zip(chosen, got) if zh != out]
    # One known model error, not a stitching one: in windows of several "The shop sold N X <when>."
    # sentences the demo model sometimes carries "this morning/afternoon" over to a "today" one
    # (今天 -> 今天早上/今天下午); it did in the 500-sentence overlap-1 document. Nothing else may differ.
    known_slip = lambda en, zh, out: (
        en.endswith("today.") and out in {zh.replace("今天", "今天" + t) for t in ("早上", "下午", "晚上")}
    )
    assert all(known_slip(*d) for d in differ), differ
    assert len(differ) <= count // 200
    if not differ:
        assert result.translation == expected


@pytest.mark.parametrize("overlap", [0, 1])
def test_a_sentence_over_the_budget_is_split_and_its_pieces_translated_in_order(known, overlap: int) -> None:
    translator, pairs = known
    before, after = pairs[0], pairs[1]
    clauses = [en.rstrip(".?!") for en, _ in pairs[2:12]]
    long_sentence = ", ".join(clauses) + "."
    documents = DocumentTranslator(translator, budget=64, overlap=overlap)
    assert documents._count(long_sentence) > 64
    source = f"{before[0]}\n\n{long_sentence} {after[0]}"
    (sentence,) = segment(long_sentence)
    pieces = [p.text for p in split_long(sentence, documents._count, 64)]
    assert len(pieces) > 1 and all(p.endswith((",", ".")) for p in pieces)  # cut at clause boundaries
    piece_translations = [t.text for t in translator.translate_batch(pieces)]
    (result,) = documents.translate([("doc", source)])
    assert result.translation == f"{before[1]}\n\n{''.join(piece_translations)}{after[1]}"
    assert "split" in result.flags


def test_empty_document_gives_an_empty_ok_result(known) -> None:
    translator, _ = known
    (result,) = DocumentTranslator(translator).translate([("empty", "")])
    assert (result.status, result.translation, result.sentences) == ("ok", "", [])


def test_cli_documents_mode_writes_one_result_per_line_in_order_and_errors_for_bad_lines(demo_artifact) -> None:
    import subprocess
    import sys

    lines = [json.dumps({"id": "a", "text": "Tom has 3 apples.\n\nThe meeting starts at 9 am."}), "not json", ""]
    data = ("\n".join(lines) + "\n").encode() + b'{"id": "b", "text": "Tom has 3 apples. \xff"}\n'
    data += (json.dumps({"id": "huge", "text": "Tom has 3 apples. " * 600_000}) + "\n").encode()  # 10.8 MB
    data += (json.dumps({"id": "c", "text": "The meeting starts at 9 am."}) + "\n").encode()
    command = [sys.executable, "-m", "worker", "translate", "--artifact", str(demo_artifact), "--documents"]
    result = subprocess.run([*command, "--batch-documents", "2"], input=data, capture_output=True)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert rows[0]["id"] == "a" and rows[0]["status"] == "ok"
    assert rows[0]["translation"] == "汤姆有3个苹果。\n\n会议上午9点开始。"
    assert rows[1]["status"] == "error" and "line 2" in rows[1]["error"]
    assert rows[2]["id"] == "b" and rows[2]["status"] == "ok" and "invalid_utf8" in rows[2]["flags"]
    assert rows[3]["id"] == "huge" and rows[3]["status"] == "error" and "more than the limit" in rows[3]["error"]
    assert [r["id"] for r in rows] == ["a", "line-2", "b", "huge", "c"]
    assert rows[4]["translation"] == "会议上午9点开始。"


def test_bad_input_gets_a_clear_status_and_loses_nothing(known) -> None:
    translator, _ = known
    documents = DocumentTranslator(translator, max_chars=10_000)
    results = documents.translate(
        [
            ("ctrl", "Tom has 3 apples.\x00\u200b The meeting starts at 9 am."),
            ("emoji", "🙂🙂 !!!"),
            ("markup", "<b>Tom has 3 apples.</b>\n# Where is the park?"),
            ("inline", "Tom has 3 apples &amp; <i>the meeting starts at 9 am</i>."),
            ("huge", "Tom has 3 apples. " * 1_000),
            ("fine", "Tom has 3 apples."),
        ]
    )
    by_id = {r.id: r for r in results}
    assert [r.id for r in results] == ["ctrl", "emoji", "markup", "inline", "huge", "fine"]
    assert by_id["ctrl"].status == "ok" and "cleaned" in by_id["ctrl"].flags
    assert by_id["ctrl"].translation == "汤姆有3个苹果。会议上午9点开始。"
    assert by_id["emoji"].translation == "🙂🙂 !!!" and "copied" in by_id["emoji"].flags
    park = translator.translate_batch(["Where is the park?"])[0].text
    assert by_id["markup"].translation == f"<b>汤姆有3个苹果。</b>\n# {park}"  # markup kept in place
    assert by_id["inline"].translation.count("&amp; <i>") == 1 and by_id["inline"].translation.endswith("</i>.")
    assert by_id["huge"].status == "error" and "split it" in str(by_id["huge"].error)
    assert by_id["fine"].translation == "汤姆有3个苹果。"
