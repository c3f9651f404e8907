"""Shared fixtures: tiny random models of every architecture and artifacts built from them (once per run)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from export_tools import verify
from export_tools.build import build
from export_tools.fixtures.tiny import ARCHS, build_tiny
from tests.services import RedisServer, redis_answers

SYSTEM_REDIS = "redis://127.0.0.1:6379/11"  # a database of the tests' own on the machine's Redis


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny")
    return {arch: build_tiny(arch, root / arch) for arch in ARCHS}


@pytest.fixture(scope="session")
def artifacts(tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """fp32 + int8 artifacts (marian also fp16), each verified for parity while it was built."""
    root = tmp_path_factory.mktemp("artifacts")
    out = {}
    for arch, src in tiny_models.items():
        precisions = ["fp32", "int8", "fp16"] if arch == "marian" else ["fp32", "int8"]
        build(str(src), root / arch, precisions, verify=lambda source, tmp: verify.run(tmp, source))
        out[arch] = root / arch
    return out


@pytest.fixture
def artifact_copy(artifacts: dict[str, Path], tmp_path: Path):
    """A private copy of an artifact that a test may damage."""

    def copy(arch: str) -> Path:
        return Path(shutil.copytree(artifacts[arch], tmp_path / f"{arch}-copy"))

    return copy


@pytest.fixture(scope="session")
def redis_url():
    if redis_answers(SYSTEM_REDIS):
        yield SYSTEM_REDIS
        return
    server = RedisServer().start()
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def demo_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo artifact, built through the CLI exactly as a user builds it."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("demo") / "artifact"
    result = subprocess.run(
        [sys.executable, "-m", "export_tools", "demo", "--out", str(out)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return out
