"""One bad row is one error row, never a refused corpus; a corpus with nothing in it is a finished job."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from contract.storage import open_storage
from tests.jobs.conftest import jobs_cli, output_rows, spec, wait


def _bad_inputs(tmp_path) -> tuple[list[str], dict[str, str]]:
    """Good rows among a null text, a non-string text, a line that is not UTF-8, one that is not JSON,
    one with no id, and a Parquet row with a null text; the status each id must end with."""
    lines = [
        json.dumps({"id": "good-1", "text": "Tom has 3 apples."}).encode(),
        json.dumps({"id": "null-text", "text": None}).encode(),
        json.dumps({"id": "number-text", "text": 42}).encode(),
        b'{"id": "bad-utf8", "text": "Tom has 3 apples. \xff"}',
        b'{"id": "broken", "text": ',
        json.dumps({"text": "no id here"}).encode(),
        json.dumps({"id": "good-2", "text": "The meeting starts at 9 am."}).encode(),
    ]
    (tmp_path / "rows.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    pq.write_table(
        pa.table({"id": ["pq-good", "pq-null"], "text": ["Tom has 3 apples.", None]}), tmp_path / "t.parquet"
    )
    expected = {
        "good-1": "ok", "null-text": "error", "number-text": "error", "bad-utf8": "error",
        "rows.jsonl:5": "error", "rows.jsonl:6": "error", "good-2": "ok", "pq-good": "ok", "pq-null": "error",
    }  # fmt: skip
    return [str(tmp_path / "rows.jsonl"), str(tmp_path / "t.parquet")], expected


def test_bad_rows_become_error_rows_and_the_job_runs(tmp_path, services, demo_artifact, workers) -> None:
    inputs, expected = _bad_inputs(tmp_path)
    path = spec(tmp_path / "spec.json", inputs=inputs, output=services["output"], artifact=demo_artifact)
    submitted = jobs_cli("submit", str(path), env=services["env"])
    assert submitted.returncode == 0, submitted.stderr
    assert "6 bad rows kept as error rows" in submitted.stderr
    job_id = submitted.stdout.strip()
    workers()
    status = wait(job_id, services, exit_code=4)  # completed with errors: the bad rows
    assert (status["state"], status["documents"], status["done"], status["errors"]) == (
        "completed_with_errors",
        9,
        9,
        6,
    )
    rows = {r["id"]: r for r in output_rows(services["output"], job_id)}
    assert {i: r["status"] for i, r in rows.items()} == expected
    assert rows["bad-utf8"]["error"] == "rows.jsonl line 4 is not UTF-8: re-encode the file"
    assert "'text' is int, not text" in rows["number-text"]["error"]
    assert "not JSON" in rows["rows.jsonl:5"]["error"] and "no column 'id'" in rows["rows.jsonl:6"]["error"]
    assert rows["good-2"]["translation"] == "会议上午9点开始。"
    summary = json.loads(open_storage(services["output"]).read(f"{job_id}/_SUCCESS"))
    assert summary["statuses"] == {"ok": 3, "partial": 0, "error": 6, "skipped": 0}
    assert summary["sentences"] == 3 and summary["sentence_flags"] == {}


def test_refuse_mode_refuses_the_job_naming_the_row(tmp_path, services, demo_artifact) -> None:
    inputs, _ = _bad_inputs(tmp_path)
    path = spec(tmp_path / "spec.json", inputs=inputs, output=services["output"], artifact=demo_artifact,
                on_bad_row="refuse")  # fmt: skip
    result = jobs_cli("submit", str(path), env=services["env"])
    assert result.returncode == 1 and "rows.jsonl line 2: 'text' is null, not text" in result.stderr
    assert open_storage(services["output"]).list("") == []


def test_an_empty_input_is_a_finished_job_of_no_documents(tmp_path, services, demo_artifact) -> None:
    (tmp_path / "empty.jsonl").write_text("\n")
    path = spec(tmp_path / "spec.json", inputs=[str(tmp_path / "empty.jsonl")], output=services["output"],
                artifact=demo_artifact)  # fmt: skip
    submitted = jobs_cli("submit", str(path), "--wait", env=services["env"])
    assert submitted.returncode == 0, submitted.stderr
    assert "no documents in" in submitted.stderr and "empty.jsonl" in submitted.stderr
    job_id = submitted.stdout.splitlines()[0].strip()
    summary = json.loads(open_storage(services["output"]).read(f"{job_id}/_SUCCESS"))
    assert summary["documents"] == 0 and output_rows(services["output"], job_id) == []


def test_a_structural_problem_still_refuses_the_job(tmp_path, services, demo_artifact) -> None:
    (tmp_path / "other.jsonl").write_text(json.dumps({"doc": "a", "body": "Tom has 3 apples."}) + "\n")
    path = spec(tmp_path / "spec.json", inputs=[str(tmp_path / "other.jsonl")], output=services["output"],
                artifact=demo_artifact)  # fmt: skip
    result = jobs_cli("submit", str(path), env=services["env"])
    assert result.returncode == 1 and "no row has both 'id' and 'text'" in result.stderr
