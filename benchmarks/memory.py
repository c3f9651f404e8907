"""Translation memory benchmark: what repeated text costs with and without ``worker/engine/memory.py``.

    python -m benchmarks.memory                      # both parts, 3 paired rounds
    python -m benchmarks.memory --rounds 5 --documents 400 --skip-job

Corpora: demo-domain documents of 1-4 paragraphs (``demo_corpus.repeating_documents``), one where 30%
of the paragraphs repeat earlier ones and one where none do.

1. A job on 2 worker processes (throwaway Redis, local output, 20 documents per chunk), ``memory: off``
   against ``memory: job`` on the corpus with repeats: wall time, engine time (the rows' summed
   ``timings.translate``), the reuse rate ``_SUCCESS`` records, and whether the outputs are identical.
2. Document layer, in this process (demo artifact, INT8, 2 threads, the model's beam 4, 64 documents
   per call as the CLI sends them): documents/s with memory off and on, in rounds that alternate the
   two, a fresh memory each round; the share of windows reused; whether the outputs are identical.

The demo artifact is built under build/bench-docs if it is missing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.documents import ARTIFACT, ensure_artifact
from export_tools.fixtures.demo_corpus import repeating_documents

BATCH = 64  # documents per call, as the worker CLI sends them


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="paired rounds (off, on) per corpus")
    parser.add_argument("--documents", type=int, default=400, help="documents per corpus")
    parser.add_argument("--skip-job", action="store_true", help="only the document layer")
    args = parser.parse_args()
    ensure_artifact()
    corpora = {
        "30% repeated": repeating_documents(11, args.documents, repeat=0.3),
        "no repeats": repeating_documents(11, args.documents, repeat=0.0),
    }
    if not args.skip_job:  # first: the job's settings come from the environment it sets, read at first import
        job(corpora["30% repeated"], args.rounds)
    document_layer(corpora, args.rounds)


def document_layer(corpora: dict[str, list[dict[str, str]]], rounds: int) -> None:
    from worker.documents.translator import DocumentTranslator
    from worker.engine.memory import LocalMemory
    from worker.engine.translator import Translator

    translator = Translator(ARTIFACT, precision="int8", threads=2)
    options = translator.options()
    print("| corpus | documents/s off | documents/s on | on / off (per round) | windows reused | identical |")
    print("| --- | ---: | ---: | --- | ---: | --- |")
    for name, documents in corpora.items():
        pairs = [(d["id"], d["text"]) for d in documents]
        speeds: dict[str, list[float]] = {"off": [], "on": []}
        outputs: dict[str, list[Any]] = {}
        reused = windows = 0
        for _ in range(rounds):
            for mode in ("off", "on"):
                engine = DocumentTranslator(translator, memory=LocalMemory() if mode == "on" else None)
                started = time.perf_counter()
                results = [
                    r for i in range(0, len(pairs), BATCH) for r in engine.translate(pairs[i : i + BATCH], options)
                ]
                speeds[mode].append(len(pairs) / (time.perf_counter() - started))
                outputs[mode] = [(r.id, r.translation, r.status, r.sentences) for r in results]
                if mode == "on":
                    reused, windows = sum(r.reused_windows for r in results), sum(r.windows for r in results)
        ratios = ", ".join(f"{on / off:.2f}" for off, on in zip(speeds["off"], speeds["on"]))
        identical = "yes" if outputs["on"] == outputs["off"] else "NO"
        off, on = statistics.median(speeds["off"]), statistics.median(speeds["on"])
        print(
            f"| {name} | {off:.1f} | {on:.1f} | {ratios} | {reused}/{windows} ({reused / windows:.0%}) | {identical} |"
        )


def job(documents: list[dict[str, str]], rounds: int) -> None:
    import os

    from jobs.embedded import RedisServer, Worker

    folder = Path(tempfile.mkdtemp(prefix="fanyi-bench-memory-"))
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in documents))
    redis = RedisServer().start()
    env = {"FANYI_BROKER_URL": redis.url, "FANYI_ARTIFACT": str(ARTIFACT.resolve()), "FANYI_PRECISION": "int8"}
    os.environ.update(env)
    worker = Worker(env, folder / "worker.log", concurrency=2)
    try:
        worker.start()
        runs: dict[str, list[tuple[float, float, float, list[Any]]]] = {"off": [], "job": []}
        for _ in range(rounds):
            for memory in runs:
                runs[memory].append(_run_job(corpus, folder / "out", memory))
        outputs = [run[3] for memory in runs for run in runs[memory]]
        identical = "yes" if all(o == outputs[0] for o in outputs) else "NO"
        print("| job, 2 processes | wall s | engine s | job / off engine s (per round) | reuse rate | identical |")
        print("| --- | ---: | ---: | --- | ---: | --- |")
        ratios = ", ".join(f"{j[1] / o[1]:.2f}" for o, j in zip(runs["off"], runs["job"]))
        for memory, done in runs.items():
            wall, engine = statistics.median(r[0] for r in done), statistics.median(r[1] for r in done)
            rate = statistics.median(r[2] for r in done)
            shown = ratios if memory == "job" else ""
            print(f"| memory: {memory} | {wall:.1f} | {engine:.1f} | {shown} | {rate:.0%} | {identical} |", flush=True)
        print()
    finally:
        worker.stop()
        redis.stop()


def _run_job(corpus: Path, output: Path, memory: str) -> tuple[float, float, float, list[Any]]:
    from contract.rows import read_rows
    from contract.spec import JobSpec
    from contract.storage import open_storage
    from jobs import api

    spec = JobSpec(
        name=f"memory-{memory}", inputs=[str(corpus)], output=str(output), artifact=str(ARTIFACT.resolve()),
        chunk_documents=20, memory=memory,
    )  # fmt: skip
    started = time.perf_counter()
    job_id = api.submit(spec)
    api.wait(job_id, str(output), poll=0.2)
    wall = time.perf_counter() - started
    storage = open_storage(str(output))
    rows = sorted(
        (r for key in storage.list(f"{job_id}/parts") for r in read_rows(storage.read(key))), key=lambda r: r["id"]
    )
    summary = json.loads(storage.read(f"{job_id}/_SUCCESS"))
    engine = sum(r["timings"]["translate"] for r in rows)
    return wall, engine, summary["memory"]["reuse_rate"], [(r["id"], r["translation"], r["sentences"]) for r in rows]


if __name__ == "__main__":
    main()
