"""The queue exporter: depth per queue and priority list, unacknowledged messages, workers, job progress."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request

from tests.jobs.conftest import corpus, jobs_cli, spec
from tests.jobs.test_reliability import metric, wait
from tests.services import ROOT, free_port, wait_for


def scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def test_queue_depth_per_priority_then_progress_once_workers_run(tmp_path, services, demo_artifact, workers) -> None:
    port = free_port()
    exporter = subprocess.Popen(
        [sys.executable, "-m", "worker.exporter", "--port", str(port)],
        env={**os.environ, "PYTHONPATH": str(ROOT), **services["env"]},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        path = spec(
            tmp_path / "spec.json", inputs=[str(corpus(tmp_path / "in.jsonl", 60))], output=services["output"],
            artifact=demo_artifact, priority=3,
        )  # fmt: skip
        job_id = jobs_cli("submit", str(path), env=services["env"]).stdout.strip()
        text = wait_for(lambda: _scrape_or_none(port), 30, "the exporter")
        assert metric(text, 'fanyi_queue_depth{priority="3",queue="translate.cpu"}') == 3
        assert metric(text, 'fanyi_queue_depth{priority="0",queue="translate.cpu"}') == 0
        assert metric(text, "fanyi_workers_up") == 0
        workers()
        wait(job_id, services)
        text = scrape(port)
        assert metric(text, f'fanyi_job_documents_done{{job="{job_id}"}}') == 60
        assert metric(text, 'fanyi_queue_depth{priority="3",queue="translate.cpu"}') == 0
        assert metric(text, "fanyi_workers_up") == 1
        import redis

        redis.Redis.from_url(services["redis"]).flushdb()  # the cache loses every counter ...
        text = scrape(port)  # ... and the exporter counts them again from storage
        assert metric(text, f'fanyi_job_documents_done{{job="{job_id}"}}') == 60
        assert metric(text, f'fanyi_job_documents{{job="{job_id}"}}') == 60
    finally:
        exporter.kill()


def _scrape_or_none(port: int) -> str | None:
    try:
        return scrape(port)
    except OSError:
        return None
