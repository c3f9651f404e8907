"""Real documents, translated and checked for structure: the corpus no one here wrote.

    python -m benchmarks.real_documents [--artifact artifacts/demo] [--corpus tests/data/documents] [--show N]

Translates every Markdown and HTML document of the corpus (``scripts/collect_documents.py`` gathered
it from installed packages' READMEs and Debian's documentation) with ``DocumentTranslator`` on the
demo artifact, and compares each translation with its source by ``worker.documents.structure``: blocks,
code spans and elements byte for byte, links and images with their targets, inline nesting, bare
addresses, line endings. Prints per format how many documents came back structurally identical, how
many of the others were flagged (never ``ok``), the code and links kept, and characters/s.
"""

from __future__ import annotations

import argparse
import fnmatch
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from worker.documents.structure import differences, structure

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "documents"
SUFFIXES = {"markdown": ".md", "html": ".html"}


@dataclass
class Tally:
    """One format's figures over the corpus."""

    documents: int = 0
    identical: int = 0
    flagged: int = 0  # structurally different and not ``ok``
    silent: list[str] = field(default_factory=list)  # structurally different and ``ok``: must stay empty
    errors: list[str] = field(default_factory=list)
    verbatim: tuple[int, int] = (0, 0)  # (kept, in the sources): code spans, code blocks, code elements
    links: tuple[int, int] = (0, 0)  # (kept, in the sources): links and images with their targets
    characters: int = 0
    seconds: float = 0.0
    changed: dict[str, list[str]] = field(default_factory=dict)  # document -> what changed


def corpus(fmt: str, root: Path = CORPUS) -> list[tuple[str, str]]:
    """(name, text) of the format's documents, bytes decoded as written (``\\r\\n`` kept)."""
    folder = root / fmt
    return [(p.name, p.read_bytes().decode("utf-8")) for p in sorted(folder.glob(f"*{SUFFIXES[fmt]}"))]


def tally(fmt: str, documents: list[tuple[str, str]], results: list[object], seconds: float) -> Tally:
    out = Tally(documents=len(documents), seconds=seconds, characters=sum(len(t) for _, t in documents))
    for (name, text), result in zip(documents, results):
        status, translation = getattr(result, "status"), getattr(result, "translation")  # noqa: B009
        if status == "error":
            out.errors.append(f"{name}: {getattr(result, 'error')}")  # noqa: B009
            continue
        found = differences(text, translation, fmt)
        before, after = structure(text, fmt), structure(translation, fmt)
        out.verbatim = _kept(out.verbatim, before.verbatim, after.verbatim)
        out.links = _kept(out.links, _links(before.inline), _links(after.inline))
        if not found:
            out.identical += 1
            continue
        out.changed[name] = found
        if status == "ok":
            out.silent.append(name)
        else:
            out.flagged += 1
    return out


def _kept(total: tuple[int, int], before: Counter[str], after: Counter[str]) -> tuple[int, int]:
    return total[0] + sum((before & after).values()), total[1] + sum(before.values())


def _links(inline: Counter[str]) -> Counter[str]:
    """Paths that end in a link or an image (Markdown) or an ``<a``/``<img`` tag (HTML)."""
    ends = ("link ", "image ", "<a", "<img")
    return Counter({p: n for p, n in inline.items() if p.rsplit(" > ", 1)[-1].startswith(ends)})


def translate(fmt: str, documents: list[tuple[str, str]], artifact: Path, threads: int) -> tuple[list[object], float]:
    from worker.documents.translator import DocumentTranslator
    from worker.engine.translator import Translator

    translator = DocumentTranslator(Translator(artifact, threads=threads), format=fmt)
    started = time.perf_counter()
    results: list[object] = []
    for k in range(0, len(documents), 16):
        results += translator.translate(documents[k : k + 16])
        print(f"  {fmt}: {len(results)}/{len(documents)} documents", flush=True)
    return results, time.perf_counter() - started


def report(fmt: str, t: Tally, show: int) -> None:
    share = 100 * t.identical / max(1, t.documents)
    print(
        f"{fmt}: {t.identical}/{t.documents} structurally identical ({share:.0f}%), {t.flagged} flagged, "
        f"{len(t.silent)} different but ok, {len(t.errors)} errors; code kept {t.verbatim[0]}/{t.verbatim[1]}, "
        f"links kept {t.links[0]}/{t.links[1]}; {t.characters / t.seconds:,.0f} characters/s"
    )
    for name in t.silent + t.errors:
        print(f"  NOT FLAGGED OR ERROR: {name}")
    for name, found in list(t.changed.items())[:show]:
        print(f"  {name}: " + "; ".join(found))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--artifact", type=Path, default=Path("artifacts/demo"), help="python -m export_tools demo")
    p.add_argument("--corpus", type=Path, default=CORPUS, help="folder with markdown/ and html/")
    p.add_argument("--formats", nargs="+", default=["markdown", "html"], choices=list(SUFFIXES))
    p.add_argument("--threads", type=int, default=2, help="ONNX Runtime intra-op threads")
    p.add_argument("--show", type=int, default=10, help="list what changed in this many documents per format")
    p.add_argument("--only", nargs="+", default=["*"], help="documents whose file name matches a pattern ('*numpy*')")
    args = p.parse_args(argv)
    if not (args.artifact / "manifest.json").exists():
        p.error(f"no artifact at {args.artifact}: build it with python -m export_tools demo --out {args.artifact}")
    for fmt in args.formats:
        documents = [(n, text) for n, text in corpus(fmt, args.corpus) if any(fnmatch.fnmatch(n, p) for p in args.only)]
        results, seconds = translate(fmt, documents, args.artifact, args.threads)
        report(fmt, tally(fmt, documents, results, seconds), args.show)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
