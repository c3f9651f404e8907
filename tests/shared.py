"""What the test processes of one run share: pytest-xdist starts several (``-n``), each with its own
fixtures. A model, an artifact or the demo is built once per run by whichever process asks first,
under a file lock in the run's temporary folder; the others wait for it and read the same files."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

import pytest
from filelock import FileLock

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1"... under pytest-xdist; "" without it
WORKER_NUMBER = int(WORKER[2:]) if WORKER else None
T = TypeVar("T")
# What the test artifacts hold beside fp32 (``artifacts`` in conftest.py): int8 unless named here.
ARTIFACT_PRECISIONS = {"opus-mt-en-zh": ["int8", "int8-static", "fp16"], "t5-small": ["int8", "int8-static"]}


def run_folder(factory: pytest.TempPathFactory) -> Path:
    """The run's temporary folder, which every test process sees (xdist gives each one a folder below it)."""
    base = factory.getbasetemp()
    return base.parent if WORKER else base


def once(path: Path, make: Callable[[Path], object]) -> Path:
    """``make(path)`` the first time any test process of the run asks for ``path``; later askers wait and
    get the same path. A ``make`` that raised is tried again by the next asker."""
    done = path.with_name(path.name + ".done")
    with FileLock(f"{path}.lock"):
        if not done.exists():
            make(path)
            done.touch()
    return path


class Lazy(Mapping[str, T]):
    """A mapping over fixed keys whose values are made on first use: a test of one model pays for that
    model only."""

    def __init__(self, keys: tuple[str, ...], make: Callable[[str], T]):
        self._keys, self._make, self._made = keys, make, dict[str, T]()

    def __getitem__(self, key: str) -> T:
        if key not in self._keys:
            raise KeyError(key)
        if key not in self._made:
            self._made[key] = self._make(key)
        return self._made[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)
