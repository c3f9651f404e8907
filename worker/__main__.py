"""``python -m worker translate --artifact DIR``: translate lines from stdin.

    echo "Tom has 3 apples." | python -m worker translate --artifact artifacts/demo
    python -m worker translate --artifact artifacts/demo --beam 4 --jsonl < sentences.txt

Each input line is one sentence; each output line its translation (or, with --jsonl, a JSON
object with the line number, translation, token ids, score, flags and error). Empty lines give empty
translations without a model call. A line that cannot be read (bytes that are not UTF-8) is that
line's error: its output line is "error: line N: ..." (with --jsonl, the object's "error"), the other
lines are translated, and the exit status is 0 unless --fail-on-error.

    python -m worker translate --artifact artifacts/demo --documents < docs.jsonl

With --documents each input line is a JSON object {"id": ..., "text": ...} and each output line
one JSON result: id, translation (layout kept), status (ok, partial: a sentence still shows a
symptom, error), error, sentences (per sentence its source and target spans and flags), flags and
timings (seconds). A bad line (not JSON, no "id" or "text", a lone surrogate escaped in either) becomes
an error result. --format markdown|html keeps markup in place.
Documents are translated --batch-documents at a time (short ones share engine batches); results
come out in input order after each batch.

--memory translates each distinct window (or line) once in this run: repeated headers, footers and
documents come back from memory, identical to a fresh translation; each document result counts its
windows and reused_windows.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from contract import settings
from contract.glossary import Glossary, GlossaryError
from contract.options import JobOptions
from worker.engine.artifact import PRECISIONS, ArtifactError

if TYPE_CHECKING:
    from worker.documents.translator import DocumentResult, DocumentTranslator
    from worker.engine.memory import Memory
    from worker.engine.search import DecodingOptions
    from worker.engine.translation import Translation
    from worker.engine.translator import Translator

BATCH = 32  # sentences per engine call
EXIT_WITH_ERRORS = 4  # --fail-on-error: some line or document was an error (as `python -m jobs wait` says it)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m worker", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("translate", help="translate sentences from stdin to stdout")
    t.add_argument("--artifact", required=True, help="artifact directory (python -m export_tools build/demo)")
    t.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    t.add_argument("--precision", choices=PRECISIONS, help="default: int8 on cpu if present, else fp32")
    JobOptions.add_arguments(t, documents=("overlap", "budget", "format"))  # a job's options, as its spec says them
    t.add_argument(
        "--threads", type=int, default=settings.THREADS,
        help="ONNX Runtime intra-op threads (default: FANYI_THREADS, 1; one was faster than two on the demo model)",
    )  # fmt: skip
    t.add_argument("--jsonl", action="store_true", help="write JSON lines with ids, scores and flags")
    t.add_argument("--documents", action="store_true", help='read {"id", "text"} JSON lines; write one result each')
    t.add_argument(
        "--glossary", metavar="FILE", help="terms that must come out one way: source<TAB>target lines (.tsv), CSV or "
        "JSON (contract/glossary.py); an empty target keeps the term as it is (--documents)",
    )  # fmt: skip
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
    t.add_argument(
        "--fail-on-error",
        action="store_true",
        help=f"exit with status {EXIT_WITH_ERRORS} if any line (or document) was an error; every line is answered "
        "either way, and without this flag errors alone leave the exit status 0",
    )
    return p


def translate(args: argparse.Namespace) -> int:
    """Translate stdin to stdout; the number of lines or documents that were errors."""
    from worker.engine.memory import LocalMemory
    from worker.engine.translator import Translator

    translator = Translator(args.artifact, device=args.device, precision=args.precision, threads=args.threads)
    memory = LocalMemory() if args.memory else None
    options = translator.options(**JobOptions.from_arguments(args).decoding())
    if args.documents:
        return translate_documents(translator, options, args, memory)
    if JobOptions.from_arguments(args).routed or args.glossary:
        flag = "--glossary" if args.glossary else "--source-language auto"
        raise ValueError(f"{flag} works on documents: add --documents")
    return translate_lines(translator, options, args, memory)


def translate_lines(
    translator: Translator, options: DecodingOptions, args: argparse.Namespace, memory: Memory | None
) -> int:
    """One output line per input line, ``BATCH`` lines per engine call; the number of error lines."""
    lines = _read_lines()
    errors = 0
    for start in range(0, len(lines), BATCH):
        batch = lines[start : start + BATCH]
        sources = [text if problem is None else "" for text, problem in batch]  # an unread line costs no model call
        results = translator.translate_batch(sources, options, memory)
        for number, (text, problem), result in zip(itertools.count(start + 1), batch, results):
            error = problem or (f"line {number}: {result.error}" if result.error else None)
            errors += error is not None
            print(_answer(number, text, result, error, jsonl=args.jsonl))
        sys.stdout.flush()
    return errors


def _read_lines() -> list[tuple[str, str | None]]:
    """Each stdin line without its newline, and why it cannot be translated (None if it can).

    Bytes that are not UTF-8 make their line an error, as in a job's text input (``jobs.inputs``), not
    a guess: the line is kept, with U+FFFD for the bad bytes, only to be shown beside the error."""
    lines: list[tuple[str, str | None]] = []
    for number, raw in enumerate(sys.stdin.buffer, 1):
        raw = raw.removesuffix(b"\n")
        try:
            lines.append((raw.decode("utf-8"), None))
        except UnicodeDecodeError as err:
            problem = f"line {number}: byte {err.start + 1} (0x{raw[err.start]:02X}) is not UTF-8: re-encode the input"
            lines.append((raw.decode("utf-8", errors="replace"), problem))
    return lines


def _answer(number: int, source: str, result: Translation, error: str | None, *, jsonl: bool) -> str:
    """A line's output line: its translation or ``error: ...``, or with ``jsonl`` the JSON object."""
    if not jsonl:
        return f"error: {error}" if error else result.text
    row = {
        "line": number,
        "source": source,
        "translation": result.text,
        "tokens": result.tokens,
        "score": result.score,
        "flags": result.flags,
        "error": error,
    }
    return json.dumps(row, ensure_ascii=False)


