"""Collect real Markdown and HTML documents no one here wrote into ``tests/data/documents/``.

    python scripts/collect_documents.py [--out tests/data/documents] [--markdown 64] [--html 44]

Sources on a Debian machine with the project's venv: the long descriptions (READMEs) that installed
Python packages carry in their metadata (``*.dist-info/METADATA`` marked ``text/markdown``), Debian's
Markdown documentation (``/usr/share/doc/**/*.md[.gz]``) and its HTML documentation
(``/usr/share/doc/**/*.html``). Documents are taken as their bytes are (``\\r\\n`` kept), at most a few
per package so that no one generator of HTML or style of README dominates, between ``--min-bytes``
and ``--max-bytes`` so the suite translates them in CI's time (documents with ``\\r\\n`` line ends, rare,
up to six times that), in a fixed order (same machine, same corpus). ``SOURCES.tsv`` names where each
one came from; the documents keep their own licences (Debian's ``copyright`` files, each package's
metadata).
"""

from __future__ import annotations

import argparse
import email
import gzip
import hashlib
import re
import site
import sys
from collections.abc import Iterator
from pathlib import Path

DOCS = Path("/usr/share/doc")


def metadata_readmes() -> Iterator[tuple[str, str, bytes]]:
    """(package, origin, README bytes) of every installed distribution whose description is Markdown."""
    roots = {Path(p) for p in [*site.getsitepackages(), site.getusersitepackages()] if Path(p).is_dir()}
    for path in sorted(p for root in roots for p in root.glob("*.dist-info/METADATA")):
        raw = path.read_bytes()
        message = email.message_from_bytes(raw)
        if "markdown" not in str(message.get("Description-Content-Type", "")).lower():
            continue
        body = re.split(rb"\r?\n\r?\n", raw, maxsplit=1)[-1]  # the description is the message body, as written
        yield str(message.get("Name", path.parent.name)).lower(), f"{path.parent.name}/METADATA", body


def debian_documents(patterns: tuple[str, ...]) -> Iterator[tuple[str, str, bytes]]:
    for pattern in patterns:
        for path in sorted(DOCS.glob(pattern)):
            if path.is_symlink() or not path.is_file():
                continue
            raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
            yield path.relative_to(DOCS).parts[0], str(path), raw


def choose(
    found: Iterator[tuple[str, str, bytes]], count: int, per_package: int, sizes: tuple[int, int]
) -> list[tuple[str, str, bytes]]:
    """``count`` documents taken from the packages in turn (one of each, then a second of each, ...), so
    that every generator of HTML and style of README is in; the same page shipped by two packages (a
    library's manual in its runtime and -dev packages) is taken once."""
    candidates: dict[str, list[tuple[str, str, bytes]]] = {}
    seen: set[str] = set()
    for package, origin, raw in found:
        crlf = b"\r\n" in raw and len(raw) <= 6 * sizes[1]  # rare: taken even when larger than the rest
        title = re.search(rb"<title>(.*?)</title>", raw, re.S | re.I)  # a page's identity across packages
        keys = {hashlib.sha256(raw).hexdigest(), title.group(1).strip().decode("utf-8", "replace") if title else ""}
        if not (sizes[0] <= len(raw) <= sizes[1] or crlf) or keys & seen:
            continue
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        seen |= keys - {""}
        candidates.setdefault(package, []).append((package, origin, raw))
    taken: list[tuple[str, str, bytes]] = []
    for round_ in range(per_package):
        taken += [documents[round_] for documents in candidates.values() if len(documents) > round_]
    return taken[:count]


def write(out: Path, kind: str, suffix: str, documents: list[tuple[str, str, bytes]]) -> list[str]:
    folder = out / kind
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for number, (package, origin, raw) in enumerate(documents):
        name = f"{number:03d}-{re.sub(r'[^a-z0-9]+', '-', package.lower()).strip('-')}{suffix}"
        (folder / name).write_bytes(raw)
        rows.append(f"{kind}/{name}\t{package}\t{origin}\t{hashlib.sha256(raw).hexdigest()}")
        print(f"{kind}/{name}  {len(raw):>7,} bytes  {origin}", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("tests/data/documents"), help="folder to (re)write")
    p.add_argument("--markdown", type=int, default=64, help="Markdown documents to take")
    p.add_argument("--html", type=int, default=44, help="HTML documents to take")
    p.add_argument("--per-package", type=int, default=3, help="at most this many Markdown documents of one package")
    p.add_argument("--html-per-package", type=int, default=10, help="the same for HTML (fewer packages ship it)")
    p.add_argument("--min-bytes", type=int, default=600, help="smaller documents are skipped")
    p.add_argument("--max-bytes", type=int, default=9_000, help="larger Markdown documents are skipped (CI's time)")
    p.add_argument("--max-html-bytes", type=int, default=24_000, help="larger HTML documents are skipped")
    args = p.parse_args(argv)
    sizes = (args.min_bytes, args.max_bytes)
    markdown = choose(
        _chain(metadata_readmes(), debian_documents(("*/*.md", "*/*.md.gz", "*/**/*.md", "*/**/*.md.gz"))),
        args.markdown,
        args.per_package,
        sizes,
    )
    html_sizes = (args.min_bytes, args.max_html_bytes)
    html = choose(debian_documents(("*/*.html", "*/**/*.html")), args.html, args.html_per_package, html_sizes)
    if len(markdown) < args.markdown or len(html) < args.html:
        print(
            f"error: found {len(markdown)} Markdown and {len(html)} HTML documents of the sizes asked for; "
            "widen --min-bytes/--max-bytes or --per-package",
            file=sys.stderr,
        )
        return 1
    rows = write(args.out, "markdown", ".md", markdown) + write(args.out, "html", ".html", html)
    (args.out / "SOURCES.tsv").write_text("file\tpackage\torigin\tsha256\n" + "\n".join(rows) + "\n")
    print(f"{len(markdown)} Markdown and {len(html)} HTML documents in {args.out}", file=sys.stderr)
    return 0


def _chain(*iterators: Iterator[tuple[str, str, bytes]]) -> Iterator[tuple[str, str, bytes]]:
    for iterator in iterators:
        yield from iterator


if __name__ == "__main__":
    sys.exit(main())
