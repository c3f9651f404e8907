"""The jobs API over HTTP (``python -m jobs serve``), as a real server process on moto's S3 and a real Redis, with
a real worker: submit by upload and by URI, idempotent retries, status, results, cancel, resume, queues; who may
do what (401, 403, a team that cannot see another's job); bodies past the limits refused with 413 before storage
is touched; a bad spec refused before anything is enqueued; no token in the server's log."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from contract.job import MANIFEST
from contract.storage import open_storage
from jobs.webhooks import WATCH_KEY
from tests.jobs.conftest import corpus, jobs_cli, queued
from tests.jobs.http import TOKENS, until
from tests.jobs.http import api_spec as spec
from tests.services import wait_for


def test_an_uploaded_corpus_is_translated_and_read_back_over_http(tmp_path, services, server, demo_artifact, workers):
    api = server()
    documents = corpus(tmp_path / "in.jsonl", 25).read_bytes()
    code, uploaded = api.call("POST", "/v1/uploads?format=jsonl", documents)
    assert code == 201 and uploaded["bytes"] == len(documents)
    assert uploaded["uri"].startswith(f"s3://{services['bucket']}/teams/books/_uploads/")
    body = spec(demo_artifact, [uploaded["uri"]])
    code, first = api.call("POST", "/v1/jobs", body, headers={"Idempotency-Key": "nightly-2026-12-07"})
    assert code == 201, first
    assert first["status"]["team"] == "books" and first["status"]["documents"] == 25
    code, again = api.call("POST", "/v1/jobs", body, headers={"Idempotency-Key": "nightly-2026-12-07"})
    assert (code, again["id"]) == (201, first["id"])  # a retried submit: the same job, its chunks enqueued once
    assert queued(services["redis"]) == 3
    job_id = first["id"]
    workers()
    status = until(api, job_id, {"succeeded"})
    assert (status["done"], status["documents"], status["name"]) == (25, 25, "web")
    code, results = api.call("GET", f"/v1/jobs/{job_id}/results")
    assert code == 200 and len(results["parts"]) == 3
    assert all(p.startswith(f"s3://{services['bucket']}/teams/books/{job_id}/parts/") for p in results["parts"])
    code, text = api.call("GET", f"/v1/jobs/{job_id}/results?format=jsonl")
    rows = [json.loads(line) for line in text.splitlines()]
    assert code == 200 and sorted(r["id"] for r in rows) == [f"doc-{n:05d}" for n in range(25)]
    assert all(r["status"] == "ok" and r["translation"] for r in rows)
    code, page = api.call("GET", "/v1/jobs?state=succeeded")
    assert code == 200 and [j["id"] for j in page["jobs"]] == [job_id]
    code, queues = api.call("GET", "/v1/queues")
    assert code == 200 and queues["queues"]["translate.cpu"]["backlog"] == 0 and queues["workers"]["up"] >= 1
    log = api.stop()
    assert "POST /v1/jobs" in log and not any(token in log for token in TOKENS.values())


def test_a_team_sees_and_steers_only_its_own_jobs(tmp_path, services, server, demo_artifact, workers):
    api = server()
    (tmp_path / "corpora").mkdir()
    source = corpus(tmp_path / "corpora" / "in.jsonl", 30)
    code, submitted = api.call("POST", "/v1/jobs", spec(demo_artifact, [str(source)]))
    assert code == 201, submitted
    job_id = submitted["id"]
    assert api.call("GET", f"/v1/jobs/{job_id}", team=None)[0] == 401
    bad = dict(TOKENS, books="not-a-token-anyone-was-given")
    request = urllib.request.Request(f"http://127.0.0.1:{api.port}/v1/jobs", headers={"Authorization": f"Bearer {bad}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 401 and json.loads(refused.value.read())["code"] == "unauthorized"
    for method, path in [("GET", f"/v1/jobs/{job_id}"), ("POST", f"/v1/jobs/{job_id}:cancel"),
                         ("DELETE", f"/v1/jobs/{job_id}"), ("POST", f"/v1/jobs/{job_id}:resume"),
                         ("GET", f"/v1/jobs/{job_id}/results")]:  # fmt: skip
        code, answer = api.call(method, path, team="news")
        assert (code, answer["code"]) == (403, "forbidden"), (method, path, answer)
    assert api.call("GET", "/v1/jobs", team="news") == (200, {"jobs": [], "next_page_token": None})
    assert api.call("GET", "/v1/jobs/no-such-job")[0] == 404
    code, cancelled = api.call("POST", f"/v1/jobs/{job_id}:cancel")
    assert code == 200 and cancelled["state"] in {"cancelling", "cancelled"}
    workers()
    assert until(api, job_id, {"cancelled"})["done"] == 0
    code, resumed = api.call("POST", f"/v1/jobs/{job_id}:resume")
    assert (code, resumed["enqueued"]) == (200, 3)
    assert until(api, job_id, {"succeeded"})["done"] == 30
    assert api.call("DELETE", f"/v1/jobs/{job_id}", team="news")[0] == 403
    code, deleted = api.call("DELETE", f"/v1/jobs/{job_id}")
    assert code == 200 and deleted["deleted_objects"] > 3
    assert api.call("GET", f"/v1/jobs/{job_id}")[0] == 404 and api.call("GET", "/v1/jobs")[1]["jobs"] == []


def test_what_a_spec_may_not_do_is_refused_before_anything_is_written(tmp_path, services, server, demo_artifact):
    api = server("--max-upload-mb", "0.01")
    (tmp_path / "corpora").mkdir()
    source = str(corpus(tmp_path / "corpora" / "in.jsonl", 3))
    outside = str(corpus(tmp_path / "elsewhere.jsonl", 3))
    cases = [
        (spec(demo_artifact, [outside]), 403, "outside what this server reads for you"),
        (spec(demo_artifact, [source], output="s3://someone-else/out"), 403, "output is set by the server"),
        (spec(Path("/opt/my-own-model"), [source]), 403, "is not one this server offers"),
        (spec(demo_artifact, ["/etc/../etc/passwd"]), 403, "outside what this server reads for you"),
        (spec(demo_artifact, [source], chunk_documents=0), 400, "chunk_documents"),
        (spec(demo_artifact, [source], memory_prefix="s3://elsewhere/m"), 403, "memory_prefix must be under"),
        (
            spec(demo_artifact, [source], notify={"url": "http://169.254.169.254/", "secret": "s" * 16}),
            403,
            "is not a URL this server calls",
        ),  # fmt: skip
        (spec(demo_artifact, [source], notify={"url": "http://x/"}), 400, "secret"),
        ({"not": "a spec"}, 400, "spec"),
    ]
    for body, status, message in cases:
        code, answer = api.call("POST", "/v1/jobs", body)
        assert code == status and message in answer["message"], (body, answer)
        assert set(answer) == {"code", "message"}
    code, answer = api.call(
        "POST", "/v1/jobs", b"{" + b" " * 1_100_000 + b"}", headers={"Content-Type": "application/json"}
    )
    assert (code, answer["code"]) == (413, "too_large")
    code, answer = api.call("POST", "/v1/uploads", b"x" * 20_000)
    assert (code, answer["code"]) == (413, "too_large")
    chunked = urllib.request.Request(f"http://127.0.0.1:{api.port}/v1/uploads", data=iter([b"x" * 8_000] * 3),
                                     headers={"Authorization": f"Bearer {TOKENS['books']}"}, method="POST")  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as refused:  # no Content-Length: refused as it streams in
        urllib.request.urlopen(chunked, timeout=60)
    assert refused.value.code == 413
    assert open_storage(f"s3://{services['bucket']}").list("") == []
    assert queued(services["redis"]) == 0


def test_a_webhook_is_delivered_signed_once_the_job_ends_even_after_the_server_was_killed(
    tmp_path, services, server, demo_artifact, workers, listener
):
    """The server that took the job is killed before it ends, and Redis forgets the job was watched: a new server
    finds it in storage, and delivers the final status, retried after a 500, with the same event id and body."""
    import redis

    secret = "whsec-" + "9f" * 12
    (tmp_path / "corpora").mkdir()
    source = corpus(tmp_path / "corpora" / "in.jsonl", 12)
    first = server("--webhooks-to", listener.url.rsplit("/", 2)[0] + "/")
    body = spec(demo_artifact, [str(source)], notify={"url": listener.url, "secret": secret})
    code, submitted = first.call("POST", "/v1/jobs", body)
    assert code == 201, submitted
    job_id = submitted["id"]
    first.kill()
    redis.Redis.from_url(services["redis"]).delete(WATCH_KEY)  # what was pending, only storage knows now
    second = server("--webhooks-to", listener.url.rsplit("/", 2)[0] + "/")
    workers()
    wait_for(lambda: len(listener.deliveries) >= 2, 240, "the webhook, delivered again after a 500")
    time.sleep(3)  # a delivery taken (204) is not sent again
    assert len(listener.deliveries) == 2
    (headers, sent), (again, resent) = listener.deliveries
    assert headers["Fanyi-Event-Id"] == again["Fanyi-Event-Id"] and sent == resent
    for header, raw in listener.deliveries:
        fields = dict(part.split("=", 1) for part in header["Fanyi-Signature"].split(","))
        expected = hmac.new(secret.encode(), f"{fields['t']}.".encode() + raw, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(fields["v1"], expected) and abs(int(fields["t"]) - time.time()) < 300
    event = json.loads(sent)
    assert event["type"] == "job.ended" and event["id"] == headers["Fanyi-Event-Id"]
    assert (event["job"]["id"], event["job"]["state"], event["job"]["done"]) == (job_id, "succeeded", 12)
    storage = open_storage(f"s3://{services['bucket']}/teams/books")
    assert storage.exists(f"{job_id}/_NOTIFIED")
    manifest = storage.read(f"{job_id}/{MANIFEST}").decode()
    assert secret not in manifest and secret not in json.dumps(second.call("GET", f"/v1/jobs/{job_id}")[1])
    assert secret not in second.stop()


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident memory so far (VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for process {pid}")


def test_a_50_mb_upload_streams_through_the_server_and_the_api_is_a_valid_openapi_document(
    tmp_path, services, server
) -> None:
    from openapi_spec_validator import validate

    api = server()
    code, document = api.call("GET", "/openapi.json", team=None)
    assert code == 200
    validate(document)  # what client generators read
    paths = document["paths"]
    assert {"/v1/jobs", "/v1/uploads", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}:cancel", "/v1/queues"} <= set(paths)
    assert paths["/v1/jobs/{job_id}"]["get"]["responses"]["403"]["content"]["application/json"]
    line = (json.dumps({"id": "doc", "text": "The meeting starts at 9 am. " * 20}) + "\n").encode()
    body = line * (50 * 2**20 // len(line) + 1)
    before = peak_rss_mib(api.process.pid)
    code, uploaded = api.call("POST", "/v1/uploads?format=jsonl", body)
    assert code == 201 and uploaded["bytes"] == len(body) >= 50 * 2**20
    grown = peak_rss_mib(api.process.pid) - before
    assert grown < 20, f"the server's peak memory grew by {grown:.0f} MiB for a {len(body) / 2**20:.0f} MiB upload"
    stored = open_storage(uploaded["uri"].rsplit("/", 1)[0]).read(uploaded["uri"].rsplit("/", 1)[1])
    assert hashlib.sha256(stored).digest() == hashlib.sha256(body).digest()


def test_a_teams_caps_hold_and_a_parquet_upload_is_read(tmp_path, services, server, demo_artifact) -> None:
    """``tight`` (max_queued_documents=40 highest_priority=3 in the tokens file): a job of 30 documents is taken,
    a second of 30 is 429 with nothing written or enqueued, and priority 1 is refused whatever the load."""
    api = server()
    (tmp_path / "corpora").mkdir()
    source = str(corpus(tmp_path / "corpora" / "in.jsonl", 30))
    code, answer = api.call("POST", "/v1/jobs", spec(demo_artifact, [source], priority=1), team="tight")
    assert (code, answer["code"]) == (403, "forbidden") and "use 3 to 9" in answer["message"]
    code, first = api.call("POST", "/v1/jobs", spec(demo_artifact, [source], priority=3), team="tight")
    assert code == 201, first
    code, answer = api.call("POST", "/v1/jobs", spec(demo_artifact, [source], priority=5), team="tight")
    assert (code, answer["code"]) == (429, "too_many_documents")
    assert "30 documents queued and may have 40" in answer["message"]
    assert [j["id"] for j in api.call("GET", "/v1/jobs", team="tight")[1]["jobs"]] == [first["id"]]
    assert queued(services["redis"]) == 3
    assert api.call("POST", "/v1/jobs", spec(demo_artifact, [source], priority=1), team="books")[0] == 201
    table = pa.table({"id": [f"p{n}" for n in range(7)], "text": ["Tom has 3 apples."] * 7})
    parquet = io.BytesIO()
    pq.write_table(table, parquet)
    code, uploaded = api.call("POST", "/v1/uploads?format=parquet", parquet.getvalue(), team="books")
    assert code == 201 and uploaded["uri"].endswith(".parquet")
    code, submitted = api.call("POST", "/v1/jobs", spec(demo_artifact, [uploaded["uri"]]), team="books")
    assert code == 201 and submitted["status"]["documents"] == 7


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        ("books\n", "line 1: want `team token`"),
        ("Books books-token-0123456789abcdef\n", "line 1: want `team token`"),
        ("books short\n", "16+ characters"),
        ("a tok-0123456789abcdef\nb tok-0123456789abcdef\n", "line 2: this token is already given to a team"),
        ("books books-token-0123456789abcdef priority=1\n", "after the token come max_queued_documents=N"),
        ("books books-token-0123456789abcdef highest_priority=12\n", "0 (first) .. 9 (last)"),
        ("# nobody\n", "names no team"),
    ],
)
def test_a_tokens_file_the_server_cannot_use_stops_it_with_one_line(tmp_path, tokens: str, message: str) -> None:
    (tmp_path / "tokens").write_text(tokens)
    started = jobs_cli("serve", "--tokens", str(tmp_path / "tokens"), "--output", str(tmp_path / "out"), env={})
    assert started.returncode == 1 and started.stderr.startswith("error: ") and message in started.stderr
    assert "Traceback" not in started.stderr and "0123456789abcdef" not in started.stderr
