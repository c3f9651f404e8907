"""Inputs built to be slow against real prose of the same length, through ``DocumentTranslator``.

    python -m benchmarks.pathological                       # every kind, 100,000 characters each
    python -m benchmarks.pathological --chars 20000 --kinds nospace,dots

Real prose is Debian's license texts (``/usr/share/common-licenses``: GPL-3, then Apache-2.0, ... until
``--chars``), translated as the document it is, lines and all. Each other kind is one line of the same
length:

    nospace   the same prose with every space and line break taken out (100,000 characters without a space)
    a         one letter repeated
    dots      "." repeated: sentence punctuation with no sentence
    cjk       CJK ideographs without punctuation
    url       one long URL
    base64    a base64 blob of random bytes
    dotted    "a." repeated: a sentence end every two characters, and no space
    ellipsis  ".…" repeated: 50,000 equal sentences of punctuation
    hexpath   a hexadecimal hash and then "/index.html": a long word in a line with a path in it

Per kind: planning seconds (segmenting, splitting, counting tokens, windows), total seconds,
characters per second, source tokens, windows, and the time against prose's (goal: within 3x).
Progress goes to stderr; the table (Markdown) to stdout. Demo artifact, INT8, 2 threads, the
model's beam; it is built under build/bench-pathological when --artifact is missing.
"""

from __future__ import annotations

import argparse
import base64
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from worker.documents.translator import DocumentTranslator

LICENSES = Path("/usr/share/common-licenses")
PROSE_FILES = ("GPL-3", "Apache-2.0", "GFDL-1.3", "LGPL-2.1", "GPL-2", "MPL-2.0", "Artistic")
DEFAULT_ARTIFACT = Path("build/bench-pathological/demo")
GOAL = 3.0  # a pathological kind may take at most this many times prose's time


def prose(chars: int) -> str:
    """Real prose no one here wrote, cut at the last line end within ``chars`` (a whole line, as documents come)."""
    text = ""
    for name in PROSE_FILES:
        if len(text) >= chars:
            break
        text += (LICENSES / name).read_text(encoding="utf-8")
    if len(text) < chars:
        raise SystemExit(f"only {len(text):,} characters of prose under {LICENSES}: ask for fewer with --chars")
    return text[: text.rfind("\n", 0, chars) + 1]


def kinds(chars: int) -> dict[str, Callable[[], str]]:
    """Each kind's text of ``chars`` characters, made when asked for."""
    rng = random.Random(0)
    return {
        "prose": lambda: prose(chars),
        "nospace": lambda: _repeat("".join(prose(chars).split()), chars),
        "a": lambda: "a" * chars,
        "dots": lambda: "." * chars,
        "cjk": lambda: "".join(chr(0x4E00 + (i * 7919) % 20_000) for i in range(chars)),
        "url": lambda: _repeat("https://example.com/" + "docs/v2/api-reference_section-" * chars, chars),
        "base64": lambda: base64.b64encode(rng.randbytes(chars)).decode("ascii")[:chars],
        "dotted": lambda: _repeat("a.", chars),
        "ellipsis": lambda: _repeat(".…", chars),
        "hexpath": lambda: "".join(rng.choice("0123456789abcdef") for _ in range(chars - 11)) + "/index.html",
    }


def _repeat(unit: str, chars: int) -> str:
    return (unit * (chars // len(unit) + 1))[:chars]


def ensure_artifact(path: Path) -> Path:
    if not (path / "manifest.json").exists():
        from export_tools.build import build
        from export_tools.cli import DEMO_CHECKPOINT

        say(f"building the demo artifact under {path}")
        build(str(DEMO_CHECKPOINT), path, ["fp32", "int8"], force=True)
    return path


def say(message: str) -> None:
    print(f"[pathological] {message}", file=sys.stderr, flush=True)


def measure(documents: DocumentTranslator, name: str, text: str) -> dict[str, float]:
    """Planning alone, then the whole translation (planning again included), of one document."""
    say(f"{name}: {len(text):,} characters, planning")
    started = time.perf_counter()
    plan = documents.plan(name, text)
    planning = time.perf_counter() - started
    sizes = f"{len(plan.sentences):,} sentences, {len(plan.windows):,} windows, {plan.tokens:,} tokens"
    say(f"{name}: {sizes}; translating")
    started = time.perf_counter()
    (result,) = documents.translate([(name, text)])
    seconds = time.perf_counter() - started
    say(f"{name}: {seconds:.1f} s, {len(text) / seconds:,.0f} characters/s, status {result.status}")
    return {"chars": len(text), "planning": planning, "seconds": seconds, "tokens": plan.tokens,
            "windows": len(plan.windows)}  # fmt: skip


def table(rows: dict[str, dict[str, float]]) -> list[str]:
    base = rows.get("prose")
    lines = [
        "| input | characters | planning s | total s | characters/s | tokens | windows | time vs prose |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in rows.items():
        speed = r["chars"] / r["seconds"]
        ratio = f"{(r['seconds'] / r['chars']) / (base['seconds'] / base['chars']):.2f}x" if base else "-"
        lines.append(
            f"| {name} | {r['chars']:,.0f} | {r['planning']:.2f} | {r['seconds']:.1f} | {speed:,.0f} | "
            f"{r['tokens']:,.0f} | {r['windows']:,.0f} | {ratio} |"
        )
    return lines


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.pathological",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--chars", type=int, default=100_000, help="characters per input (default 100,000)")
    p.add_argument("--kinds", default=",".join(kinds(1)), help="comma-separated kinds; prose is always measured")
    p.add_argument("--artifact", type=Path, default=None, help=f"artifact (default: built under {DEFAULT_ARTIFACT})")
    p.add_argument("--threads", type=int, default=2, help="ONNX Runtime intra-op threads")
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    available = kinds(args.chars)
    chosen = ["prose", *(k for k in args.kinds.split(",") if k and k != "prose")]
    unknown = [k for k in chosen if k not in available]
    if unknown:
        raise SystemExit(f"unknown kinds {unknown}: choose from {', '.join(available)}")
    from worker.documents.translator import DocumentTranslator
    from worker.engine.translator import Translator

    translator = Translator(ensure_artifact(args.artifact or DEFAULT_ARTIFACT), precision="int8", threads=args.threads)
    documents = DocumentTranslator(translator)
    documents.translate([("warm-up", "Tom has 3 apples.")])
    rows = {name: measure(documents, name, available[name]()) for name in chosen}
    print("\n".join(table(rows)))
    worst = max((r["seconds"] / r["chars"] for k, r in rows.items() if k != "prose"), default=0.0)
    prose_rate = rows["prose"]["seconds"] / rows["prose"]["chars"]
    print(f"\nslowest kind: {worst / prose_rate:.2f}x prose's time per character (goal: within {GOAL:.0f}x)")


if __name__ == "__main__":
    main()
