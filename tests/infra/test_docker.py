"""docker/ checked statically (Docker does not run here): files exist, commands and settings match the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from jobs.spec import load_spec
from tests.infra.manifests import check_command, settings_the_code_reads

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DOCKERFILES = sorted(DOCKER.glob("*.Dockerfile"))
COMPOSE = yaml.safe_load((DOCKER / "compose.yaml").read_text())


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfiles_pin_their_bases_run_as_a_user_and_copy_files_that_exist(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    named = set(re.findall(r"^FROM \S+ AS (\S+)", text, re.M))  # an earlier stage
    for base in re.findall(r"^FROM (\S+)", text, re.M):
        assert base in named or re.search(r":\d[\w.-]*$", base), f"{base} is not pinned"
    assert re.search(r"^USER (?!root)\S+", text, re.M)
    for sources in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
        for source in sources.split():
            assert (ROOT / source).exists(), f"{dockerfile.name} copies {source}, which does not exist"
    entrypoint = [yaml.safe_load(e) for e in re.findall(r"^ENTRYPOINT (\[.*\])$", text, re.M)]
    for line in re.findall(r"^CMD (\[.*\])$", text, re.M):
        check_command([*(entrypoint[0] if entrypoint else []), *yaml.safe_load(line)])


def test_worker_images_set_the_metrics_folder_before_the_process_starts() -> None:
    """prometheus_client reads PROMETHEUS_MULTIPROC_DIR at its first import, which Celery's command line
    may do before worker.monitoring.metrics runs (flower's plugin): the image's environment carries it."""
    for name in ("worker-cpu.Dockerfile", "worker-gpu.Dockerfile"):
        text = (DOCKER / name).read_text()
        stage = text[text.index("FROM runtime AS worker") :] if "AS worker" in text else text
        assert re.search(r"PROMETHEUS_MULTIPROC_DIR=/tmp/\S+", stage), name


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


# --- issue 13: healthchecks, /artifacts, the torch index, process counts, layer order ---------------------------

WORKER_DOCKERFILES = [DOCKER / "worker-cpu.Dockerfile", DOCKER / "worker-gpu.Dockerfile"]
SOURCES = ("worker", "contract", "jobs", "export_tools")
REGISTRY_URL = re.compile(r"https?://[^\s/\"']*(pypi|pytorch\.org|pythonhosted)", re.I)


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line.strip() else "")
        for line in (raw.strip() for raw in text.splitlines())
        if line and not line.startswith("#")
    ]


def stages(dockerfile: Path) -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for instruction in instructions(dockerfile):
        if instruction[0] == "FROM":
            result.append([])
        result[-1].append(instruction)
    return result


def lineage(dockerfile: Path, target: str | None = None) -> list[tuple[str, str]]:
    """The instructions that make the image of stage ``target`` (the last stage: the default build), from
    the first stage of its ``FROM`` chain down; an instruction's ``COPY --from`` stage is not followed."""
    by_name = {}
    for stage in stages(dockerfile):
        by_name[stage[0][1].split()[-1] if " AS " in stage[0][1].upper() else str(len(by_name))] = stage
    stage = by_name[target] if target else stages(dockerfile)[-1]
    parent = stage[0][1].split()[0]
    return [*(lineage(dockerfile, parent) if parent in by_name else []), *stage]


def copied_sources(dockerfile: Path, target: str | None = None) -> set[str]:
    """The repository folders the image of ``target`` is built from, through the stages it copies from."""
    found: set[str] = set()
    for op, args in lineage(dockerfile, target):
        if op == "COPY" and args.startswith("--from="):
            found |= copied_sources(dockerfile, args.split()[0].removeprefix("--from="))
        elif op == "COPY":
            found |= {source.rstrip("/") for source in args.split()[:-1]}
    return found


def test_the_worker_images_carry_no_producer_code_and_the_producer_image_does() -> None:
    for dockerfile in WORKER_DOCKERFILES:
        assert {"worker", "contract"} <= copied_sources(dockerfile) and "jobs" not in copied_sources(dockerfile)
    producer = copied_sources(DOCKER / "worker-cpu.Dockerfile", "producer")
    assert {"worker", "contract", "jobs"} <= producer
    for name in ("beat", "submit"):
        assert COMPOSE["services"][name]["build"].get("target") == "producer", name


def dependency_install(dockerfile: Path) -> str:
    """The RUN that writes requirements.txt from pyproject.toml and installs it."""
    runs = [args for op, args in instructions(dockerfile) if op == "RUN" and "-r requirements.txt" in args]
    assert runs, f"{dockerfile.name} installs no requirements.txt"
    return runs[0]


def check_healthcheck(test: list[str], service: dict) -> None:
    assert test[0] == "CMD", test
    if test[1:3] == ["python", "-c"]:  # an HTTP probe of the service's own port
        compile(test[3], "healthcheck", "exec")
        assert "urllib.request" in test[3], test
        command = service["command"]
        port = command[command.index("--port") + 1]
        assert re.search(rf"http://(127\.0\.0\.1|localhost):{port}/healthz\b", test[3]), (test, port)
    else:
        check_command(test[1:])


@pytest.mark.parametrize("name", ["worker-cpu", "worker-gpu", "exporter"])
def test_long_running_services_have_healthchecks_that_run_our_commands(name: str) -> None:
    service = COMPOSE["services"][name]
    healthcheck = service.get("healthcheck")
    assert healthcheck and not healthcheck.get("disable"), f"{name} has no healthcheck"
    check_healthcheck(healthcheck["test"], service)
    if name.startswith("worker-"):
        assert healthcheck["test"][1:] == ["python", "-m", "worker.health"], "a readiness check, not --live"


def test_the_exporter_serves_the_path_its_healthcheck_asks_for() -> None:
    exporter = (ROOT / "worker" / "monitoring" / "exporter.py").read_text()
    assert re.search(r"[\"']/healthz[\"']", exporter), "exporter has no /healthz"


@pytest.mark.parametrize("dockerfile", WORKER_DOCKERFILES, ids=lambda p: p.name)
def test_worker_images_check_their_health_with_our_command(dockerfile: Path) -> None:
    found = re.findall(r"^HEALTHCHECK .*\bCMD (\[.*\])$", dockerfile.read_text(), re.M)
    assert len(found) == 1, f"{dockerfile.name}: one HEALTHCHECK, exec form"
    command = yaml.safe_load(found[0])
    check_command(command)
    assert command == ["python", "-m", "worker.health"]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_images_create_artifacts_owned_by_their_user_before_switching_to_it(dockerfile: Path) -> None:
    final = lineage(dockerfile)
    users = [i for i, (op, _) in enumerate(final) if op == "USER"]
    assert users, dockerfile.name
    user = final[users[0]][1].split(":")[0]
    before = [args for op, args in final[: users[0]] if op == "RUN"]
    owned = re.compile(
        rf"install -d (-\S+ \S+ )*-o {user}\b.* /artifacts\b"
        rf"|mkdir (-p )?/artifacts\b.*chown (-R )?{user}(:{user})? /artifacts\b"
    )
    assert any(owned.search(run) for run in before), f"{dockerfile.name} does not give /artifacts to {user}"
    assert not [op for op, args in final if op == "VOLUME" and "/artifacts" in args], "a VOLUME here drops the chown"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dependencies_are_installed_before_the_sources_are_copied(dockerfile: Path) -> None:
    for stage in stages(dockerfile):
        copies = [i for i, (op, args) in enumerate(stage) if op == "COPY" and not args.startswith("--from")]
        sources = [i for i in copies if set(stage[i][1].split()[:-1]) & set(SOURCES)]
        if not sources:
            continue
        installs = [i for i, (op, args) in enumerate(stage) if op == "RUN" and "pip install" in args]
        assert installs and installs[0] < sources[0], f"{dockerfile.name}: sources copied before the dependencies"
        first = stage[installs[0]][1]
        assert "-r requirements.txt" in first and "tomllib" in first, first
        for i in copies:
            if i < installs[0]:
                assert stage[i][1].split()[:-1] == ["pyproject.toml"], f"the dependency layer depends on {stage[i]}"
        for i in installs:
            if i > sources[0]:
                assert "--no-deps" in stage[i][1], f"{dockerfile.name} resolves dependencies again: {stage[i]}"
        return
    raise AssertionError(f"{dockerfile.name} copies none of {SOURCES}")


@pytest.mark.parametrize(
    ("dockerfile", "extra", "replaced"),
    [
        ("worker-cpu.Dockerfile", None, None),
        ("worker-gpu.Dockerfile", "gpu", "onnxruntime"),
        ("export.Dockerfile", "export", None),
    ],
)
def test_the_dependency_layer_installs_what_pyproject_declares(
    dockerfile: str, extra: str | None, replaced: str | None, tmp_path: Path
) -> None:
    import shlex
    import subprocess
    import sys
    import tomllib

    run = dependency_install(DOCKER / dockerfile)
    words = shlex.split(run)
    code = words[words.index("-c") + 1]
    (tmp_path / "pyproject.toml").write_bytes((ROOT / "pyproject.toml").read_bytes())
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    expected = [d for d in project["dependencies"] if re.split(r"[^\w.-]", d)[0] != replaced]
    expected += project["optional-dependencies"][extra] if extra else []
    assert out.stdout.split() == expected


def test_the_artifact_build_passes_the_torch_index_and_refuses_the_cuda_wheel_without_it() -> None:
    import subprocess

    args = COMPOSE["services"]["artifact"]["build"].get("args") or {}
    assert args.get("TORCH_INDEX_URL") == "${TORCH_INDEX_URL:-}", args
    steps = instructions(DOCKER / "export.Dockerfile")
    declared = {args.split("=")[0] for op, args in steps if op == "ARG"}
    assert {"TORCH_INDEX_URL", "ALLOW_CUDA_TORCH"} <= declared
    torch = [a for op, a in steps if op == "RUN" and "pip install" in a and "torch" in a]
    assert torch and '--index-url "$TORCH_INDEX_URL"' in torch[0], "torch is not installed from TORCH_INDEX_URL"
    guards = [a for op, a in steps if op == "RUN" and "ALLOW_CUDA_TORCH" in a and "pip install" not in a]
    assert len(guards) == 1 and steps.index(("RUN", guards[0])) < steps.index(("RUN", torch[0]))

    def build(**env: str) -> subprocess.CompletedProcess[str]:
        environment = {"PATH": "/usr/bin:/bin", "TORCH_INDEX_URL": "", "ALLOW_CUDA_TORCH": "", **env}
        return subprocess.run(["sh", "-c", guards[0]], env=environment, capture_output=True, text=True)

    refused = build()
    assert refused.returncode != 0
    assert "TORCH_INDEX_URL" in refused.stderr and "ALLOW_CUDA_TORCH=1" in refused.stderr
    assert "PyTorch's CPU wheel index" in refused.stderr and "install page" in refused.stderr
    assert build(TORCH_INDEX_URL="http://index.example/cpu").returncode == 0
    assert build(ALLOW_CUDA_TORCH="1").returncode == 0
    assert build(ALLOW_CUDA_TORCH="0").returncode != 0
    header = (DOCKER / "compose.yaml").read_text().split("\nname:")[0]
    assert "TORCH_INDEX_URL" in header and "ALLOW_CUDA_TORCH=1" in header


def concurrency(command: list[str]) -> int | None:
    for i, word in enumerate(command):
        if word in ("--concurrency", "-c"):
            return int(command[i + 1])
        if word.startswith("--concurrency="):
            return int(word.split("=", 1)[1])
    return None


def test_no_worker_command_hard_codes_more_than_one_process() -> None:
    commands = {f"compose {name}": s["command"] for name, s in COMPOSE["services"].items() if "command" in s}
    for dockerfile in DOCKERFILES:
        for line in re.findall(r"^CMD (\[.*\])$", dockerfile.read_text(), re.M):
            commands[dockerfile.name] = yaml.safe_load(line)
    workers = {where: c for where, c in commands.items() if c[:4] == ["celery", "-A", "worker.app", "worker"]}
    assert len(workers) == 4, workers  # worker-cpu and worker-gpu, in compose and in their images
    for where, command in workers.items():
        processes = concurrency(command)
        assert processes is None or processes <= 1, f"{where} hard-codes {processes} processes"
    assert concurrency(commands["worker-cpu.Dockerfile"]) is None, "the CPU image sizes itself to the container"
    # the GPU worker runs one process, set once: FANYI_CONCURRENCY=1 in its image and in compose
    assert re.search(r"^\s*FANYI_CONCURRENCY=1\b", (DOCKER / "worker-gpu.Dockerfile").read_text(), re.M)
    assert COMPOSE["services"]["worker-gpu"]["environment"]["FANYI_CONCURRENCY"] == "1"
    assert int(COMPOSE["services"]["worker-cpu"]["environment"]["FANYI_CONCURRENCY"]) >= 1


def test_beat_schedules_nothing_by_default() -> None:
    beat = COMPOSE["services"]["beat"]
    assert "FANYI_SCHEDULES" not in (beat.get("environment") or {})
    assert "FANYI_SCHEDULES" not in COMPOSE["x-fanyi-env"]


def test_no_file_for_docker_names_a_package_registry() -> None:
    files = [p for p in DOCKER.rglob("*") if p.is_file()] + [ROOT / ".dockerignore"]
    assert len(files) >= 7
    for path in files:
        found = REGISTRY_URL.search(path.read_text())
        assert not found, f"{path.relative_to(ROOT)} names a package registry: {found.group(0)}"


def test_the_build_context_keeps_what_the_images_copy() -> None:
    patterns = [p for p in (ROOT / ".dockerignore").read_text().splitlines() if p and not p.startswith("#")]
    assert patterns[0] == "*"
    kept = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    for dockerfile in DOCKERFILES:
        for sources in re.findall(r"^COPY (?!--from)(.+) \S+$", dockerfile.read_text(), re.M):
            for source in sources.split():
                assert source.rstrip("/") in kept, f"{dockerfile.name} copies {source}, which .dockerignore drops"
