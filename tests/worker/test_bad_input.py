"""One bad input is that input's error, never the run's: a line that is not UTF-8, a lone surrogate.

Before, sentencepiece's pybind11 wrapper raised on the first such text and took every other line or
document of the call down with it; the ``tokenizers`` library raised a TypeError of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from worker.documents.translator import DocumentTranslator
from worker.engine.memory import LocalMemory
from worker.engine.tokenizer import Tokenizer, UnreadableText, unreadable
from worker.engine.translator import Translator

LONE = "\ud800"  # a JSON "\ud800" escape without its low half: a str may hold it, UTF-8 cannot


@pytest.fixture(scope="module")
def translator(demo_artifact: Path) -> Translator:
    return Translator(demo_artifact, precision="int8")


def cli(artifact: Path, data: bytes, *flags: str) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "worker", "translate", "--artifact", str(artifact), *flags]
    return subprocess.run(command, input=data, capture_output=True, timeout=300)


def test_a_line_that_is_not_utf8_is_answered_with_its_error_and_the_others_translated(demo_artifact) -> None:
    data = b"Tom has 3 apples.\n\xff\nHappy birthday!\n"
    result = cli(demo_artifact, data)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode("utf-8").splitlines()
    assert lines == ["汤姆有3个苹果。", "error: line 2: byte 1 (0xFF) is not UTF-8: re-encode the input", "生日快乐！"]
    assert b"1 line could not be translated" in result.stderr


def test_fail_on_error_sets_the_exit_status_after_answering_every_line(demo_artifact) -> None:
    failed = cli(demo_artifact, b"Tom has 3 apples.\nTom \xe4pfel\n", "--jsonl", "--fail-on-error")
    assert failed.returncode == 4, failed.stderr
    rows = [json.loads(line) for line in failed.stdout.decode("utf-8").splitlines()]
    assert [(r["line"], r["translation"], r["error"]) for r in rows] == [
        (1, "汤姆有3个苹果。", None),
        (2, "", "line 2: byte 5 (0xE4) is not UTF-8: re-encode the input"),
    ]
    assert rows[1]["source"] == "Tom \ufffdpfel"  # shown beside its error, never translated
    assert cli(demo_artifact, b"Tom has 3 apples.\n", "--fail-on-error").returncode == 0


def test_a_lone_surrogate_in_a_json_document_is_that_documents_error(demo_artifact) -> None:
    lines = [
        json.dumps({"id": "bad", "text": f"Tom has 3 apples. Tom {LONE} has"}),  # json writes the escape: \ud800
        json.dumps({"id": f"x{LONE}", "text": "Happy birthday!"}),
        json.dumps({"id": "good", "text": "Happy birthday!"}),
    ]
    result = cli(demo_artifact, "\n".join(lines).encode("ascii"), "--documents", "--fail-on-error")
    assert result.returncode == 4, result.stderr
    rows = [json.loads(line) for line in result.stdout.decode("utf-8").splitlines()]
    assert [(r["id"], r["status"]) for r in rows] == [("bad", "error"), ("line-2", "error"), ("good", "ok")]
    assert rows[0]["error"].startswith('line 1: "text": character 23 (near "apples. Tom \\ud800 has") is U+D800')
    assert "lone surrogate" in rows[0]["error"] and "pybind11" not in rows[0]["error"]
    assert rows[1]["error"].startswith('line 2: "id": character 2')
    assert rows[2]["translation"] == "生日快乐！"


def test_translate_batch_gives_an_unreadable_sentence_its_error_and_translates_the_rest(translator) -> None:
    good = ["Tom has 3 apples.", "Happy birthday!"]
    alone = [t.text for t in translator.translate_batch(good)]
    for memory in (None, LocalMemory()):
        results = translator.translate_batch([good[0], f"a{LONE}b", good[1]], memory=memory)
        assert [r.text for r in results] == [alone[0], "", alone[1]]
        assert [r.error is None for r in results] == [True, False, True]
        assert results[1].error is not None and results[1].error.startswith("character 2 (near")
    assert [t.text for t in translator.translate_batch([f"a{LONE}b"], memory=memory)] == [""]  # nothing remembered


def test_a_document_with_a_lone_surrogate_is_an_error_and_its_batch_translates(translator) -> None:
    for fmt in ("text", "markdown", "html"):
        documents = DocumentTranslator(translator, format=fmt)
        bad, good = documents.translate([("bad", f"Tom has 3 apples. Tom {LONE} has"), ("good", "Happy birthday!")])
        assert (bad.status, good.status, good.translation) == ("error", "ok", "生日快乐！")
        assert bad.error is not None and "U+D800, a lone surrogate" in bad.error


@pytest.mark.parametrize("name", ["opus-mt-en-zh", "t5-small"])  # sentencepiece, and the tokenizers library
def test_both_codecs_refuse_a_lone_surrogate_with_the_reason(name, artifacts) -> None:
    from worker.engine.artifact import Artifact

    tokenizer = Tokenizer.from_artifact(Artifact.load(artifacts[name]))
    for text in (f"Tom {LONE}", "\udcff"):
        with pytest.raises(UnreadableText, match="character"):
            tokenizer.encode(text)
        with pytest.raises(UnreadableText, match="character"):
            tokenizer.count(["Tom", text])


def test_the_reason_names_the_character_and_what_to_do() -> None:
    assert unreadable("Tom has 3 apples. 汤姆 😀") is None and unreadable("") is None
    assert unreadable(f"ab{LONE}c") == (
        'character 3 (near "ab\\ud800c") is U+D800, a lone surrogate (half of a UTF-16 pair), not text: '
        "fix how the text was decoded or escaped"
    )
    escaped = b"Tom \xff".decode("utf-8", errors="surrogateescape")  # how Python keeps a byte that is not UTF-8
    assert unreadable(escaped) == (
        'character 5 (near "Tom \\udcff") is U+DCFF, a lone surrogate (surrogateescape\'s stand-in for the byte '
        "0xFF, which is not UTF-8): re-encode the input as UTF-8"
    )
