"""``python -m worker.exporter --port 9100``: what Redis knows, for dashboards, alerts and autoscalers.

One per cluster (each worker serves its own counters, see ``worker.monitoring.metrics``). Three endpoints:

    /metrics   Prometheus: per queue the messages waiting per priority list, the ones delivered and
               not yet acknowledged, and their sum, the backlog; workers whose heartbeat is alive and workers
               that stopped taking chunks after an environment fault; per job (label ``job_id``) the
               documents submitted and written, error rows, and when it ended; per nightly schedule
               (label ``schedule``) whether a night waits for an earlier run still going and how many
               nights were skipped for one (``jobs.schedules``); and whether Redis answered
               (``fanyi_exporter_redis_up``: 0 keeps the endpoint up, so alerts can say so).
    /backlog   {"translate.cpu": 80, ...}: each queue's backlog as JSON, for KEDA's metrics-api
               trigger (503 while Redis does not answer: KEDA then holds its fallback).
    /healthz   200 while the exporter serves.

It exports only these series (its own registry): not the worker's counters, which are zero here.
An ended job (every document written, or cancelled) stays ``FANYI_JOB_METRICS_RETENTION`` seconds,
then leaves the registry with its series; a job the cache forgot is counted again from storage.
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from contract import settings
from contract.cache import (
    JOB_PROGRESS_KEY,
    JOBS_KEY,
    SCHEDULE_SKIPPED_KEY,
    SCHEDULE_WAITING_KEY,
    SCHEDULES_KEY,
    UNACKED_KEY,
    WORKER_KEY,
    broker,
    cache,
)

log = logging.getLogger("fanyi.exporter")


def queue_depths(client: Any) -> dict[str, list[int]]:
    """Messages waiting per queue, one count per priority step."""
    pipeline = client.pipeline(transaction=False)
    for queue in settings.QUEUES:
        for name in settings.priority_lists(queue):
            pipeline.llen(name)
    counts = iter(pipeline.execute())
    return {queue: [next(counts) for _ in settings.PRIORITY_STEPS] for queue in settings.QUEUES}


def unacked(client: Any) -> dict[str, int]:
    """Messages delivered and not yet acknowledged (running, or prefetched), per queue."""
    found = dict.fromkeys(settings.QUEUES, 0)
    for _, raw in client.hscan_iter(UNACKED_KEY, count=500):
        try:
            queue = json.loads(raw)[2]
        except (ValueError, IndexError, TypeError):
            continue
        if queue in found:
            found[queue] += 1
    return found


def backlog(client: Any) -> dict[str, int]:
    """Per queue, chunks waiting in any priority list plus chunks delivered and not yet done: what
    an autoscaler divides by the chunks one pod should hold."""
    return _totals(queue_depths(client), unacked(client))


def _totals(depths: dict[str, list[int]], running: dict[str, int]) -> dict[str, int]:
    return {queue: sum(depths[queue]) + running[queue] for queue in settings.QUEUES}


class QueueCollector:
    """The exporter's series, read from Redis at each scrape."""

    def __init__(self, retention: float = settings.JOB_METRICS_RETENTION, clock: Callable[[], float] = time.time):
        self.known: dict[str, str] = {}  # job id -> output prefix, kept should the cache lose it
        self.retention, self.clock = retention, clock
        self.lock = threading.Lock()

    def describe(self) -> list:
        return []  # nothing to check at registration: collect() runs only on a scrape

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        with self.lock:
            try:
                families, up = [*self._queues(), *self._jobs(), *self._schedules()], 1
            except Exception as err:  # noqa: BLE001 - Redis down is a series (redis_up 0), not a failed scrape
                urls = dict.fromkeys(settings.redact(url) for url in (settings.BROKER_URL, settings.CACHE_URL))
                log.warning("cannot read Redis at %s: %s", " or ".join(urls), err)
                families, up = [], 0
        yield from families
        yield GaugeMetricFamily("fanyi_exporter_redis_up", "Whether Redis answered this scrape", value=up)

    def _queues(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        client = broker()
        depths, running = queue_depths(client), unacked(client)
        totals = _totals(depths, running)
        depth = GaugeMetricFamily(
            "fanyi_queue_depth", "Messages waiting, per queue and priority", labels=["queue", "priority"]
        )
        delivered = GaugeMetricFamily("fanyi_unacked_messages", "Delivered, not yet acknowledged", labels=["queue"])
        total = GaugeMetricFamily("fanyi_backlog", "Waiting in any priority plus unacknowledged", labels=["queue"])
        for queue in settings.QUEUES:
            for step, count in zip(settings.PRIORITY_STEPS, depths[queue]):
                depth.add_metric([queue, str(step)], count)
            delivered.add_metric([queue], running[queue])
            total.add_metric([queue], totals[queue])
        yield from (depth, delivered, total)
        up, unhealthy = fleet()
        yield GaugeMetricFamily("fanyi_workers_up", "Workers whose watchdog beats", value=up)
        yield GaugeMetricFamily(
            "fanyi_workers_unhealthy", "Workers that stopped taking chunks after an environment fault", value=unhealthy
        )

    def _jobs(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        labels = ["job_id"]
        total = GaugeMetricFamily("fanyi_job_documents", "Documents submitted, per job", labels=labels)
        done = GaugeMetricFamily("fanyi_job_documents_done", "Documents written, per job", labels=labels)
        errors = GaugeMetricFamily("fanyi_job_errors", "Error rows written, per job", labels=labels)
        ended = GaugeMetricFamily(
            "fanyi_job_ended_timestamp_seconds", "When the job ended (all written, or cancelled)", labels=labels
        )
        for job, progress in self._current_jobs():
            total.add_metric([job], int(progress["total"]))
            done.add_metric([job], int(progress.get("documents", 0)))
            errors.add_metric([job], int(progress.get("errors", 0)))
            if "ended" in progress:
                ended.add_metric([job], float(progress["ended"]))
        yield from (total, done, errors, ended)

    def _schedules(self) -> Iterator[Any]:
        """Per schedule beat ran: whether a night waits for an earlier run, and the nights skipped for one."""
        from prometheus_client.core import GaugeMetricFamily

        labels = ["schedule"]
        blocked = GaugeMetricFamily(
            "fanyi_schedule_blocked", "1 while a night cannot start: an earlier run is still going", labels=labels
        )
        skipped = GaugeMetricFamily(
            "fanyi_schedule_skipped_nights", "Nights that never ran because an earlier run was still going (30 days)",
            labels=labels,
        )  # fmt: skip
        redis = cache()
        names = sorted(name.decode() for name in redis.hkeys(SCHEDULES_KEY))
        pipeline = redis.pipeline(transaction=False)
        for name in names:
            pipeline.exists(SCHEDULE_WAITING_KEY.format(name=name)).hlen(SCHEDULE_SKIPPED_KEY.format(name=name))
        counts = iter(pipeline.execute())
        for name in names:
            blocked.add_metric([name], next(counts))
            skipped.add_metric([name], next(counts))
        yield from (blocked, skipped)

    def _current_jobs(self) -> Iterator[tuple[str, dict[str, str]]]:
        """Registered jobs with their progress; ended ones past the retention are forgotten here."""
        redis, now = cache(), self.clock()
        self.known |= {k.decode(): v.decode() for k, v in redis.hgetall(JOBS_KEY).items()}
        for job, output in list(self.known.items()):
            key = JOB_PROGRESS_KEY.format(job=job)
            progress = {k.decode(): v.decode() for k, v in redis.hgetall(key).items()} or self._rebuilt(job, output)
            if "total" not in progress:
                continue
            if "ended" not in progress and int(progress.get("documents", 0)) >= int(progress["total"]):
                redis.hsetnx(key, "ended", now)
                progress["ended"] = str(now)
            if "ended" in progress and now - float(progress["ended"]) > self.retention:
                redis.pipeline().hdel(JOBS_KEY, job).delete(key).execute()
                del self.known[job]
                continue
            yield job, progress

    def _rebuilt(self, job: str, output: str) -> dict[str, str]:
        """The cache lost this job's counters (a flush, a restart without disk): count them from storage."""
        from contract.cache import rebuild_progress

        try:
            rebuild_progress(job, output)
        except Exception:  # noqa: BLE001 - the job is gone from storage: forget it
            self.known.pop(job, None)
            return {}
        return {k.decode(): v.decode() for k, v in cache().hgetall(JOB_PROGRESS_KEY.format(job=job)).items()}


def fleet() -> tuple[int, int]:
    """Workers whose watchdog beats, and how many of them stopped taking chunks after an environment fault."""
    beats = _heartbeats()
    return len(beats), sum(not _healthy(beat) for beat in beats)


def _heartbeats() -> list[bytes]:
    """Each live worker's last heartbeat (its health); a worker silent for three heartbeats has none."""
    redis = cache()
    keys = list(redis.scan_iter(WORKER_KEY.format(hostname="*"), count=500))
    return [beat for beat in redis.mget(keys) if beat] if keys else []


def _healthy(raw: bytes) -> bool:
    try:
        return bool(json.loads(raw).get("healthy", True))
    except (ValueError, AttributeError):
        return True


def serve(port: int, collector: QueueCollector, host: str = "") -> ThreadingHTTPServer:
    """Start the endpoints in a thread; the server (``shutdown()`` stops it)."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)

    class Endpoints(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._answer(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif path == "/backlog":
                try:
                    self._answer(200, json.dumps(backlog(broker())).encode(), "application/json")
                except Exception as err:  # noqa: BLE001 - Redis down: KEDA's fallback takes over
                    self._answer(503, json.dumps({"error": f"Redis: {err}"}).encode(), "application/json")
            elif path == "/healthz":
                self._answer(200, b"ok\n", "text/plain")
            else:
                self._answer(404, b"/metrics, /backlog or /healthz\n", "text/plain")

        def _answer(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass  # one line per scrape is noise

    server = ThreadingHTTPServer((host, port), Endpoints)
    threading.Thread(target=server.serve_forever, name="fanyi-exporter", daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m worker.exporter", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--port", type=int, default=9100, help="port of /metrics, /backlog and /healthz")
    args = parser.parse_args(argv)
    settings.exit_if_invalid()  # a bad FANYI_* variable: one line, exit 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = serve(args.port, QueueCollector())
    log.info("serving :%d/metrics, /backlog, /healthz (Redis %s)", args.port, settings.redact(settings.BROKER_URL))
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()


if __name__ == "__main__":
    main()
