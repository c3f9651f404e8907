"""``python -m worker translate --artifact DIR``: translate lines from stdin.

    echo "Tom has 3 apples." | python -m worker translate --artifact artifacts/demo
    python -m worker translate --artifact artifacts/demo --beam 4 --jsonl < sentences.txt

Each input line is one sentence; each output line its translation (or, with --jsonl, a JSON
object with the line number, translation, token ids, score and flags). Empty lines give empty
translations without a model call.

    python -m worker translate --artifact artifacts/demo --documents < docs.jsonl

With --documents each input line is a JSON object {"id": ..., "text": ...} and each output line
one JSON result: id, translation (layout kept), status (ok, partial: a sentence still shows a
symptom, error), error, sentences (per sentence its source and target spans and flags), flags and
timings (seconds). A bad line becomes an error result. --format markdown|html keeps markup in place.
Documents are translated --batch-documents at a time (short ones share engine batches); results
come out in input order after each batch.

--memory translates each distinct window (or line) once in this run: repeated headers, footers and
documents come back from memory, identical to a fresh translation; each document result counts its
windows and reused_windows.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from contract import settings
from worker.artifact import PRECISIONS, ArtifactError

if TYPE_CHECKING:
    from worker.documents import DocumentResult, DocumentTranslator
    from worker.engine.search import DecodingOptions
    from worker.engine.translator import Translator
    from worker.memory import Memory

BATCH = 32  # sentences per engine call


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m worker", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("translate", help="translate sentences from stdin to stdout")
    t.add_argument("--artifact", required=True, help="artifact directory (python -m export_tools build/demo)")
    t.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    t.add_argument("--precision", choices=PRECISIONS, help="default: int8 on cpu if present, else fp32")
    t.add_argument("--beam", type=int, help="beam size (default: the model's generation config; 1 = greedy)")
    t.add_argument("--max-new-tokens", type=int, help="length limit per translation")
    t.add_argument(
        "--source-language",
        help="source language code for many-to-many models (m2m100 'fr', nllb 'fra_Latn', mbart-50 'fr_XX'); "
        "with --target-language it also picks a T5 task ('en' -> 'de')",
    )
    t.add_argument(
        "--target-language",
        help="target language code: forced first token (m2m100/nllb/mbart-50), the >>cmn_Hans<< token of a "
        "multilingual Marian, or a T5 task's target; an unknown code is refused naming the model's codes",
    )
    t.add_argument("--source-prefix", help="text put before every source, replacing a T5 task's prefix")
    t.add_argument("--threads", type=int, default=2, help="ONNX Runtime intra-op threads")
    t.add_argument("--jsonl", action="store_true", help="write JSON lines with ids, scores and flags")
    t.add_argument("--documents", action="store_true", help='read {"id", "text"} JSON lines; write one result each')
    t.add_argument("--overlap", type=int, default=1, help="context sentences before each window (--documents)")
    t.add_argument(
        "--format",
        choices=["text", "markdown", "html"],
        default="text",
        help="documents' markup (--documents): text (none: lines are layout), markdown or html (markup kept in "
        "place, code never translated)",
    )
    t.add_argument(
        "--budget",
        type=int,
        default=64,
        help="source tokens per window (--documents); the demo model was trained on up to 4 sentences",
    )
    t.add_argument(
        "--memory",
        action="store_true",
        help="translate each distinct window (or line) once in this run; repeats are reused, with the same output",
    )
    t.add_argument(
        "--batch-documents", type=int, default=64, help="documents translated together (--documents); output per batch"
    )
    t.add_argument(
        "--max-chars",
        type=int,
        default=settings.MAX_DOCUMENT_CHARS,
        help="longer documents become error results asking to split them (--documents); planning takes ~9 s per MB",
    )
    return p


def translate(args: argparse.Namespace) -> None:
    from worker.engine.translator import Translator
    from worker.memory import LocalMemory

    translator = Translator(args.artifact, device=args.device, precision=args.precision, threads=args.threads)
    memory = LocalMemory() if args.memory else None
    options = translator.options(
        beam_size=args.beam,
        max_new_tokens=args.max_new_tokens,
        source_language=args.source_language,
        target_language=args.target_language,
        source_prefix=args.source_prefix,
    )
    if args.documents:
        translate_documents(translator, options, args, memory)
        return
    lines = [line.rstrip("\n") for line in sys.stdin]
    for start in range(0, len(lines), BATCH):
        batch = lines[start : start + BATCH]
        for offset, result in enumerate(translator.translate_batch(batch, options, memory)):
            if args.jsonl:
                row = {
                    "line": start + offset + 1,
                    "source": batch[offset],
                    "translation": result.text,
                    "tokens": result.tokens,
                    "score": result.score,
                    "flags": result.flags,
                }
                print(json.dumps(row, ensure_ascii=False))
            else:
                print(result.text)
        sys.stdout.flush()


def translate_documents(
    translator: Translator, options: DecodingOptions, args: argparse.Namespace, memory: Memory | None
) -> None:
    """Documents go to the engine ``--batch-documents`` at a time, so short ones fill its batches;
    results come out in input order, one line each, as each batch finishes."""
    from worker.documents import DocumentTranslator

    documents = DocumentTranslator(
        translator, overlap=args.overlap, budget=args.budget, max_chars=args.max_chars, format=args.format,
        memory=memory,
    )  # fmt: skip
    batch: list[tuple[str, str, bool] | DocumentResult] = []
    for number, raw in enumerate(sys.stdin.buffer, 1):
        parsed = _document_line(number, raw)
        if parsed is not None:
            batch.append(parsed)
        if len(batch) >= args.batch_documents:
            _write_results(documents, options, batch)
            batch = []
    _write_results(documents, options, batch)


def _document_line(number: int, raw: bytes) -> tuple[str, str, bool] | DocumentResult | None:
    """(id, text, had invalid UTF-8), an error result for a bad line, or None for a blank one."""
    from worker.documents import DocumentResult

    try:
        line, invalid = raw.decode("utf-8"), False
    except UnicodeDecodeError:  # keep the document: bad bytes become U+FFFD and the result says so
        line, invalid = raw.decode("utf-8", errors="replace"), True
    if not line.strip():
        return None
    try:
        row = json.loads(line)
        doc_id, text = str(row["id"]), row["text"]
        if not isinstance(text, str):
            raise TypeError(f"text must be a string, got {type(text).__name__}")
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        message = f'line {number}: expected a JSON object with string "id" and "text" ({err})'
        return DocumentResult(f"line-{number}", "", "error", message)
    return doc_id, text, invalid


def _write_results(
    documents: DocumentTranslator, options: DecodingOptions, batch: list[tuple[str, str, bool] | DocumentResult]
) -> None:
    from dataclasses import asdict

    inputs = [(doc_id, text) for doc_id, text, _ in (b for b in batch if isinstance(b, tuple))]
    translated = iter(documents.translate(inputs, options))
    for item in batch:
        if isinstance(item, tuple):
            result = next(translated)
            result.flags = sorted([*result.flags, "invalid_utf8"]) if item[2] else result.flags
        else:
            result = item
        print(json.dumps(asdict(result), ensure_ascii=False))
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        translate(args)
    except (ArtifactError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
