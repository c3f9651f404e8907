"""A job's translation memory on real workers, Redis and S3: the same output as without it, for less work."""

from __future__ import annotations

import json

from contract.storage import open_storage
from export_tools.fixtures.demo_corpus import repeating_documents
from tests.jobs.conftest import jobs_cli, output_rows, spec, wait

FOOTER = "The office opens at 9 am on Monday. Welcome to our store."


def test_memory_gives_the_same_output_says_how_much_it_reused_and_can_be_cleared(
    tmp_path, services, demo_artifact, workers
) -> None:
    corpus = tmp_path / "in.jsonl"
    documents = repeating_documents(seed=7, count=60, repeat=0.3, footer=FOOTER)
    corpus.write_text("".join(json.dumps(d) + "\n" for d in documents))
    workers(concurrency=2)  # two worker processes share the job's memory through Redis
    storage = open_storage(services["output"])
    runs = {}
    for name, memory in (("off", "off"), ("job", "job"), ("shared", "shared"), ("shared-again", "shared")):
        path = spec(
            tmp_path / f"{name}.json", inputs=[str(corpus)], output=services["output"], artifact=demo_artifact,
            chunk_documents=10, memory=memory,
        )  # fmt: skip
        job_id = jobs_cli("submit", str(path), env=services["env"]).stdout.strip()
        status = wait(job_id, services)
        shown = jobs_cli("status", job_id, "--output", services["output"], env=services["env"]).stdout
        assert ("translation memory:" in shown) == (memory != "off"), shown
        rows = sorted(output_rows(services["output"], job_id), key=lambda r: r["id"])
        success = json.loads(storage.read(f"{job_id}/_SUCCESS"))
        runs[name] = (rows, success["memory"], status)

    translations = {name: [(r["id"], r["translation"], r["status"], r["sentences"]) for r in rows]
                    for name, (rows, _, _) in runs.items()}  # fmt: skip
    assert translations["job"] == translations["off"] == translations["shared"] == translations["shared-again"]
    windows = runs["off"][1]["windows"]
    assert windows > 60 and [runs[n][1]["windows"] for n in runs] == [windows] * 4
    assert runs["off"][1]["reused_windows"] == 0
    # Two processes may both translate a window neither has stored yet: the counts of two runs may differ.
    assert 0 < runs["job"][1]["reused_windows"] < windows and 0 < runs["shared"][1]["reused_windows"] < windows
    assert runs["shared-again"][1] == {"windows": windows, "reused_windows": windows, "reuse_rate": 1.0}
    status = runs["job"][2]
    assert status["reused_windows"] == runs["job"][1]["reused_windows"] and status["reuse_rate"] > 0.3, status

    cleared = jobs_cli("memory", "clear", "--output", services["output"], env=services["env"])
    assert cleared.returncode == 0, cleared.stderr
    assert f"entries of {services['output']}|shared" in cleared.stdout, cleared.stdout
    assert "translation memory entries cleared" in cleared.stdout
    again = jobs_cli("memory", "clear", "--output", services["output"], env=services["env"])
    assert again.stdout.startswith("0 translation memory entries cleared")
