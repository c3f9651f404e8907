"""A bad ``FANYI_*`` setting is one line naming the variable, its value (never a password) and what it
accepts, with exit status 2, from every entry point: never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.services import ROOT

ENTRY_POINTS = {
    "jobs": [sys.executable, "-m", "jobs", "list", "--output", "/nonexistent"],
    "worker cli": [sys.executable, "-m", "worker", "translate", "--artifact", "/nonexistent"],
    "celery worker": [sys.executable, "-m", "celery", "-A", "worker.app", "worker", "-Q", "translate.cpu"],
    "beat": [sys.executable, "-m", "celery", "-A", "worker.app", "beat", "-S", "jobs.schedules.SpecScheduler"],
    "exporter": [sys.executable, "-m", "worker.exporter", "--port", "0"],
    "health": [sys.executable, "-m", "worker.health"],
    "liveness": [sys.executable, "-m", "worker.health", "--live"],
}
BAD = {
    "FANYI_THREADS=two": ({"FANYI_THREADS": "two"}, ["FANYI_THREADS='two'", "whole number"]),
    "visibility": ({"FANYI_VISIBILITY_TIMEOUT": "600"}, ["FANYI_VISIBILITY_TIMEOUT", "1200 < 600"]),
    "broker": ({"FANYI_BROKER_URL": "http://:hunter2@redis:6379/0"}, ["FANYI_BROKER_URL", "redis://"]),
}


@pytest.mark.parametrize("bad", BAD, ids=str)
@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=str)
def test_a_bad_setting_is_one_line_naming_it(entry: str, bad: str, tmp_path) -> None:
    variables, said = BAD[bad]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FANYI_")}
    env |= {"PYTHONPATH": str(ROOT), "FANYI_HEALTH_FILE": str(tmp_path / "health.json"), **variables}
    done = subprocess.run(ENTRY_POINTS[entry], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert all(words in done.stderr for words in said), done.stderr
    assert "hunter2" not in done.stderr + done.stdout


def test_the_readers_refuse_what_the_setting_cannot_use(monkeypatch) -> None:
    from contract import settings

    for value in ("two", "-1", "0", "1.5", ""):
        monkeypatch.setenv("FANYI_X", value)
        monkeypatch.setattr(settings, "PROBLEMS", [])
        assert settings._integer("FANYI_X", "3", 1) == 3 and settings.PROBLEMS, value
    for value in ("nan", "inf", "-2", "0", "x"):
        monkeypatch.setenv("FANYI_X", value)
        monkeypatch.setattr(settings, "PROBLEMS", [])
        assert settings._number("FANYI_X", "5") == 5.0 and settings.PROBLEMS, value
    monkeypatch.setenv("FANYI_X", " 7 ")
    monkeypatch.setattr(settings, "PROBLEMS", [])
    assert settings._integer("FANYI_X", "3", 1) == 7 and settings._number("FANYI_X", "1") == 7.0
    assert not settings.PROBLEMS
    monkeypatch.setenv("FANYI_X", "tpu")
    assert settings._choice("FANYI_X", "cpu", ("cpu", "cuda")) == "cpu"
    assert settings.PROBLEMS == ["FANYI_X='tpu' is not valid: expected cpu or cuda"]
    with pytest.raises(settings.SettingError, match="FANYI_X='tpu'"):
        settings.check()


def test_the_demo_says_a_bad_setting_in_one_line_and_starts_nothing(tmp_path, demo_artifact) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FANYI_")}
    env |= {"PYTHONPATH": str(ROOT), "FANYI_VISIBILITY_TIMEOUT": "600"}
    command = [sys.executable, "-m", "jobs", "demo", "--artifact", str(demo_artifact), "--output", str(tmp_path)]
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "FANYI_VISIBILITY_TIMEOUT" in done.stderr
    assert "redis:" not in done.stdout  # checked before its Redis and worker start: nothing left running


def test_settings_that_may_be_zero_are_and_a_metrics_folder_that_is_named_is_made(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FANYI_", "PROMETHEUS_"))}
    env |= {"PYTHONPATH": str(ROOT), "FANYI_RETRY_MAX_DELAY": "0", "FANYI_JOB_METRICS_RETENTION": "0"}
    env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path / "not-made-yet" / "prometheus")  # as the images name it
    code = "import worker.runtime.app; from contract import settings; print(settings.RETRY_MAX_DELAY)"
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "0.0", done.stderr[-2000:]
    assert (tmp_path / "not-made-yet" / "prometheus").is_dir()
