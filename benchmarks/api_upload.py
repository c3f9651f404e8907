"""What a large upload costs the jobs API server (``python -m jobs serve``): a JSONL body of ``--mb`` MiB uploaded,
then submitted as a job (no worker: the submit's own work), the server's peak resident memory after each, and
the wall time of each request. A throwaway Redis, a local output, the demo artifact.

    python -m benchmarks.api_upload              # 50 MiB
    python -m benchmarks.api_upload --mb 200
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from benchmarks.documents import ARTIFACT, ensure_artifact
from jobs.embedded import ROOT, RedisServer, free_port, wait_for

TOKEN = "bench-token-0123456789abcdef"


def peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def call(port: int, path: str, body: bytes, content_type: str) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method="POST")
    request.add_header("Authorization", f"Bearer {TOKEN}")
    request.add_header("Content-Type", content_type)
    with urllib.request.urlopen(request, timeout=3600) as answer:
        return dict(json.loads(answer.read()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=50, help="size of the upload in MiB (default 50)")
    args = parser.parse_args()
    ensure_artifact()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        redis = RedisServer().start()
        (work / "tokens").write_text(f"bench {TOKEN}\n")
        line = (json.dumps({"id": "doc", "text": "The meeting starts at 9 am. Tom has 3 apples."}) + "\n").encode()
        body = b"".join(line.replace(b'"doc"', f'"d{n}"'.encode()) for n in range(int(args.mb * 2**20 / len(line))))
        port = free_port()
        command = [sys.executable, "-m", "jobs", "serve", "--port", str(port), "--tokens", str(work / "tokens"),
                   "--output", str(work / "out"), "--artifacts", str(ARTIFACT.parent)]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT), "FANYI_BROKER_URL": redis.url}
        server = subprocess.Popen(command, env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: _answers(port), 30, "the server")
            print(f"server started: peak {peak_mib(server.pid):.0f} MiB", flush=True)
            started = time.perf_counter()
            uploaded = call(port, "/v1/uploads", body, "application/x-ndjson")
            seconds, documents = time.perf_counter() - started, body.count(b"\n")
            print(f"upload of {len(body) / 2**20:.0f} MiB ({documents:,} documents): {seconds:.1f} s, "
                  f"server peak {peak_mib(server.pid):.0f} MiB", flush=True)  # fmt: skip
            spec = {"name": "bench", "inputs": [uploaded["uri"]], "artifact": str(ARTIFACT.resolve())}
            started = time.perf_counter()
            submitted = call(port, "/v1/jobs", json.dumps({"spec": spec}).encode(), "application/json")
            print(f"submit of it: {time.perf_counter() - started:.1f} s, {submitted['status']['chunks']:,} chunks, "
                  f"server peak {peak_mib(server.pid):.0f} MiB", flush=True)  # fmt: skip
        finally:
            server.terminate()
            server.wait()
            redis.stop()


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
            return True
    except OSError:
        return False


if __name__ == "__main__":
    main()
