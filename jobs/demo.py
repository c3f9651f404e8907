"""``python -m jobs demo``: the whole system on embedded defaults, in one command.

Builds the demo artifact if it is missing (``artifacts/demo``), starts a throwaway Redis and one
worker, submits the bundled corpus (``examples/corpus.jsonl``, 200 documents), shows progress,
writes Parquet under ``results/demo/``, prints a few source/translation pairs and the job summary,
and stops what it started, also on Ctrl-C or an error.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from jobs.embedded import ROOT, RedisServer, Worker

ARTIFACT = ROOT / "artifacts" / "demo"
CORPUS = ROOT / "examples" / "corpus.jsonl"
OUTPUT = ROOT / "results" / "demo"


def ensure_artifact(path: Path) -> None:
    """Build the demo artifact if it is missing or was built by a version that wrote another format."""
    from worker.engine.artifact import Artifact, ArtifactError

    try:
        Artifact.load(path, verify=False)
        return
    except ArtifactError:
        pass
    print(f"building the demo artifact at {path} (once; about a minute)", flush=True)
    command = [sys.executable, "-m", "export_tools", "demo", "--out", str(path), "--force"]
    subprocess.run(command, check=True, cwd=ROOT)


def run(artifact: Path, corpus: Path, output: Path, pairs: int) -> int:
    ensure_artifact(artifact)
    logs = Path(tempfile.mkdtemp(prefix="fanyi-demo-"))
    redis = RedisServer()
    env = {"FANYI_BROKER_URL": redis.url, "FANYI_ARTIFACT": str(artifact), "FANYI_THREADS": str(os.cpu_count() or 1)}
    os.environ.update(env)
    from contract import settings  # read now, with the demo's broker: any other bad FANYI_* is one line

    settings.exit_if_invalid()
    redis.start()
    print(f"redis: {redis.url} (throwaway)", flush=True)
    worker = Worker(env, logs / "worker.log")
    try:
        worker.start()
        print(f"worker: started (log {logs / 'worker.log'})", flush=True)
        return _submit_and_show(artifact, corpus, output, pairs, logs)
    finally:
        worker.stop()
        redis.stop()
        print("stopped the worker and redis", flush=True)


def _submit_and_show(artifact: Path, corpus: Path, output: Path, pairs: int, logs: Path) -> int:
    from contract.rows import read_rows
    from contract.spec import JobSpec
    from contract.storage import open_storage
    from jobs import api

    spec = JobSpec(name="demo", inputs=[str(corpus)], output=str(output), artifact=str(artifact), chunk_documents=25)
    job_id = api.submit(spec)
    print(f"submitted job {job_id}", flush=True)
    status = api.wait(job_id, str(output), poll=0.5, on_progress=api.Progress())
    storage = open_storage(str(output))
    rows = [row for key in storage.list(f"{job_id}/parts") for row in read_rows(storage.read(key))]
    for row in [r for r in rows if r["source"].strip()][:pairs]:
        print(
            f"\n{row['id']}\n{textwrap.indent(row['source'], '  EN ')}\n{textwrap.indent(row['translation'], '  ZH ')}"
        )
    summary = json.loads(storage.read(f"{job_id}/_SUCCESS"))
    print(f"\njob {job_id}: {status.state}, {summary['documents']} documents, statuses {summary['statuses']}")
    print(f"Parquet parts: {output / job_id / 'parts'}")
    return 0 if status.state == "succeeded" else 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jobs demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--artifact", type=Path, default=ARTIFACT, help="artifact directory (built if missing)")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="JSON lines {id, text} to translate")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="local directory for the job's Parquet")
    parser.add_argument("--pairs", type=int, default=5, help="source/translation pairs to print")
    args = parser.parse_args(argv)
    sys.exit(run(args.artifact.resolve(), args.corpus.resolve(), args.output.resolve(), args.pairs))
