"""Shared fixtures: small random models that carry six real models' configs and tokenizers, and the
artifacts built from them (once per run).

The weights are drawn from a seed chosen when the run starts (``FANYI_TEST_SEED`` repeats one), so
the parity tests hold for models the code has never seen, not for one lucky draw. The seed is printed
in the header and again after any failure.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest

from export_tools.fixtures.names import LIKE
from tests.services import RedisServer, S3Server, redis_answers
from tests.shared import ARTIFACT_PRECISIONS, WORKER_NUMBER, Lazy, once, run_folder

# A database of the tests' own on the machine's Redis; one per test process (pytest-xdist's -n).
SYSTEM_REDIS = f"redis://127.0.0.1:6379/{11 + (WORKER_NUMBER or 0)}"
# Drawn once: the test processes xdist starts inherit it from the environment of the one that starts them.
MODEL_SEED = int(os.environ.setdefault("FANYI_TEST_SEED", str(secrets.randbelow(2**31))))
# For the processes started from here (xdist's, the CLIs', the workers'): keep freed memory in the heap.
# Each step of ``generate`` allocates and frees tensors of the vocabulary's size (18-29 MB at 7 sentences,
# beams 4-5); glibc hands blocks that large back to the kernel at once, and every next one costs freshly
# zeroed pages: a third of the reference's time went to page faults. 32 MiB is the largest threshold glibc
# takes; the heaps then stay at their peak, which costs memory, not correctness.
HEAP = {"MALLOC_MMAP_THRESHOLD_": 32 << 20, "MALLOC_TRIM_THRESHOLD_": 16 << 30, "MALLOC_TOP_PAD_": 256 << 20}
for _name, _value in HEAP.items():
    os.environ.setdefault(_name, str(_value))
if WORKER_NUMBER is not None:  # one of several test processes: each runs torch on one thread, not on all cores
    import torch

    torch.set_num_threads(1)


def pytest_report_header() -> str:
    return f"model weights seed: {MODEL_SEED} (repeat with FANYI_TEST_SEED={MODEL_SEED})"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int) -> None:
    if exitstatus:
        terminalreporter.write_line(f"model weights seed: {MODEL_SEED} (repeat with FANYI_TEST_SEED={MODEL_SEED})")


@pytest.fixture(scope="session")
def model_seed() -> int:
    return MODEL_SEED


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory, model_seed: int) -> Mapping[str, Path]:
    """The six real-like models (``export_tools/fixtures/names.py``), keyed by the real model's name;
    each built on first use, once per run."""
    from export_tools.fixtures.like import build_like  # torch: not in the process that only hands out tests

    root = run_folder(tmp_path_factory) / "like"
    return Lazy(LIKE, lambda name: once(root / name, lambda out: build_like(name, out, seed=model_seed)))


@pytest.fixture(scope="session")
def artifacts(tiny_models: Mapping[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Mapping[str, Path]:
    """fp32 + int8 artifacts (``ARTIFACT_PRECISIONS`` adds others), each with the parity report of its build; each
    built on first use, once per run. A failed check does not stop the build here: the tests of
    tests/export_tools/test_build.py read the report and fail for the check that failed, instead of
    every test that uses an artifact erroring in this fixture."""
    from export_tools import verify
    from export_tools.build import build

    root = run_folder(tmp_path_factory) / "artifacts"

    def make(name: str) -> Path:
        precisions = ["fp32", *ARTIFACT_PRECISIONS.get(name, ["int8"])]
        calibration_set = verify.sample_sentences(24, seed=5)  # not the check set: calibrated on other text
        return once(
            root / name,
            lambda out: build(
                str(tiny_models[name]), out, precisions, verify=_reported, calibration_set=calibration_set
            ),
        )

    return Lazy(LIKE, make)


def _reported(source: object, root: Path) -> None:
    """Run every check and keep its report (``report.json``), whatever it says."""
    from export_tools import verify

    try:
        verify.run(root, source)
    except verify.VerificationError:
        pass


@pytest.fixture
def artifact_copy(artifacts: Mapping[str, Path], tmp_path: Path):
    """A private copy of an artifact that a test may damage."""

    def copy(name: str) -> Path:
        return Path(shutil.copytree(artifacts[name], tmp_path / f"{name}-copy"))

    return copy


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server on a free port, for the whole run."""
    server = S3Server().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_url():
    if redis_answers(SYSTEM_REDIS):
        yield SYSTEM_REDIS
        return
    server = RedisServer().start()
    yield server.url
    server.stop()


DEMO_PRECISIONS = ["fp32", "int8", "int8-static"]


@pytest.fixture(scope="session")
def demo_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo artifact, built through the CLI exactly as a user builds it."""
    import subprocess
    import sys

    def make(out: Path) -> None:
        command = [sys.executable, "-m", "export_tools", "demo", "--out", str(out), "--precision", *DEMO_PRECISIONS]
        result = subprocess.run(command, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-3000:]

    return once(run_folder(tmp_path_factory) / "demo", make)
