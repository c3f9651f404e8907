"""A job with a glossary, through Redis and a real worker: terms put into the rows, counted in the rows,
``_SUCCESS`` and ``jobs status``; a glossary that cannot be used refused at submit with nothing written."""

from __future__ import annotations

import json

from contract.storage import open_storage
from tests.jobs.conftest import jobs_cli, output_rows, spec, wait

TEXTS = {
    "chicago": "The flight from Shanghai to Chicago costs $2262.23.",
    "tom": "Tom has 68 bottles. Henry and Daniel are friends.",
    "none": "The meeting starts at 9 am.",
}


def test_a_jobs_glossary_is_in_its_rows_and_counted(tmp_path, services, demo_artifact, workers) -> None:
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in TEXTS.items()))
    (tmp_path / "terms.tsv").write_text("Chicago\t芝加哥市\nTom\t汤米\nFanyi\t\n")
    path = spec(tmp_path / "spec.json", inputs=[str(tmp_path / "in.jsonl")], output=services["output"],
                artifact=demo_artifact, glossary=str(tmp_path / "terms.tsv"))  # fmt: skip
    submitted = jobs_cli("submit", str(path), env=services["env"])
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    (tmp_path / "terms.tsv").write_text("changed after the submit: the job keeps its own copy\n")
    workers()
    status = wait(job_id, services)
    assert status["terms"] == {"applied": 2, "missed": 0, "hit_rate": 1.0}
    rows = {r["id"]: r for r in output_rows(services["output"], job_id)}
    assert "芝加哥市" in rows["chicago"]["translation"] and rows["tom"]["translation"].startswith("汤米")
    assert {i: (r["terms"], r["terms_missed"], r["status"]) for i, r in rows.items()} == {
        "chicago": (1, 0, "ok"), "tom": (1, 0, "ok"), "none": (0, 0, "ok"),
    }  # fmt: skip
    summary = json.loads(open_storage(services["output"]).read(f"{job_id}/_SUCCESS"))
    assert summary["terms"] == status["terms"]
    report = jobs_cli("status", job_id, "--output", services["output"], env=services["env"]).stdout
    assert "glossary terms: 2 put in, 0 missed (100.0%)" in report


def test_a_glossary_that_cannot_be_used_refuses_the_job(tmp_path, services, demo_artifact) -> None:
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "a", "text": "Tom"}) + "\n")
    (tmp_path / "terms.tsv").write_text("Tom\t汤米\ntom\t汤姆\n")
    path = spec(tmp_path / "spec.json", inputs=[str(tmp_path / "in.jsonl")], output=services["output"],
                artifact=demo_artifact, glossary=str(tmp_path / "terms.tsv"))  # fmt: skip
    refused = jobs_cli("submit", str(path), env=services["env"])
    assert refused.returncode == 1
    assert "terms.tsv line 2: 'tom' is already a term (line 1): keep one" in refused.stderr
    assert open_storage(services["output"]).list("") == []


def test_a_glossary_copy_altered_in_storage_is_not_used(tmp_path, services, demo_artifact, workers) -> None:
    """The worker checks the job's copy against the hash in its manifest, as it checks an artifact: an altered
    copy translates nothing and says why in every row and in ``jobs status``."""
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "tom", "text": TEXTS["tom"]}) + "\n")
    (tmp_path / "terms.tsv").write_text("Tom\t汤米\n")
    path = spec(tmp_path / "spec.json", inputs=[str(tmp_path / "in.jsonl")], output=services["output"],
                artifact=demo_artifact, glossary=str(tmp_path / "terms.tsv"))  # fmt: skip
    job_id = jobs_cli("submit", str(path), env=services["env"]).stdout.strip()
    storage = open_storage(services["output"])
    storage.put(f"{job_id}/_glossary.tsv", "Tom\t托马斯\n".encode())
    workers()
    status = wait(job_id, services, exit_code=5)  # failed: its only row is an error
    assert status["state"] == "failed"
    (row,) = output_rows(services["output"], job_id)
    assert "not the one the job was submitted with" in row["error"] and "托马斯" not in row["translation"]
