"""``python -m worker translate --artifact DIR``: translate lines from stdin.

    echo "Tom has 3 apples." | python -m worker translate --artifact artifacts/demo
    python -m worker translate --artifact artifacts/demo --beam 4 --jsonl < sentences.txt

Each input line is one sentence; each output line its translation (or, with --jsonl, a JSON
object with the line number, translation, token ids, score and flags). Empty lines give empty
translations without a model call.
"""

from __future__ import annotations

import argparse
import json
import sys

from worker.artifact import ArtifactError

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
    return p


def translate(args: argparse.Namespace) -> None:
    from worker.engine.translator import Translator

    translator = Translator(args.artifact, device=args.device, precision=args.precision, threads=args.threads)
    options = translator.options(
        beam_size=args.beam, max_new_tokens=args.max_new_tokens, target_language=args.target_language
    )
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


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        translate(args)
    except (ArtifactError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
