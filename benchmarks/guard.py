"""What the degeneration guard costs and gives: suspects, sentences its retry fixed, its share of the CPU,
and a process's memory, on the trained demo model and on the opus-mt-en-zh shape with random weights.

    python -m benchmarks.guard [--documents 1000]

- Demo model (``build/bench/demo``, the worker's default precision, 1 thread, beam 4): documents of its
  own domain (two sentences each), and real English it was not trained on (the msgids of Debian's
  gettext catalogues, 40-200 characters, one per document), where a trained model's suspects show.
- opus-mt-en-zh shape, random weights (``build/bench/ours``, int8): every sentence loops to the length
  limit (32 new tokens here), so every sentence is retried; resident memory after each of three calls
  (measured first: the memory column is the whole process's, so the demo rows carry these rows' peak).

Prints one table row per corpus. The artifacts come from ``python -m benchmarks.engine`` (build/bench).
"""

from __future__ import annotations

import argparse
import gettext
import random
import time
from pathlib import Path

from benchmarks.engine import CACHE
from export_tools.fixtures import demo_corpus
from worker.documents.degeneration import SYMPTOMS
from worker.documents.translator import DocumentTranslator
from worker.engine.translator import Translator

LOCALE = Path("/usr/share/locale/fr/LC_MESSAGES")  # English msgids, whatever their translation's language
CALL = 64


def catalogue_english(count: int) -> list[str]:
    """``count`` English sentences of Debian's gettext catalogues (iso-codes' names left out), seeded."""
    found: set[str] = set()
    for path in sorted(LOCALE.glob("*.mo")):
        if path.name.startswith("iso_"):
            continue
        try:
            with path.open("rb") as handle:
                catalogue = gettext.GNUTranslations(handle)._catalog  # type: ignore[attr-defined]
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        for msgid in catalogue:
            text = msgid if isinstance(msgid, str) else msgid[0]
            if 40 <= len(text) <= 200 and "%" not in text and "\n" not in text:
                found.add(text)
    return random.Random(3).sample(sorted(found), min(count, len(found)))


def demo_domain(count: int) -> list[str]:
    rng = random.Random(0)
    return [demo_corpus.paragraph(rng, 2).en for _ in range(count)]


def memory_mib() -> tuple[int, int]:
    """This process's resident and peak memory, MiB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]) // 1024, int(fields["VmHWM"].split()[0]) // 1024


def measure(translator: Translator, texts: list[str], **overrides: int) -> dict[str, float]:
    """Translate ``texts`` as documents, ``CALL`` a call; count what the guard saw and fixed, and time it."""
    documents = DocumentTranslator(translator)
    options = translator.options(beam_size=4, **overrides)
    guard, spent = documents._guard, [0.0]

    def timed(*args: object) -> None:
        started = time.process_time()
        guard(*args)  # type: ignore[arg-type]
        spent[0] += time.process_time() - started

    documents._guard = timed  # type: ignore[method-assign,assignment]
    started = time.process_time()
    results = []
    for i in range(0, len(texts), CALL):
        results += documents.translate([(str(i + k), t) for k, t in enumerate(texts[i : i + CALL])], options)
    total = time.process_time() - started
    sentences = [s for r in results for s in r.sentences]
    retried = [s for s in sentences if "retried" in s.flags]
    fixed = [s for s in retried if not set(s.flags) & SYMPTOMS]
    return {"sentences": len(sentences), "retried": len(retried), "fixed": len(fixed), "guard_cpu_s": spent[0],
            "cpu_s": total}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=1000, help="documents of each demo-model corpus")
    args = parser.parse_args()
    print("| corpus | precision | sentences | retried | fixed | guard CPU share | RSS after / peak MiB |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    opus = Translator(CACHE / "ours", precision="int8", threads=1)  # first: the memory column is the process's
    for call in range(3):
        sentences = ["Tom has 3 apples. The meeting starts at 9 am. It rained all day in the city."] * 16
        _row(f"opus shape, random weights, call {call + 1}", "int8", measure(opus, sentences, max_new_tokens=32))
    demo = Translator(CACHE / "demo", threads=1)
    corpora = {"demo domain": demo_domain(args.documents), "Debian msgids": catalogue_english(args.documents)}
    for name, texts in corpora.items():
        _row(name, demo.precision, measure(demo, texts))


def _row(name: str, precision: str, found: dict[str, float]) -> None:
    rss, peak = memory_mib()
    share = 100 * found["guard_cpu_s"] / found["cpu_s"]
    print(f"| {name} | {precision} | {found['sentences']:.0f} | {found['retried']:.0f} | {found['fixed']:.0f} | "
          f"{share:.1f}% | {rss} / {peak} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
