"""docker/ checked statically (Docker does not run here): files exist, commands and settings match the code."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

from jobs.spec import load_spec
from worker import settings

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DOCKERFILES = sorted(DOCKER.glob("*.Dockerfile"))
COMPOSE = yaml.safe_load((DOCKER / "compose.yaml").read_text())


def settings_the_code_reads() -> set[str]:
    names: set[str] = set()
    for path in [*ROOT.glob("worker/**/*.py"), *ROOT.glob("jobs/**/*.py")]:
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


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfiles_pin_their_bases_run_as_a_user_and_copy_files_that_exist(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    for base in re.findall(r"^FROM (\S+)", text, re.M):
        assert base in ("base", "build") or re.search(r":\d[\w.-]*$", base), f"{base} is not pinned"
    assert re.search(r"^USER (?!root)\S+", text, re.M)
    for sources in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
        for source in sources.split():
            assert (ROOT / source).exists(), f"{dockerfile.name} copies {source}, which does not exist"
    entrypoint = [yaml.safe_load(e) for e in re.findall(r"^ENTRYPOINT (\[.*\])$", text, re.M)]
    for line in re.findall(r"^CMD (\[.*\])$", text, re.M):
        check_command([*(entrypoint[0] if entrypoint else []), *yaml.safe_load(line)])


def test_compose_has_every_service_the_system_needs() -> None:
    expected = {
        "redis",
        "minio",
        "minio-init",
        "artifact",
        "worker-cpu",
        "worker-gpu",
        "beat",
        "flower",
        "prometheus",
        "grafana",
    }
    assert expected <= set(COMPOSE["services"])
    assert COMPOSE["services"]["worker-gpu"]["profiles"] == ["gpu"]


def test_compose_files_commands_and_settings_match_the_repository() -> None:
    known = settings_the_code_reads()
    for name, service in COMPOSE["services"].items():
        build = service.get("build")
        if build:
            assert (DOCKER / build["context"] / build["dockerfile"]).exists(), name
            if name != "artifact":
                check_command(service["command"])
        for volume in service.get("volumes", []):
            host = volume.split(":")[0]
            if host.startswith("."):
                assert (DOCKER / host).exists(), f"{name} mounts {host}, which does not exist"
        env = service.get("environment") or {}
        assert {k for k in env if k.startswith("FANYI_")} <= known, name
    for key in COMPOSE["x-fanyi-env"]:
        assert not key.startswith("FANYI_") or key in known, key


def test_the_compose_job_spec_is_valid() -> None:
    spec = load_spec(ROOT / "examples" / "compose-job.yaml")
    assert spec.output.startswith("s3://fanyi/") and spec.inputs == ["/examples/corpus.jsonl"]
