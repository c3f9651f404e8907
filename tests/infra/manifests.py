"""What the infra tests share: the repository's manifests as kubectl renders them, and our commands."""

from __future__ import annotations

import copy
import functools
import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from contract import settings

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "infra" / "k8s"


def settings_the_code_reads() -> set[str]:
    names: set[str] = set()
    for path in [*ROOT.glob("contract/**/*.py"), *ROOT.glob("worker/**/*.py"), *ROOT.glob("jobs/**/*.py")]:
        names |= set(re.findall(r"\bFANYI_[A-Z0-9_]+\b", path.read_text()))
    return names


def check_command(command: list[str]) -> None:
    """A container command is one of our CLIs, spelled as the code defines it."""
    if command[0] == "celery":
        assert command[1:3] == ["-A", "worker.app"] and command[3] in ("worker", "beat"), command
        if command[3] == "worker":
            assert command[command.index("-Q") + 1] in settings.QUEUES
        else:
            scheduler = command[command.index("-S") + 1]
            module, _, name = scheduler.rpartition(".")
            assert hasattr(importlib.import_module(module), name), scheduler
    elif command[:2] == ["python", "-m"]:
        assert importlib.util.find_spec(command[2]) is not None, command
    else:
        raise AssertionError(f"unexpected command {command}")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


@functools.cache
def _rendered(overlay: str) -> tuple[dict, ...]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        if in_ci():
            pytest.fail("kubectl is missing: CI must render the overlays (kubectl kustomize)")
        pytest.skip("kubectl is not installed, so the overlays cannot be rendered (under CI this fails)")
    done = subprocess.run(
        [kubectl, "kustomize", str(K8S / "overlays" / overlay)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"kubectl kustomize overlays/{overlay} failed:\n{done.stderr}"
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


def rendered(overlay: str) -> list[dict]:
    """Every object of ``infra/k8s/overlays/<overlay>`` as ``kubectl kustomize`` renders it (copies)."""
    return copy.deepcopy(list(_rendered(overlay)))


def by_kind(overlay: str, kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in rendered(overlay) if o["kind"] == kind}


def scaled_objects(overlay: str) -> dict[str, dict]:
    """The rendered ScaledObjects of ``overlay`` ("dev", "prod") by name."""
    return by_kind(overlay, "ScaledObject")


def value_at(payload: Any, path: str) -> Any:
    """``path`` (a metrics-api ``valueLocation``, GJSON syntax) applied to ``payload``: keys separated by
    dots, ``\\.`` a dot inside a key, digits an array index. GJSON's wildcards, queries and modifiers
    are refused rather than guessed."""
    keys, key, escaped = [], "", False
    for char in path:
        if escaped:
            key, escaped = key + char, False
        elif char == "\\":
            escaped = True
        elif char == ".":
            keys, key = [*keys, key], ""
        elif char in "*?#|@":
            raise ValueError(f"GJSON feature {char!r} in {path!r} is not supported here")
        else:
            key += char
    for part in [*keys, key]:
        payload = payload[int(part)] if isinstance(payload, list) else payload[part]
    return payload
