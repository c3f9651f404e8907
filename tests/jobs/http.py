"""The jobs API server for tests: ``python -m jobs serve`` in its own process (``Server``), requests to it, a
webhook receiver (``Listener``); the fixtures ``server`` and ``listener`` are in ``conftest.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.services import ROOT, free_port, wait_for

TOKENS = {
    "books": "books-token-0123456789abcdef",
    "news": "news-token-0123456789abcdef",
    "tight": "tight-token-0123456789abcdef",
}
LIMITS = {"tight": "max_queued_documents=40 highest_priority=3"}  # after the team's token in the tokens file


class Server:
    """``python -m jobs serve`` in its own process, and requests to it."""

    def __init__(self, tmp_path: Path, services: dict, *args: str):
        self.port, self.log = free_port(), tmp_path / "server.log"
        tokens = tmp_path / "tokens"
        tokens.write_text(
            "# team token\n" + "".join(f"{team} {token} {LIMITS.get(team, '')}\n" for team, token in TOKENS.items())
        )
        command = [sys.executable, "-m", "jobs", "serve", "--port", str(self.port), "--tokens", str(tokens), *args]
        env = {**os.environ, "PYTHONPATH": str(ROOT), **services["env"]}
        with self.log.open("w") as log:
            self.process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        wait_for(self._up, 30, "the jobs API server")

    def _up(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"the server exited: {self.log.read_text()[-3000:]}")
        try:
            return self.call("GET", "/healthz", team=None)[0] == 200
        except OSError:
            return False

    def call(
        self, method: str, path: str, body: Any = None, *, team: str | None = "books", headers: dict | None = None
    ) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method)
        for name, value in {**({"Authorization": f"Bearer {TOKENS[team]}"} if team else {}), **(headers or {})}.items():
            request.add_header(name, value)
        if data is not None and not isinstance(body, bytes):
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=120) as answer:
                raw = answer.read()
                kind = answer.headers.get("Content-Type", "")
                return answer.status, raw.decode() if "ndjson" in kind else json.loads(raw)
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def stop(self) -> str:
        self.process.terminate()
        self.process.wait(timeout=20)
        return self.log.read_text()

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=20)


class Listener:
    """A webhook receiver on 127.0.0.1: every delivery's headers and body; the first ``failures`` get a 500."""

    def __init__(self, failures: int = 0):
        self.deliveries: list[tuple[dict[str, str], bytes]] = []
        received, failing = self.deliveries, [failures]

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                received.append((dict(self.headers), self.rfile.read(int(self.headers["Content-Length"]))))
                code = 500 if failing[0] > 0 else 204
                failing[0] -= 1
                self.send_response(code)
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/hooks/fanyi"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()


def api_spec(demo_artifact: Path, inputs: list[str], **extra: Any) -> dict:
    """A submit request's body: a spec on the demo artifact, its output left to the server."""
    return {"spec": {"name": "web", "inputs": inputs, "artifact": str(demo_artifact), "chunk_documents": 10, **extra}}


def until(server: Server, job_id: str, states: set[str], team: str = "books") -> dict:
    found: dict = {}

    def reached() -> bool:
        nonlocal found
        code, found = server.call("GET", f"/v1/jobs/{job_id}", team=team)
        return code == 200 and found["state"] in states

    wait_for(reached, 240, f"job {job_id} to reach {states}")
    return found
