"""infra/ checked statically: manifests parse, kinds and fields are right, names, labels and metrics line up."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.infra.test_docker import check_command, settings_the_code_reads
from worker import settings

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "infra" / "k8s" / "base"
KUSTOMIZATION = yaml.safe_load((BASE / "kustomization.yaml").read_text())
OBJECTS = [doc for f in KUSTOMIZATION["resources"] for doc in yaml.safe_load_all((BASE / f).read_text()) if doc]
BY_KIND: dict[str, dict[str, dict]] = {}
for obj in OBJECTS:
    BY_KIND.setdefault(obj["kind"], {})[obj["metadata"]["name"]] = obj
CONFIG = BY_KIND["ConfigMap"]["fanyi-config"]["data"]


def container(deployment: str) -> dict:
    return BY_KIND["Deployment"][deployment]["spec"]["template"]["spec"]["containers"][0]


def test_every_manifest_has_its_kind_name_and_a_known_api() -> None:
    for obj in OBJECTS:
        assert obj["apiVersion"] in ("v1", "apps/v1", "batch/v1", "keda.sh/v1alpha1") and obj["metadata"]["name"]
    for generated in KUSTOMIZATION["configMapGenerator"]:
        assert all((BASE / f).exists() for f in generated["files"])


def test_deployments_select_their_own_pods_and_run_our_commands() -> None:
    known = settings_the_code_reads()
    for name, deployment in BY_KIND["Deployment"].items():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items(), name
        check_command(container(name)["args"])
        assert {e["name"] for e in container(name).get("env", []) if e["name"].startswith("FANYI_")} <= known
        assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    assert set(CONFIG) <= known
    for service in BY_KIND["Service"].values():
        assert any(service["spec"]["selector"].items() <= d["spec"]["template"]["metadata"]["labels"].items()
                   for d in BY_KIND["Deployment"].values())  # fmt: skip


def test_workers_outlive_their_longest_chunk_and_gpu_workers_get_one_gpu_each() -> None:
    for name in ("fanyi-worker-cpu", "fanyi-worker-gpu"):
        grace = BY_KIND["Deployment"][name]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert grace > int(CONFIG["FANYI_TIME_LIMIT"]) > int(CONFIG["FANYI_SOFT_TIME_LIMIT"])
    assert int(CONFIG["FANYI_VISIBILITY_TIMEOUT"]) > int(CONFIG["FANYI_TIME_LIMIT"])
    gpu = BY_KIND["Deployment"]["fanyi-worker-gpu"]["spec"]["template"]["spec"]
    assert gpu["nodeSelector"] and gpu["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    args = gpu["containers"][0]["args"]
    assert args[args.index("--concurrency") + 1] == "1"


def test_beat_is_a_single_replica_with_its_lock() -> None:
    beat = BY_KIND["Deployment"]["fanyi-beat"]["spec"]
    assert beat["replicas"] == 1 and beat["strategy"]["type"] == "Recreate"
    assert "jobs.schedules.SpecScheduler" in beat["template"]["spec"]["containers"][0]["args"]


def test_each_queue_scales_on_all_its_priority_lists() -> None:
    for name, scaled in BY_KIND["ScaledObject"].items():
        target = scaled["spec"]["scaleTargetRef"]["name"]
        args = container(target)["args"]
        queue = args[args.index("-Q") + 1]
        lists = [t["metadata"]["listName"] for t in scaled["spec"]["triggers"] if t["type"] == "redis"]
        assert lists == settings.priority_lists(queue), name


@pytest.mark.parametrize("overlay", sorted((ROOT / "infra" / "k8s" / "overlays").iterdir()), ids=lambda p: p.name)
def test_overlays_patch_objects_the_base_has(overlay: Path) -> None:
    kustomization = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["../../base"]
    for patch in kustomization.get("patches", []):
        assert patch["target"]["name"] in BY_KIND[patch["target"]["kind"]]
        yaml.safe_load(patch["patch"])


def exported_metric_names(redis_url: str) -> set[str]:
    """Every sample name the worker and the exporter serve."""
    import redis as redis_client

    from worker import metrics
    from worker.exporter import QueueCollector

    names = set()
    for value in vars(metrics).values():
        if hasattr(value, "collect") and hasattr(value, "_name"):
            suffixes = ("_total",) if value._type == "counter" else ("_bucket", "_count", "_sum")
            names |= {value._name + suffix for suffix in suffixes}
    redis_client.Redis.from_url(redis_url).ping()
    metrics.cache.cache_clear()
    saved = settings.CACHE_URL, settings.BROKER_URL
    settings.CACHE_URL = settings.BROKER_URL = redis_url
    try:
        names |= {family.name for family in QueueCollector().collect()}
    finally:
        settings.CACHE_URL, settings.BROKER_URL = saved
        metrics.cache.cache_clear()
    return names


def test_dashboard_and_alerts_use_only_metrics_the_code_exports(redis_url) -> None:
    exported = exported_metric_names(redis_url)
    dashboard = json.loads((BASE / "dashboard.json").read_text())
    queries = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    rules = yaml.safe_load((BASE / "alerts.yaml").read_text())["groups"][0]["rules"]
    queries += [rule["expr"] for rule in rules]
    used = {name for q in queries for name in re.findall(r"\bfanyi_[a-z_]+\b", q)}
    assert used and used <= exported, used - exported
    assert {r["alert"] for r in rules} == {"FanyiQueueBacklog", "FanyiNoWorkers", "FanyiErrorRate", "FanyiJobStuck"}
