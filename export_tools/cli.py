"""``python -m export_tools``: build, verify, and make the test and demo models.

    python -m export_tools tiny --like opus-mt-en-zh --out /tmp/opus-like
    python -m export_tools build /tmp/opus-like --out /tmp/artifact --precision fp32 int8
    python -m export_tools verify /tmp/artifact --source /tmp/opus-like
    python -m export_tools demo --out artifacts/demo

SRC for ``build`` is a directory written by ``save_pretrained`` or a Hugging Face hub id such as
``Helsinki-NLP/opus-mt-en-zh`` (hub ids need network access to the hub; pin one with --revision).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from export_tools.architectures import SUPPORTED, ExportError
from export_tools.fixtures.names import LIKE
from export_tools.request import check_request
from worker.engine.artifact import PRECISIONS, ArtifactError

DEMO_CHECKPOINT = Path(__file__).parent / "fixtures" / "demo_model"
DEMO_DEV_SET = Path(__file__).parent / "fixtures" / "demo_dev.jsonl"


def _verifier(args: argparse.Namespace) -> Callable[[Any, Path], None]:
    from export_tools import verify

    dev = verify.read_dev_set(Path(args.dev_set)) if args.dev_set else None

    def check(source: Any, root: Path) -> None:  # the source model (None: no parity check), the artifact
        report = verify.run(root, source if not args.skip_parity else None, dev, args.max_bleu_drop, _languages(args))
        print(json.dumps(report, indent=2, ensure_ascii=False))

    return check


def cmd_build(args: argparse.Namespace, calibration_set: list[str] | None = None) -> None:
    if calibration_set is None:
        calibration_set = _read_calibration_set(args.calibration_set) if args.calibration_set else []
    check_request(args.src, Path(args.out), args.precision, calibration_set, force=args.force)
    from export_tools.build import build

    build(
        args.src,
        Path(args.out),
        args.precision,
        force=args.force,
        revision=args.revision,
        verify=_verifier(args),
        calibration_set=calibration_set,
        pair=args.pair,
    )


def _pair(text: str) -> dict[str, str]:
    source, _, target = text.partition("-")
    if not (source.isalpha() and target.isalpha()):
        raise argparse.ArgumentTypeError(f"{text!r}: give the two language codes as SOURCE-TARGET, e.g. en-zh")
    return {"source": source.lower(), "target": target.lower()}


def _read_calibration_set(path: str) -> list[str]:
    from export_tools import verify

    return [example.source for example in verify.read_dev_set(Path(path))]


def cmd_verify(args: argparse.Namespace) -> None:
    from export_tools import verify
    from worker.engine.artifact import Artifact

    root = Path(args.artifact)
    Artifact.load(root, verify=False)
    source = None
    if args.source:
        from export_tools.build import load_source

        source = load_source(args.source)
    dev = verify.read_dev_set(Path(args.dev_set)) if args.dev_set else None
    report = verify.run(root, source, dev, args.max_bleu_drop, _languages(args))
    print(json.dumps(report, indent=2, ensure_ascii=False))


def _languages(args: argparse.Namespace) -> dict[str, str | None]:
    return {"source_language": args.source_language, "target_language": args.target_language}


def cmd_tiny(args: argparse.Namespace) -> None:
    from export_tools.fixtures.like import build_like

    print(build_like(args.like, Path(args.out), seed=args.seed, force=args.force, positions=args.positions))


def cmd_demo(args: argparse.Namespace) -> None:
    from export_tools.fixtures.demo_corpus import calibration_set

    args.src, args.revision, args.skip_parity = str(DEMO_CHECKPOINT), None, False
    args.pair = {"source": "en", "target": "zh"}
    args.dev_set = args.dev_set or str(DEMO_DEV_SET)
    cmd_build(args, calibration_set())  # the demo's own domain, none of it from the dev set
    # The training run's held-out figures (greedy, fp32) sit beside the gate's in the report.
    report_path = Path(args.out) / "report.json"
    report = json.loads(report_path.read_text())
    report["demo_training"] = json.loads((DEMO_CHECKPOINT / "train_report.json").read_text())
    report_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")


PRECISION_HELP = (
    "graphs to build; fp32 is always required (default: fp32 int8). int8 quantizes activations as they come, "
    "int8-static on fixed ranges calibrated on --calibration-set"
)


def _gate_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dev-set", help="JSONL {source, reference} or TSV source<TAB>reference; scores every precision")
    p.add_argument(
        "--max-bleu-drop",
        type=float,
        default=0.5,
        help="refuse INT8/FP16 whose BLEU trails fp32 by more than this (default 0.5)",
    )
    p.add_argument("--source-language", help="the dev set's source language, for models that read several")
    p.add_argument("--target-language", help="the dev set's target language, for models that write several")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m export_tools", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser(
        "build",
        help="export a model into a verified artifact directory",
        description=f"Export SRC into an artifact. Supported architectures: {SUPPORTED}.",
    )
    b.add_argument("src", help="save_pretrained directory or hub id")
    b.add_argument("--out", required=True, help="artifact directory to create (refused if it exists, see --force)")
    b.add_argument(
        "--precision",
        nargs="+",
        default=["fp32", "int8"],
        choices=list(PRECISIONS),
        help=PRECISION_HELP,
    )
    b.add_argument(
        "--calibration-set",
        help="sources that int8-static is calibrated on (a few hundred sentences like the ones you will translate: "
        'a sample of the corpus or the dev set\'s sources), one per line, TSV or JSONL with a "source" field',
    )
    b.add_argument("--revision", help="hub revision (branch, tag or commit) to pin")
    b.add_argument("--force", action="store_true", help="replace an existing --out")
    b.add_argument("--skip-parity", action="store_true", help="skip the comparison with the PyTorch model")
    b.add_argument(
        "--pair", type=_pair, metavar="SOURCE-TARGET",
        help="the languages of a model that reads and writes one fixed language (en-zh), where its name does not say "
        "them (an opus-mt-en-zh name does): jobs with source_language auto route documents by them",
    )  # fmt: skip
    _gate_options(b)
    b.set_defaults(func=cmd_build)

    v = sub.add_parser("verify", help="check hashes, parity and quality of an artifact")
    v.add_argument("artifact", help="artifact directory")
    v.add_argument("--source", help="the model it was built from, for parity checks")
    _gate_options(v)
    v.set_defaults(func=cmd_verify)

    t = sub.add_parser(
        "tiny",
        help="write a small random model that carries a real model's configs and tokenizer (for tests)",
        description="A save_pretrained directory with the real model's vocabulary layout, tokenizer files and "
        "generation settings, scaled-down layers and random weights (see export_tools/fixtures/like.py).",
    )
    t.add_argument("--like", required=True, choices=sorted(LIKE), help="the real model to reproduce")
    t.add_argument("--out", required=True)
    t.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    t.add_argument("--positions", type=int, help="override max_position_embeddings (e.g. 128 for length tests)")
    t.add_argument("--force", action="store_true", help="replace an existing --out")
    t.set_defaults(func=cmd_tiny)

    d = sub.add_parser("demo", help="build the demo EN->ZH artifact from the committed checkpoint")
    d.add_argument(
        "--out", required=True,
        help="artifact directory to create (the README's jobs use artifacts/demo); refused if it exists, see --force",
    )  # fmt: skip
    d.add_argument("--precision", nargs="+", default=["fp32", "int8"], choices=list(PRECISIONS), help=PRECISION_HELP)
    d.add_argument(
        "--force", action="store_true",
        help="replace an existing --out (the new artifact is built beside it first, then swapped in)",
    )  # fmt: skip
    _gate_options(d)
    d.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        args.func(args)
    except (ExportError, ArtifactError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