def translate_documents(
    translator: Translator, options: DecodingOptions, args: argparse.Namespace, memory: Memory | None
) -> int:
    """Documents go to the engine ``--batch-documents`` at a time, so short ones fill its batches;
    results come out in input order, one line each, as each batch finishes. The number of error results."""
    from worker.documents.languages import Routing
    from worker.documents.translator import DocumentTranslator

    job_options = JobOptions.from_arguments(args)
    routing = Routing.of(translator.languages, job_options)
    glossary = _glossary(args.glossary, translator.languages.pair(None, job_options.target_language)[1])
    documents = DocumentTranslator(
        translator, overlap=job_options.overlap, budget=job_options.budget, format=job_options.format,
        max_chars=args.max_chars, memory=memory, routing=routing, glossary=glossary,
    )  # fmt: skip
    batch: list[tuple[str, str, bool] | DocumentResult] = []
    errors = 0
    for number, raw in enumerate(sys.stdin.buffer, 1):
        parsed = _document_line(number, raw)
        if parsed is not None:
            batch.append(parsed)
        if len(batch) >= args.batch_documents:
            errors += _write_results(documents, options, batch)
            batch = []
    return errors + _write_results(documents, options, batch)


def _glossary(path: str | None, target: str | None) -> Glossary | None:
    """The glossary in ``path`` (its terms for ``target``), None without one; a GlossaryError names what is wrong."""
    if path is None:
        return None
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise GlossaryError(f"cannot read the glossary {path}: {err.strerror}") from None
    return Glossary.parse(data, path).into(target)


def _document_line(number: int, raw: bytes) -> tuple[str, str, bool] | DocumentResult | None:
    """(id, text, had invalid UTF-8), an error result for a bad line, or None for a blank one."""
    from worker.documents.translator import DocumentResult

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
    return _unreadable_document(number, doc_id, text) or (doc_id, text, invalid)


def _unreadable_document(number: int, doc_id: str, text: str) -> DocumentResult | None:
    """An error result for a document whose id or text holds a lone surrogate (JSON lets ``\\ud800`` stand
    alone): its position said here in the document, not in the sentence the tokenizer would meet it in.
    An unreadable id is replaced: it could not be written out."""
    from worker.documents.translator import DocumentResult
    from worker.engine.tokenizer import unreadable

    for field, value in (("id", doc_id), ("text", text)):
        if (reason := unreadable(value)) is not None:
            result_id = doc_id if field == "text" else f"line-{number}"
            return DocumentResult(result_id, "", "error", f'line {number}: "{field}": {reason}')
    return None


def _write_results(
    documents: DocumentTranslator, options: DecodingOptions, batch: list[tuple[str, str, bool] | DocumentResult]
) -> int:
    """Translate the batch's documents and write every result in input order; the number of error results."""
    from dataclasses import asdict

    inputs = [(doc_id, text) for doc_id, text, _ in (b for b in batch if isinstance(b, tuple))]
    translated = iter(documents.translate(inputs, options))
    errors = 0
    for item in batch:
        if isinstance(item, tuple):
            result = next(translated)
            result.flags = sorted([*result.flags, "invalid_utf8"]) if item[2] else result.flags
        else:
            result = item
        print(json.dumps(asdict(result), ensure_ascii=False))
        errors += result.status == "error"
    sys.stdout.flush()
    return errors


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    settings.exit_if_invalid()  # a bad FANYI_* variable: one line, exit 2
    try:
        errors = translate(args)
    except (ArtifactError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
    if errors:
        what = ("document" if args.documents else "line") + ("s" if errors > 1 else "")
        print(f"{errors} {what} could not be translated; the output says why", file=sys.stderr)
    if errors and args.fail_on_error:
        sys.exit(EXIT_WITH_ERRORS)


if __name__ == "__main__":
    main()
