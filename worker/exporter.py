"""``python -m worker.exporter --port 9100``: queue metrics for dashboards and autoscalers, read from Redis.

One per cluster (workers serve their own counters, see ``worker.metrics``): queue depth per queue
and priority list, messages delivered but not acknowledged, workers answering a ping, and the
documents done and errors of every job submitted through this Redis.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from worker import settings
from worker.metrics import JOB_PROGRESS_KEY, JOBS_KEY, cache


class QueueCollector:
    """Queue-side gauges, read from Redis at each scrape. Jobs it has seen are remembered: if the cache
    loses them (a flush, a restart without disk), their counters are rebuilt from storage."""

    def __init__(self) -> None:
        self.known: dict[str, str] = {}  # job id -> output prefix

    def describe(self) -> list:
        return []  # nothing to check at registration: collect() runs only on a scrape

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        depth = GaugeMetricFamily(
            "fanyi_queue_depth", "Messages waiting, per queue and priority", labels=["queue", "priority"]
        )
        redis = cache()
        for queue in settings.QUEUES:
            for step, name in zip(settings.PRIORITY_STEPS, settings.priority_lists(queue)):
                depth.add_metric([queue, str(step)], redis.llen(name))
        yield depth
        yield GaugeMetricFamily(
            "fanyi_unacked_messages", "Delivered, not yet acknowledged", value=redis.hlen("unacked")
        )
        yield GaugeMetricFamily("fanyi_workers_up", "Workers answering a ping", value=len(_ping()))
        total = GaugeMetricFamily("fanyi_job_documents", "Documents submitted, per job", labels=["job"])
        done = GaugeMetricFamily("fanyi_job_documents_done", "Documents written, per job", labels=["job"])
        errors = GaugeMetricFamily("fanyi_job_errors", "Error rows written, per job", labels=["job"])
        self.known |= {k.decode(): v.decode() for k, v in redis.hgetall(JOBS_KEY).items()}
        for job, output in self.known.items():
            progress = redis.hgetall(JOB_PROGRESS_KEY.format(job=job))
            if b"total" not in progress:
                progress = self._rebuilt(job, output)
            total.add_metric([job], int(progress.get(b"total", 0)))
            done.add_metric([job], int(progress.get(b"documents", 0)))
            errors.add_metric([job], int(progress.get(b"errors", 0)))
        yield total
        yield done
        yield errors

    def _rebuilt(self, job: str, output: str) -> dict[bytes, bytes]:
        from worker.metrics import rebuild_progress

        try:
            rebuild_progress(job, output)
        except Exception:  # noqa: BLE001 - the job is gone from storage: forget it
            self.known.pop(job, None)
            return {}
        return dict(cache().hgetall(JOB_PROGRESS_KEY.format(job=job)))


def _ping() -> list[Any]:
    from worker.app import app

    with app.connection_for_write(settings.BROKER_URL) as connection:
        return app.control.ping(timeout=1.0, connection=connection) or []


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m worker.exporter", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--port", type=int, default=9100, help="port of the /metrics endpoint")
    args = parser.parse_args(argv)
    from prometheus_client import REGISTRY, start_http_server

    REGISTRY.register(QueueCollector())
    start_http_server(args.port)
    print(f"queue metrics on :{args.port}/metrics (Redis {settings.redact(settings.CACHE_URL)})", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
