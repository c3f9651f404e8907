"""A bad job spec is refused before anything is enqueued or written, with a message that says what to do."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from contract.job import check_job_id, input_key, read_job
from contract.storage import LocalStorage, StorageError, check_key, open_storage
from tests.jobs.conftest import corpus, jobs_cli, queued, spec
from tests.services import RedisServer


def refused(tmp_path, services, demo_artifact, expected: str, **overrides) -> None:
    settings = {"inputs": [str(corpus(tmp_path / "in.jsonl", 5))], "output": services["output"], **overrides}
    path = spec(tmp_path / "spec.json", artifact=demo_artifact, **settings)
    result = jobs_cli("submit", str(path), env=services["env"])
    assert result.returncode == 1 and expected in result.stderr, result.stderr
    assert result.stdout == ""  # no job id: `JOB=$(python -m jobs submit ...)` must not name a job that is not
    assert queued(services["redis"]) == 0  # nothing enqueued
    assert open_storage(services["output"]).list("") == []  # nothing written


def test_unknown_spec_keys_are_refused(tmp_path, services, demo_artifact) -> None:
    refused(tmp_path, services, demo_artifact, "Additional properties are not allowed ('chunk_size'", chunk_size=3)


def test_missing_columns_are_named_with_the_columns_found(tmp_path, services, demo_artifact) -> None:
    table = pa.table({"doc": ["a"], "body": ["Tom has 3 apples."]})
    pq.write_table(table, tmp_path / "in.parquet")
    refused(
        tmp_path, services, demo_artifact, "no column 'id' (has ['doc', 'body'])", inputs=[str(tmp_path / "in.parquet")]
    )


def test_duplicate_ids_across_files_are_refused(tmp_path, services, demo_artifact) -> None:
    a, b = corpus(tmp_path / "a.jsonl", 3), corpus(tmp_path / "b.jsonl", 3)
    refused(tmp_path, services, demo_artifact, "duplicate id 'doc-00000' in", inputs=[str(a), str(b)])


def test_unreadable_inputs_and_bad_uris_are_refused(tmp_path, services, demo_artifact) -> None:
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 this is no Parquet file")
    refused(tmp_path, services, demo_artifact, "not a readable Parquet file", inputs=[str(tmp_path / "bad.parquet")])
    refused(tmp_path, services, demo_artifact, "matches no file", inputs=[str(tmp_path / "missing-*.jsonl")])
    refused(tmp_path, services, demo_artifact, "use a local path or s3://", inputs=["ftp://host/x.jsonl"])
    refused(tmp_path, services, demo_artifact, "unsupported storage URI", output="gs://bucket/x")


def test_an_unknown_artifact_is_refused(tmp_path, services) -> None:
    refused(tmp_path, services, tmp_path / "no-such-artifact", "no-such-artifact")


def test_languages_the_model_lacks_are_refused_naming_its_own(tmp_path, services, artifacts) -> None:
    nllb = artifacts["nllb-200-distilled-600M"]
    options = {"source_language": "eng_Latn", "target_language": "zh"}
    refused(tmp_path, services, nllb, "options: target language 'zh' is not one of", options=options)
    refused(tmp_path, services, nllb, "name a target language (one of ace_Arab", options={})
    refused(
        tmp_path, services, artifacts["t5-small"], "en -> de, en -> fr, en -> ro", options={"target_language": "zh"}
    )


def test_oversized_documents_are_error_rows_or_refused_and_oversized_specs_refused(
    tmp_path, services, demo_artifact
) -> None:
    services = {**services, "env": {**services["env"], "FANYI_MAX_DOCUMENT_CHARS": "20"}}
    refused(tmp_path, services, demo_artifact, "more than 20: split it", on_bad_row="refuse")
    kept = spec(tmp_path / "kept.json", inputs=[str(corpus(tmp_path / "in.jsonl", 5))], output=services["output"],
                artifact=demo_artifact)  # fmt: skip
    result = jobs_cli("submit", str(kept), env=services["env"])
    assert result.returncode == 0 and "5 bad rows kept as error rows" in result.stderr
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"name": "x", "inputs": ["a"] * 200_000, "output": "o", "artifact": "a"}))
    result = jobs_cli("submit", str(big), env=services["env"])
    assert result.returncode == 1 and "a spec is at most" in result.stderr


def test_inputs_from_s3_globs_are_read(tmp_path, services, demo_artifact) -> None:
    from contract.storage import S3Storage

    source = S3Storage(services["bucket"], "corpus")
    source.put("day-1/a.jsonl", corpus(tmp_path / "a.jsonl", 3).read_bytes())
    source.put("day-1/notes.md", b"not an input")
    path = spec(
        tmp_path / "spec.json", inputs=[f"s3://{services['bucket']}/corpus/day-*/*.jsonl"],
        output=services["output"], artifact=demo_artifact,
    )  # fmt: skip
    result = jobs_cli("submit", str(path), env=services["env"])
    assert result.returncode == 0, result.stderr
    job = read_job(open_storage(services["output"]), result.stdout.strip())
    assert job.chunks == [3] and queued(services["redis"]) == 1


def test_s3_uris_with_dot_segments_or_no_bucket_are_refused_before_anything_is_written(
    tmp_path, services, demo_artifact
) -> None:
    bucket = services["bucket"]
    for output in (f"s3://{bucket}/../../x", f"s3://{bucket}/results/./x", f"s3://{bucket}/a//b", "s3:///results"):
        expected = "names no bucket" if output.startswith("s3:///") else "cannot have '.', '..' or empty segments"
        refused(tmp_path, services, demo_artifact, expected, output=output)
    refused(tmp_path, services, demo_artifact, "cannot have '.', '..'", inputs=[f"s3://{bucket}/in/../*.jsonl"])
    assert open_storage(f"s3://{bucket}").list("") == []  # no literal '../' key anywhere in the bucket
    assert open_storage(f"s3://{bucket}/results/").uri == f"s3://{bucket}/results"  # a trailing slash is fine


@pytest.mark.parametrize("key", ["../x", "a/../../x", "/etc/passwd", "a//b", "a\\b", "a/./b", "a\x00b"])
def test_keys_that_could_leave_their_prefix_are_refused(tmp_path, key: str) -> None:
    with pytest.raises(StorageError):
        LocalStorage(tmp_path / "root").create(key, b"x")
    assert not (tmp_path / "x").exists() and not (tmp_path / "root").exists()


def test_job_ids_with_path_parts_are_refused() -> None:
    for job_id in ["../evil", "a/b", "..", ".hidden", ""]:
        with pytest.raises(StorageError):
            check_job_id(job_id)
    with pytest.raises(StorageError):
        input_key("../../etc", 0)
    assert check_key("job-1/parts/part-00000.parquet")


def test_credentials_never_appear_in_logs_or_errors(tmp_path, services, demo_artifact, workers) -> None:
    server = RedisServer(password="pw-never-logged-42").start()
    try:
        worker = workers(FANYI_BROKER_URL=server.url)
        wrong = server.url.replace("pw-never-logged-42", "wrong-pw-never-logged")
        path = spec(tmp_path / "spec.json", inputs=[str(corpus(tmp_path / "in.jsonl", 3))], output=services["output"],
                    artifact=demo_artifact)  # fmt: skip
        env = {**services["env"], "FANYI_BROKER_URL": wrong, "FANYI_CACHE_URL": wrong}
        result = jobs_cli("submit", str(path), env=env)  # connects to the broker, is refused, says so
        worker.stop()
        assert result.returncode != 0 and "cannot be reached" in result.stderr and ":***@" in result.stderr
        text = worker.log.read_text() + result.stdout + result.stderr
        assert "ready." in text
        for secret in ("pw-never-logged-42", "wrong-pw-never-logged", "s3cr3t-never-logged"):
            assert secret not in text
    finally:
        server.stop()


def test_chunks_are_bounded_by_source_tokens_and_a_long_document_is_alone(tmp_path, services, demo_artifact) -> None:
    from worker.engine.artifact import Artifact
    from worker.engine.tokenizer import Tokenizer

    short = "Tom has 3 apples."
    long = " ".join(["The meeting starts at 9 am."] * 30)
    texts = [short] * 4 + [long] + [short] * 4
    with (tmp_path / "in.jsonl").open("w") as f:
        f.writelines(json.dumps({"id": f"d{n}", "text": t}) + "\n" for n, t in enumerate(texts))
    tokens = Tokenizer.from_artifact(Artifact.load(demo_artifact)).count([short, long])
    assert tokens[1] > 3 * tokens[0] * 4  # the long document alone is over the limit below
    path = spec(
        tmp_path / "spec.json", inputs=[str(tmp_path / "in.jsonl")], output=services["output"],
        artifact=demo_artifact, chunk_tokens=3 * tokens[0],
    )  # fmt: skip
    result = jobs_cli("submit", str(path), env=services["env"])
    assert result.returncode == 0, result.stderr
    assert "9 documents, " in result.stderr and "; 5 chunk inputs written" in result.stderr  # progress
    job = read_job(open_storage(services["output"]), result.stdout.strip())
    assert job.chunks == [3, 1, 1, 3, 1] and queued(services["redis"]) == 5
