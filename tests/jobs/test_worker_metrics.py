"""A worker's own ``/metrics`` where flower is installed (as the README's Flower section asks): Celery's
command line loads flower's plugin, which imports prometheus_client before ``worker.monitoring.metrics`` can choose
the multiprocess storage, so ``PROMETHEUS_MULTIPROC_DIR`` must be in the environment before the worker
starts (the images and manifests set it); a worker started without it says so in one line."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import urllib.request

from tests.jobs.conftest import metric, submit, wait
from tests.services import ROOT, free_port
from worker.engine.sessions import cpu_class


def test_flower_is_installed_so_these_tests_meet_its_plugin() -> None:
    assert importlib.util.find_spec("flower") is not None, "pip install -e '.[dev]' installs flower"


def test_a_worker_with_flower_installed_counts_what_it_translated(tmp_path, services, demo_artifact, workers):
    port = free_port()
    folder = tmp_path / "prometheus"  # as the images and manifests set it: before the process starts
    workers(FANYI_METRICS_PORT=str(port), PROMETHEUS_MULTIPROC_DIR=str(folder))
    job_id = submit(tmp_path, services, demo_artifact, 30)
    assert wait(job_id, services)["state"] == "succeeded"
    scraped = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert metric(scraped, 'fanyi_documents_translated_total{status="ok"}') == 30
    assert metric(scraped, "fanyi_task_duration_seconds_count") >= 2
    # The precision the worker chose by itself (the demo artifact holds int8 and int8-static), and on what CPU.
    assert metric(scraped, f'fanyi_engines_built_total{{cpu="{cpu_class()}",precision="int8"}}') >= 1
    assert list(folder.glob("*.db"))


def test_a_worker_serving_metrics_without_the_folder_set_first_stops_in_one_line(tmp_path, services) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **services["env"], "FANYI_METRICS_PORT": str(free_port())}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env["FANYI_HEALTH_FILE"] = str(tmp_path / "health.json")
    done = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "worker.app", "worker", "-Q", "translate.cpu", "--without-mingle"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "PROMETHEUS_MULTIPROC_DIR" in errors[0] and "FANYI_METRICS_PORT" in errors[0]
