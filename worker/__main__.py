"""``python -m worker translate --artifact DIR``: translate lines from stdin.

    echo "Tom has 3 apples." | python -m worker translate --artifact artifacts/demo
    python -m worker translate --artifact artifacts/demo --beam 4 --jsonl < sentences.txt

Each input line is one sentence; each output line its translation (or, with --jsonl, a JSON
object with the line number, translation, token ids, score and flags). Empty lines give empty
translations without a model call.

    python -m worker translate --artifact artifacts/demo --documents < docs.jsonl

With --documents each input line is a JSON object {"id": ..., "text": ...} and each output line
one JSON result: id, translation (layout kept), status (ok/error), error, alignment (source span
-> target span per sentence), flags and timings (seconds). A bad line becomes an error result.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from worker.artifact import ArtifactError

if TYPE_CHECKING:
    from worker.engine.search import DecodingOptions
    from worker.engine.translator import Translator

BATCH = 32  # sentences per engine call


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m worker", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("translate", help="translate sentences from stdin to stdout")
    t.add_argument("--artifact", required=True, help="artifact directory (python -m export_tools build/demo)")
    t.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    t.add_argument("--precision", choices=["fp32", "int8", "fp16"], help="default: int8 on cpu if present, else fp32")
    t.add_argument("--beam", type=int, help="beam size (default: the model's generation config; 1 = greedy)")
    t.add_argument("--max-new-tokens", type=int, help="length limit per translation")
    t.add_argument("--target-language", help="target language code for multilingual models (m2m100/nllb)")
    t.add_argument("--threads", type=int, default=2, help="ONNX Runtime intra-op threads")
    t.add_argument("--jsonl", action="store_true", help="write JSON lines with ids, scores and flags")
    t.add_argument("--documents", action="store_true", help='read {"id", "text"} JSON lines; write one result each')
    t.add_argument("--overlap", type=int, default=1, help="context sentences before each window (--documents)")
    t.add_argument(
        "--budget",
        type=int,
        default=64,
        help="source tokens per window (--documents); the demo model was trained on up to 4 sentences",
    )
    return p


def translate(args: argparse.Namespace) -> None:
    from worker.engine.translator import Translator

    translator = Translator(args.artifact, device=args.device, precision=args.precision, threads=args.threads)
    options = translator.options(
        beam_size=args.beam, max_new_tokens=args.max_new_tokens, target_language=args.target_language
    )
    if args.documents:
        translate_documents(translator, options, args.overlap, args.budget)
        return
    lines = [line.rstrip("\n") for line in sys.stdin]
    for start in range(0, len(lines), BATCH):
        batch = lines[start : start + BATCH]
        for offset, result in enumerate(translator.translate_batch(batch, options)):
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


def translate_documents(translator: Translator, options: DecodingOptions, overlap: int, budget: int) -> None:
    from dataclasses import asdict

    from worker.documents import DocumentResult, DocumentTranslator

    documents = DocumentTranslator(translator, overlap=overlap, budget=budget)
    for number, raw in enumerate(sys.stdin.buffer, 1):
        try:
            line, invalid = raw.decode("utf-8"), False
        except UnicodeDecodeError:  # keep the document: bad bytes become U+FFFD and the result says so
            line, invalid = raw.decode("utf-8", errors="replace"), True
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            doc_id, text = str(row["id"]), row["text"]
            if not isinstance(text, str):
                raise TypeError(f"text must be a string, got {type(text).__name__}")
            (result,) = documents.translate([(doc_id, text)], options)
            result.flags += ["invalid_utf8"] if invalid else []
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            message = f'line {number}: expected a JSON object with string "id" and "text" ({err})'
            result = DocumentResult(f"line-{number}", "", "error", message)
        print(json.dumps(asdict(result), ensure_ascii=False), flush=True)


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        translate(args)
    except (ArtifactError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
