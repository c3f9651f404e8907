"""Where the engine's peak memory goes: resident memory after each stage of the engine benchmark's
batch, in one process.

    python -m benchmarks.engine_memory                     # int8, the worker's own session settings
    python -m benchmarks.engine_memory --precision int8-static

Stages: the imports, the sessions made, a warm-up of 2 sentences, then one batch of 16 (beam 4, 32 new
tokens: the headline workload of ``python -m benchmarks.engine``, whose cache under ``build/bench`` it
reads; run that first). Per stage: resident now (``VmRSS``), the high-water mark (``VmHWM``), and the
resident split into anonymous memory (``RssAnon``: heaps, the arena, prepacked weights) and file pages
(``RssFile``: the libraries and the memory-mapped weights file).
"""

from __future__ import annotations

import argparse
import os

from benchmarks.engine import BEAMS, CACHE, NEW_TOKENS, THREADS, batches, workload
from worker.engine.translator import Translator

FIELDS = ("VmRSS", "VmHWM", "RssAnon", "RssFile")


def resident() -> dict[str, int]:
    """This process's memory figures in MiB, read from ``/proc/self/status``."""
    with open("/proc/self/status") as status:
        found = {line.split(":")[0]: int(line.split()[1]) // 1024 for line in status if line.startswith(FIELDS)}
    return {name: found[name] for name in FIELDS}


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.engine_memory",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--precision", default="int8", choices=["fp32", "int8", "int8-static"])
    args = p.parse_args()
    if not (CACHE / "ours" / args.precision).exists():
        raise SystemExit(f"{CACHE / 'ours'} has no {args.precision} graphs: run `python -m benchmarks.engine` first")
    rows = [("imports", resident())]
    translator = Translator(CACHE / "ours", precision=args.precision, threads=THREADS)
    with translator.pool.acquire():  # the sessions are made on first use
        pass
    rows.append(("sessions", resident()))
    options = translator.options(beam_size=BEAMS, min_new_tokens=NEW_TOKENS, max_new_tokens=NEW_TOKENS)
    sources, _ = workload()
    translator.generate_ids(sources[:2], options)
    rows.append(("warm-up, 2 sentences", resident()))
    translator.generate_ids(batches(sources)[0], options)
    rows.append(("batch of 16", resident()))
    print(f"{args.precision}, pid {os.getpid()}; MiB")
    print(f"| stage | {' | '.join(FIELDS)} |\n| --- |{' ---: |' * len(FIELDS)}")
    for stage, figures in rows:
        print(f"| {stage} | {' | '.join(str(figures[name]) for name in FIELDS)} |")


if __name__ == "__main__":
    main()
