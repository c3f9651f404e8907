"""This worker's health: whether it may take chunks (readiness), and whether it is alive (liveness).

**Readiness.** A worker that hits an environment fault (``worker.runtime.faults``) adds it to
``FANYI_HEALTH_FILE`` with the check that would show it fixed (load this artifact, build this
engine, load the job's artifact or find that no live worker can, list this storage, write to this
folder), and stops consuming its queues. Every fault met is
kept; the watchdog (``worker.monitoring.watchdog``) reruns their checks every heartbeat and, once **all** pass,
consumes again and marks the worker healthy. A disk fault names the folder of its file, or without a
file name the temporary folder and the health file's folder.

**Liveness.** The watchdog writes the time of each pass to ``<FANYI_HEALTH_FILE>.beat``, first thing
in the pass, before any call to Redis or storage (a Redis outage is no reason to restart a worker:
every Redis call times out in seconds and the next pass beats again). The watchdog starts with the
worker's main process, before it connects to the broker and before its processes load a model, and
beats from its first moment, so a worker that is starting or loading a model beats like any other
and needs no grace period; one whose watchdog has not beaten for six heartbeats is hung. A missing
beat file fails too: the worker has not got as far as starting (give the probe an initial delay of a
few seconds for the interpreter to start, or a startup probe), or it writes elsewhere.

    python -m worker.health          # readiness: exit 0 when healthy, 1 with the reasons otherwise
    python -m worker.health --live   # liveness: exit 0 while the watchdog beats, 1 with the reason otherwise
    python -m worker.health --engine ARTIFACT  # exit 0 when ARTIFACT's engine builds with this worker's settings
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from contract import settings
from worker.monitoring import fleet

LIVE_BEATS = 6  # heartbeats without a watchdog pass after which a worker is hung
DISK_HEADROOM = 64 * 2**20  # bytes a full disk needs free before its worker takes chunks again


def _path() -> Path:
    return Path(settings.HEALTH_FILE)


def folder() -> str:
    """The folder of the health files."""
    return str(_path().parent)


def beat_path() -> Path:
    return Path(f"{settings.HEALTH_FILE}.beat")


def state() -> dict[str, Any]:
    """``{"healthy": True}``, or ``faults`` (each a ``reason`` and its ``check``), ``reason`` (theirs,
    joined), ``queues`` and ``since``."""
    try:
        return dict(json.loads(_path().read_text()))
    except (OSError, ValueError):
        return {"healthy": True}


def mark_unhealthy(reason: str, checks: dict[str, str] | Sequence[dict[str, str]], queues: list[str]) -> None:
    """Add a fault, and the checks that show it fixed, to those this worker has met."""
    checks = [checks] if isinstance(checks, dict) else list(checks)
    with _locked():
        current = state()
        faults = [f for f in current.get("faults", []) if f["check"] not in checks]
        faults += [{"reason": reason, "check": check} for check in checks]
        queues = sorted(set(queues) | set(current.get("queues", [])))
        since = current.get("since", time.time())
        _write(_unhealthy(faults, queues, since))


def _unhealthy(faults: list[dict[str, Any]], queues: list[str], since: float) -> dict[str, Any]:
    reasons = list(dict.fromkeys(f["reason"] for f in faults))
    return {"healthy": False, "reason": "; ".join(reasons), "faults": faults, "queues": queues, "since": since}


def mark_healthy() -> None:
    with _locked():
        _write({"healthy": True})


def fixed() -> dict[str, Any] | None:
    """Run the checks of an unhealthy worker: its state when every one passes (consume its ``queues``
    again, then ``clear`` it), else None, with the faults that passed dropped."""
    current = state()
    if current.get("healthy", True):
        return None
    failing = [f for f in current.get("faults", []) if not passes(f["check"])]
    if not failing:
        return current
    with _locked():
        now = state()
        if not now.get("healthy", True):
            passed = [f for f in current.get("faults", []) if f not in failing]
            left = [f for f in now.get("faults", []) if f not in passed]
            _write(_unhealthy(left, now.get("queues", []), now.get("since", time.time())))
    return None


def clear(fixed_state: dict[str, Any]) -> None:
    """The faults of ``fixed_state`` are fixed: healthy, unless another one was met meanwhile."""
    with _locked():
        now = state()
        left = [f for f in now.get("faults", []) if f not in fixed_state.get("faults", [])]
        _write(_unhealthy(left, now.get("queues", []), now.get("since", time.time())) if left else {"healthy": True})


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """One writer at a time: the pool processes and the watchdog all update the file."""
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _write(data: dict[str, Any], path: Path | None = None) -> None:
    path = path or _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".health-")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def passes(check: dict[str, str]) -> bool:
    """Run a recorded check: is the fault fixed?"""
    kind, target = check.get("kind"), check.get("target", "")
    try:
        if kind == "artifact":
            from worker.engine.artifact import Artifact

            Artifact.load(target)
        elif kind == "job_artifact":  # it loads, or no worker can: then it is the job's fault, not this one's
            if _loads(target):
                fleet.can_load(target, check.get("worker", ""))
                return True
            return fleet.nobody_can_load(target, check.get("queue", ""))
        elif kind == "engine":  # in a process of its own: no ONNX Runtime or CUDA state in the worker's
            timeout = max(5.0, 5 * settings.HEARTBEAT)  # under the liveness limit of six heartbeats
            command = [sys.executable, "-m", "worker.health", "--engine", target]
            return subprocess.run(command, capture_output=True, timeout=timeout).returncode == 0
        elif kind == "disk":
            return _disk_has_room(target)
        elif kind == "storage":
            from contract.storage import open_storage

            open_storage(target).list("_health-probe/")
        else:
            return False
    except Exception:  # noqa: BLE001 - any failure means "not fixed yet"
        return False
    return True


def _loads(artifact: str) -> bool:
    from worker.engine.artifact import Artifact, ArtifactError

    try:
        Artifact.load(artifact)
    except ArtifactError:
        return False
    return True


def _disk_has_room(folder: str) -> bool:
    """Whether a folder that was full (or read-only) takes writes again, with room to spare: some data
    written and flushed (an empty file fits on a full disk; a read-only one refuses even that), and at
    least ``DISK_HEADROOM`` free, or a tenth of a smaller filesystem. Without the headroom a disk with a
    few KiB left passes, the worker takes a chunk, fills it again and fails: healthy, then unhealthy,
    every heartbeat."""
    with tempfile.NamedTemporaryFile(dir=folder) as f:
        f.write(b"\0" * 65536)
        f.flush()
        os.fsync(f.fileno())
    disk = os.statvfs(folder)
    return disk.f_bavail * disk.f_frsize >= min(DISK_HEADROOM, disk.f_blocks * disk.f_frsize // 10)


def record_beat(started: float, interval: float) -> None:
    """The watchdog passed now (it started at ``started`` and passes every ``interval`` s)."""
    _write({"pid": os.getpid(), "started": started, "beat": time.time(), "interval": interval}, beat_path())


def alive(now: float | None = None) -> tuple[bool, str]:
    """Whether the watchdog beat within the last six heartbeats, and a line that says so."""
    now = time.time() if now is None else now
    path = beat_path()
    try:
        beat = json.loads(path.read_text())
        last, interval = float(beat["beat"]), float(beat.get("interval") or settings.HEARTBEAT)
    except FileNotFoundError:
        return False, f"no watchdog beat in {path}: the worker has not started (or its FANYI_HEALTH_FILE differs)"
    except (OSError, ValueError, KeyError, TypeError) as err:
        return False, f"unreadable watchdog beat in {path}: {err}"
    limit = LIVE_BEATS * interval
    if now - last > limit:
        return False, f"hung: the watchdog's last beat was {now - last:.0f} s ago (limit {limit:.0f} s)"
    return True, f"alive: the watchdog's last beat was {now - last:.1f} s ago"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m worker.health",
        description=(
            "Probe this worker (the files next to FANYI_HEALTH_FILE). Without options: the readiness probe, "
            "exit 0 while the worker takes chunks, 1 with the environment faults it met (artifact, engine, "
            "storage, disk) until every one is fixed. With --live: the liveness probe, exit 0 while its "
            f"watchdog has beaten within the last {LIVE_BEATS} heartbeats (FANYI_HEARTBEAT), 1 with the reason "
            "otherwise (hung, or not started). A Redis or storage outage fails neither: restarting would not fix it."
        ),
    )
    parser.add_argument(
        "--live", action="store_true",
        help=f"liveness: is the watchdog still beating (within {LIVE_BEATS} heartbeats)? Not whether it is healthy",
    )  # fmt: skip
    parser.add_argument(
        "--engine", metavar="ARTIFACT",
        help="build ARTIFACT's engine here with this worker's settings (FANYI_DEVICE, FANYI_PRECISION, FANYI_THREADS): "
        "exit 0 when it builds, 1 with the reason otherwise (the check an engine fault waits for)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    settings.exit_if_invalid()  # a bad FANYI_* variable: one line, exit 2 (the probe fails, saying why)
    if args.engine:
        _probe_engine(args.engine)
    if args.live:
        ok, line = alive()
        print(line)
        sys.exit(0 if ok else 1)
    current = state()
    if current.get("healthy", True):
        print("healthy")
        return
    print(f"unhealthy since {time.ctime(current.get('since', 0))}: {current.get('reason')}")
    sys.exit(1)


def _probe_engine(artifact: str) -> None:
    from worker.engine.loaded import build

    try:
        build(artifact)
    except Exception as err:  # noqa: BLE001 - anything that keeps the engine from running is the answer
        print(f"the engine of {artifact} cannot be built: {type(err).__name__}: {err}")
        sys.exit(1)
    print(f"the engine of {artifact} builds")
    sys.exit(0)


if __name__ == "__main__":
    main()
