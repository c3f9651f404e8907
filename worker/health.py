"""This worker's health: whether it may take chunks, and if not, why and how it will know it is fixed.

A worker that hits an environment fault (``worker.faults``) writes it to ``FANYI_HEALTH_FILE`` with
the check that would show it fixed (load this artifact, list this storage, write to this folder),
and stops consuming its queues; the watchdog (``worker.watchdog``) runs the check every heartbeat
and, once it passes, marks the worker healthy and consumes again. A readiness probe runs

    python -m worker.health        # exit 0 when healthy, 1 with the reason otherwise
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from worker import settings


def _path() -> Path:
    return Path(settings.HEALTH_FILE)


def state() -> dict[str, Any]:
    """``{"healthy": True}``, or the fault: ``reason``, ``check``, ``queues``, ``since``."""
    try:
        return dict(json.loads(_path().read_text()))
    except (OSError, ValueError):
        return {"healthy": True}


def mark_unhealthy(reason: str, check: dict[str, str], queues: list[str]) -> None:
    current = state()
    queues = sorted(set(queues) | set(current.get("queues", [])))
    _write({"healthy": False, "reason": reason, "check": check, "queues": queues, "since": time.time()})


def mark_healthy() -> None:
    _write({"healthy": True})


def _write(data: dict[str, Any]) -> None:
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".health-")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def check_for(err: BaseException, output: str) -> dict[str, str]:
    """The check that shows the fault behind ``err`` fixed."""
    from worker.faults import EnvironmentFault

    if isinstance(err, EnvironmentFault):
        return err.check
    if isinstance(err, OSError) and getattr(err, "filename", None):
        return {"kind": "disk", "target": str(Path(str(err.filename)).parent)}
    return {"kind": "storage", "target": output or ""}


def passes(check: dict[str, str]) -> bool:
    """Run a recorded check: is the fault fixed?"""
    kind, target = check.get("kind"), check.get("target", "")
    try:
        if kind == "artifact":
            from worker.artifact import Artifact

            Artifact.load(target)
        elif kind == "disk":
            with tempfile.NamedTemporaryFile(dir=target):
                pass
        elif kind == "storage":
            from worker.storage import open_storage

            open_storage(target).list("_health-probe/")
        else:
            return False
    except Exception:  # noqa: BLE001 - any failure means "not fixed yet"
        return False
    return True


def main() -> None:
    current = state()
    if current.get("healthy", True):
        print("healthy")
        return
    print(f"unhealthy since {time.ctime(current.get('since', 0))}: {current.get('reason')}")
    sys.exit(1)


if __name__ == "__main__":
    main()
