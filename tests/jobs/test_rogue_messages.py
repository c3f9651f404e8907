"""Messages nobody should have sent, to a live worker with a real job: none stops the worker, none
writes anything, the job ends with every document once and its commands keep working."""

from __future__ import annotations

import base64
import json
import urllib.request
from pathlib import Path

import redis
from celery import Celery

from contract.job import group_key, part_key, summary_key
from contract.storage import open_storage
from tests.jobs.conftest import assert_each_id_once, jobs_cli, metric, output_rows, queued, submit, wait
from tests.services import free_port, wait_for


def test_rogue_messages_are_dropped_and_the_job_ends(tmp_path, services, demo_artifact, workers):
    job_id = submit(tmp_path, services, demo_artifact, 60)  # 3 chunks at priority 5
    output, client = services["output"], redis.Redis.from_url(services["redis"])
    sender = Celery(broker=services["redis"])
    for args in (
        [output, job_id, 9999], [output, job_id, -1], [output, job_id, "0"], [output, job_id], [output, job_id, 0, 1],
        [output, "../../etc", 0], [output, "x" * (8 << 20), 0], ["/etc", job_id, 0], ["/etc/passwd", job_id, 0],
        ["http://example.com/x", job_id, 0], [f"s3://{services['bucket']}/../results", job_id, 0],
    ):  # fmt: skip
        sender.send_task("fanyi.translate_chunk", args=args, queue="translate.cpu", priority=0)  # before the chunks
    real = json.loads(client.lindex("translate.cpu", 0))  # one of them, as kombu wrote it: the template
    body_not_a_task = base64.b64encode(json.dumps({"not": "a task"}).encode()).decode()
    for raw in (
        "garbage", "[1, 2]", json.dumps({**real, "body": "!!!not base64"}), json.dumps({**real, "headers": {}}),
        json.dumps({**real, "body": body_not_a_task}),
    ):  # fmt: skip
        client.lpush("translate.cpu", raw)
    port = free_port()
    worker = workers(FANYI_METRICS_PORT=str(port), FANYI_MAX_DEATHS="3")  # /etc: "no job there" thrice, then dropped
    status = wait(job_id, services, timeout=180)
    assert status["state"] == "succeeded" and status["done"] == 60
    assert_each_id_once(output_rows(output, job_id), 60)
    wait_for(lambda: queued(services["redis"]) == 0 and not client.hlen("unacked"), 60, "every message to be gone")
    assert not worker.died()
    log = worker.log.read_text()
    assert "Unrecoverable error" not in log and "Traceback" not in log and "xxxxxxxxxx" * 20 not in log

    storage = open_storage(output)
    assert sorted(storage.list(job_id)) == sorted(
        [f"{job_id}/{name}" for name in ("_job.json", "_head.json", "_ENQUEUED", "_SUCCESS", "_parts.json")]
        + [f"{job_id}/_inputs/{name}" for name in ("ids.pq", "chunks-00000.arrow")]  # three chunk inputs, one file
        + [part_key(job_id, n) for n in range(3)]
        + [summary_key(job_id, n) for n in range(3)]
        + [group_key(job_id, 0)]
    )  # no part, no summary, no failure of a chunk that does not exist
    assert not Path("/etc", job_id).exists() and not Path("/etc/passwd/", job_id).exists()
    assert max(len(key) for key in client.scan_iter()) < 1000  # the 8 MB id named no key
    for command in (("status", job_id), ("wait", job_id, "--timeout", "10"), ("list",)):
        result = jobs_cli(*command, "--output", output, env=services["env"])
        assert result.returncode == 0 and job_id in result.stdout, result.stdout + result.stderr

    scraped = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    dropped = {
        reason: metric(scraped, f'fanyi_messages_dropped_total{{reason="{reason}"}}')
        for reason in ("undecodable", "not_a_task", "invalid_chunk")
    }
    assert dropped == {"undecodable": 3, "not_a_task": 2, "invalid_chunk": 9}
