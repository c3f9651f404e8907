"""infra/k8s checked offline: the base's files statically, and every overlay as ``kubectl kustomize``
renders it: known kinds, KEDA's ScaledObject schema and rules, restricted pod security, probes, selectors,
references, and the design (KEDA reads each queue's backlog from the exporter, never Redis).

Rendering needs kubectl (with its built-in kustomize); without it those tests skip, except under CI
(``CI`` set), where a missing kubectl is a failure. ``scaled_objects("dev")`` gives other tests the
rendered ScaledObjects, and ``value_at`` reads a trigger's ``valueLocation`` out of a /backlog answer.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from contract import settings
from tests.infra.manifests import (
    K8S,
    ROOT,
    by_kind,
    check_command,
    rendered,
    scaled_objects,
    settings_the_code_reads,
    value_at,
)

BASE = K8S / "base"
OVERLAYS = sorted(p.name for p in (K8S / "overlays").iterdir() if (p / "kustomization.yaml").is_file())
MONITORING = K8S / "components" / "monitoring"
KEDA_CRD = Path(__file__).with_name("schemas") / "keda.sh_scaledobjects.yaml"
KUSTOMIZATION = yaml.safe_load((BASE / "kustomization.yaml").read_text())
OBJECTS = [doc for f in KUSTOMIZATION["resources"] for doc in yaml.safe_load_all((BASE / f).read_text()) if doc]
BY_KIND: dict[str, dict[str, dict]] = {}
for obj in OBJECTS:
    BY_KIND.setdefault(obj["kind"], {})[obj["metadata"]["name"]] = obj
CONFIG = BY_KIND["ConfigMap"]["fanyi-config"]["data"]

KNOWN_KINDS = {
    "v1": {"Namespace", "ConfigMap", "Secret", "Service", "PersistentVolumeClaim"},
    "apps/v1": {"Deployment"},
    "batch/v1": {"Job"},
    "policy/v1": {"PodDisruptionBudget"},
    "keda.sh/v1alpha1": {"ScaledObject"},
    "monitoring.coreos.com/v1": {"ServiceMonitor", "PodMonitor", "PrometheusRule"},
}
CLUSTER_SCOPED = {"Namespace"}
EXTERNAL = {("Secret", "fanyi-secrets")}  # what the base needs from outside; overlays/dev generates it
USER = 10001  # the images' user (docker/*.Dockerfile)
RESTRICTED_VOLUMES = {  # the volume types the restricted Pod Security Standard allows
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"
}  # fmt: skip
REQUIRED_METADATA = {"metrics-api": {"url", "valueLocation", "targetValue"}}  # KEDA's metrics-api scaler


# --- rendering -----------------------------------------------------------------------------------------------


def pod_templates(overlay: str) -> dict[str, dict]:
    """``Kind/name`` -> pod template of every Deployment and Job."""
    return {
        f"{o['kind']}/{o['metadata']['name']}": o["spec"]["template"]
        for o in rendered(overlay)
        if o["kind"] in ("Deployment", "Job")
    }


def selects(selector: dict, labels: dict) -> bool:
    """A LabelSelector (matchLabels, matchExpressions) applied to ``labels``."""
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return False  # an empty selector would select everything: never what we mean
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        present = key in labels
        if not {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels[key] not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[operator]:
            return False
    return True


def containers(template: dict) -> list[dict]:
    return [*template["spec"].get("initContainers", []), *template["spec"]["containers"]]


def ours(container: dict) -> bool:
    """A container running one of Fanyi's images (before or after an overlay renames it)."""
    return bool(re.search(r"(^|/)(fanyi-|fanyi/)", container["image"]))


def command_of(container: dict) -> list[str]:
    return [*container.get("command", []), *container.get("args", [])]


def env_of(container: dict, config: dict[str, str]) -> dict[str, str]:
    """The container's plain env over the fanyi-config ConfigMap's data (when it loads it)."""
    env = dict(config) if any("configMapRef" in e for e in container.get("envFrom", [])) else {}
    return env | {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def processes(container: dict, env: dict[str, str]) -> int | None:
    command = command_of(container)
    if "--concurrency" in command:
        return int(command[command.index("--concurrency") + 1])
    return int(env["FANYI_CONCURRENCY"]) if "FANYI_CONCURRENCY" in env else None


def cores(quantity: str) -> float:
    return int(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def worker_queue(container: dict) -> str | None:
    command = command_of(container)
    return command[command.index("-Q") + 1] if command[:4] == ["celery", "-A", "worker.app", "worker"] else None


def container_port(template: dict, port: int | str) -> int | None:
    """The number of a container port given by name or number, if the pod has it."""
    for container in template["spec"]["containers"]:
        for p in container.get("ports", []):
            if port in (p.get("name"), p["containerPort"]):
                return p["containerPort"]
    return None


# --- the base's files ----------------------------------------------------------------------------------------


def test_every_manifest_has_its_kind_name_and_a_known_api() -> None:
    for obj in OBJECTS:
        assert obj["kind"] in KNOWN_KINDS.get(obj["apiVersion"], set()) and obj["metadata"]["name"], obj["kind"]
    for generated in KUSTOMIZATION["configMapGenerator"]:
        assert all((BASE / f).exists() for f in generated["files"])
    assert "TriggerAuthentication" not in BY_KIND  # KEDA never talks to Redis


def test_deployments_select_their_own_pods_and_run_our_commands() -> None:
    known = settings_the_code_reads()
    for name, deployment in BY_KIND["Deployment"].items():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items(), name
        check_command(container["args"])
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            if "exec" in container.get(probe, {}):
                check_command(container[probe]["exec"]["command"])
        assert {e["name"] for e in container.get("env", []) if e["name"].startswith("FANYI_")} <= known
        assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    assert set(CONFIG) <= known


def test_workers_outlive_their_longest_chunk_and_gpu_workers_get_one_gpu_each() -> None:
    for name in ("fanyi-worker-cpu", "fanyi-worker-gpu"):
        grace = BY_KIND["Deployment"][name]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert grace > int(CONFIG["FANYI_TIME_LIMIT"]) > int(CONFIG["FANYI_SOFT_TIME_LIMIT"])
    assert int(CONFIG["FANYI_VISIBILITY_TIMEOUT"]) > int(CONFIG["FANYI_TIME_LIMIT"])
    gpu = BY_KIND["Deployment"]["fanyi-worker-gpu"]["spec"]["template"]["spec"]
    assert gpu["nodeSelector"] and gpu["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert processes(gpu["containers"][0], env_of(gpu["containers"][0], CONFIG)) == 1


def test_workers_that_serve_metrics_set_the_multiprocess_folder_before_they_start() -> None:
    """prometheus_client reads PROMETHEUS_MULTIPROC_DIR when first imported, which Celery's command line
    does (flower's plugin) before the worker's metrics module runs: the pod's environment must carry it, on
    an emptyDir."""
    for name in ("fanyi-worker-cpu", "fanyi-worker-gpu"):
        pod = BY_KIND["Deployment"][name]["spec"]["template"]["spec"]
        container = pod["containers"][0]
        env = env_of(container, CONFIG)
        assert int(env["FANYI_METRICS_PORT"]), name
        folder = env.get("PROMETHEUS_MULTIPROC_DIR", "")
        empty = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
        mounts = [m["mountPath"] for m in container["volumeMounts"] if m["name"] in empty]
        assert any(folder.startswith(m.rstrip("/") + "/") for m in mounts), f"{name}: {folder!r} not on an emptyDir"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_deployments_keda_scales_set_no_replicas_of_their_own(overlay: str) -> None:
    """A Deployment's spec.replicas would be put back by every apply, fighting the ScaledObject."""
    targets = {s["spec"]["scaleTargetRef"]["name"] for s in scaled_objects(overlay).values()}
    deployments = by_kind(overlay, "Deployment")
    assert targets and targets <= set(deployments)
    assert [name for name in targets if "replicas" in deployments[name]["spec"]] == []


def test_beat_is_a_single_replica_with_its_lock() -> None:
    beat = BY_KIND["Deployment"]["fanyi-beat"]["spec"]
    assert beat["replicas"] == 1 and beat["strategy"]["type"] == "Recreate"
    assert "jobs.schedules.SpecScheduler" in beat["template"]["spec"]["containers"][0]["args"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlays_patch_objects_the_base_has(overlay: str) -> None:
    kustomization = yaml.safe_load((K8S / "overlays" / overlay / "kustomization.yaml").read_text())
    assert kustomization["resources"][0] == "../../base"
    assert all((K8S / "overlays" / overlay / r).exists() for r in kustomization["resources"])
    for patch in kustomization.get("patches", []):
        body = yaml.safe_load(patch["patch"])
        target = patch.get("target") or {"kind": body["kind"], "name": body["metadata"]["name"]}
        assert target["name"] in BY_KIND[target["kind"]], target


def test_the_prometheus_rule_has_the_groups_of_alerts_yaml() -> None:
    """components/monitoring/prometheusrule.yaml is generated from base/alerts.yaml (sync_rules.py)."""
    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    alerts = yaml.safe_load((BASE / "alerts.yaml").read_text())
    assert rule["kind"] == "PrometheusRule" and rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["spec"]["groups"] == alerts["groups"], (
        "prometheusrule.yaml differs from alerts.yaml: run python infra/k8s/components/monitoring/sync_rules.py"
    )


def test_the_stored_keda_schema_names_its_source() -> None:
    header = KEDA_CRD.read_text().split("\n---", 1)[0]
    assert "kedacore/keda" in header and "config/crd/bases/keda.sh_scaledobjects.yaml" in header
    assert re.search(r"\bv2\.\d+\.\d+\b", header) and re.search(r"\bcommit [0-9a-f]{40}\b", header)
    crd = keda_crd()
    assert crd["spec"]["group"] == "keda.sh" and crd["spec"]["names"]["kind"] == "ScaledObject"


# --- every overlay, rendered ---------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_renders_known_objects_in_its_namespace(overlay: str) -> None:
    objects = rendered(overlay)
    [namespace] = [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"]
    seen = set()
    for obj in objects:
        assert obj["kind"] in KNOWN_KINDS.get(obj["apiVersion"], set()), (obj["apiVersion"], obj["kind"])
        assert (obj["kind"], obj["metadata"]["name"]) not in seen, obj["metadata"]["name"]
        seen.add((obj["kind"], obj["metadata"]["name"]))
        if obj["kind"] not in CLUSTER_SCOPED:
            assert obj["metadata"].get("namespace") == namespace, (obj["kind"], obj["metadata"]["name"])
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "fanyi", obj["metadata"]["name"]


@functools.cache
def keda_crd() -> dict:
    return yaml.safe_load(KEDA_CRD.read_text())


def strict(schema: Any) -> Any:
    """The schema with unknown fields refused, as kubectl's strict field validation does (a CRD's
    structural schema would otherwise drop a misspelt field silently)."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    result = {k: (v if k == "enum" else strict(v)) for k, v in schema.items()}
    if "properties" in result and "additionalProperties" not in result:
        result["additionalProperties"] = False
    return result


def keda_errors(scaled: dict, deployments: dict[str, dict]) -> list[str]:
    """What the API server or KEDA would refuse in ``scaled``: the CRD's openAPIV3Schema (strict), then
    KEDA's rules the schema cannot say (its CEL rule, its webhook's checks, each scaler's metadata)."""
    import jsonschema

    [version] = [v for v in keda_crd()["spec"]["versions"] if v["name"] == scaled["apiVersion"].split("/")[1]]
    validator = jsonschema.Draft7Validator(strict(version["schema"]["openAPIV3Schema"]))
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(scaled)]
    spec = scaled.get("spec", {})
    low, high = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100)
    if not 1 <= high or not low <= high:
        errors.append(f"need 1 <= maxReplicaCount and minReplicaCount <= maxReplicaCount, got {low}, {high}")
    if "idleReplicaCount" in spec and not spec["idleReplicaCount"] < low:
        errors.append("idleReplicaCount must be less than minReplicaCount")
    target = spec.get("scaleTargetRef", {})
    if target.get("kind", "Deployment") != "Deployment" or target.get("name") not in deployments:
        errors.append(f"scaleTargetRef {target} is no Deployment of this overlay")
    triggers = spec.get("triggers", [])
    names = [t["name"] for t in triggers if "name" in t]
    if len(names) != len(set(names)):
        errors.append("trigger names repeat")
    for trigger in triggers:
        kind, metadata = trigger.get("type"), trigger.get("metadata", {})
        if kind not in REQUIRED_METADATA:
            errors.append(f"no rule here for trigger type {kind}: add its required metadata to REQUIRED_METADATA")
            continue
        missing = {key for key in REQUIRED_METADATA[kind] if not metadata.get(key)}
        if missing:
            errors.append(f"{kind} trigger lacks {sorted(missing)}")
        if trigger.get("metricType", "AverageValue") not in ("AverageValue", "Value"):
            errors.append(f"{kind} trigger: metricType {trigger['metricType']} is for cpu and memory only")
        if kind == "metrics-api":
            for key in ("targetValue", "activationTargetValue"):
                if metadata.get(key) and not re.fullmatch(r"\d+(\.\d+)?", metadata[key]):
                    errors.append(f"metrics-api {key} {metadata[key]!r} is no number")
                elif key == "targetValue" and metadata.get(key) and float(metadata[key]) <= 0:
                    errors.append("metrics-api targetValue must be above 0")
            if metadata.get("format", "json") not in ("json", "xml", "yaml", "prometheus"):
                errors.append(f"metrics-api format {metadata['format']} is unknown")
            if metadata.get("url") and urlsplit(metadata["url"]).scheme not in ("http", "https"):
                errors.append(f"metrics-api url {metadata['url']} is not http(s)")
    fallback = spec.get("fallback")
    if fallback is not None:
        if not any(t.get("type") not in ("cpu", "memory") and t.get("metricType", "AverageValue") == "AverageValue"
                   for t in triggers):  # fmt: skip
            errors.append("fallback needs a trigger (not cpu or memory) with metricType AverageValue")
        if not 1 <= fallback.get("replicas", 0) <= high:
            errors.append("fallback.replicas must be at least 1 (a down exporter must not stop every worker) "
                          "and at most maxReplicaCount")  # fmt: skip
    return errors


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_scaled_objects_are_valid_for_keda(overlay: str) -> None:
    deployments = by_kind(overlay, "Deployment")
    found = scaled_objects(overlay)
    assert found
    for name, scaled in found.items():
        assert keda_errors(scaled, deployments) == [], name


def test_the_keda_checks_refuse_what_bit_us() -> None:
    deployments = by_kind("dev", "Deployment")
    good = scaled_objects("dev")["fanyi-worker-cpu"]
    assert keda_errors(good, deployments) == []

    def broken(change: Any) -> list[str]:
        scaled = copy.deepcopy(good)
        change(scaled["spec"])
        return keda_errors(scaled, deployments)

    assert broken(lambda s: s.update(maxReplicaCount=0))  # the old dev GPU ScaledObject
    assert broken(lambda s: s.update(minReplicaCount=3, maxReplicaCount=2))
    assert broken(lambda s: s["triggers"][0]["metadata"].pop("valueLocation"))
    assert broken(lambda s: s["triggers"][0]["metadata"].update(targetValue="eight"))
    assert broken(lambda s: s.update(fallbak=s.pop("fallback")))  # a misspelt field
    assert broken(lambda s: s["fallback"].update(replicas=0))
    assert broken(lambda s: s["fallback"].pop("failureThreshold"))
    assert broken(lambda s: s["triggers"].append({"type": "redis", "metadata": {"listName": "translate.cpu"}}))
    assert broken(lambda s: s["scaleTargetRef"].update(name="fanyi-worker-gpu"))  # not in dev


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_queue_scales_on_its_backlog_read_from_the_exporter(overlay: str) -> None:
    namespace = by_kind(overlay, "Namespace").popitem()[0]
    deployments = by_kind(overlay, "Deployment")
    [(exporter_name, exporter)] = [
        (name, d) for name, d in deployments.items()
        if command_of(d["spec"]["template"]["spec"]["containers"][0])[:3] == ["python", "-m", "worker.exporter"]
    ]  # fmt: skip
    template = exporter["spec"]["template"]
    command = command_of(template["spec"]["containers"][0])
    serving = int(command[command.index("--port") + 1])
    assert container_port(template, serving) == serving, "the exporter serves on a port its container declares"
    services = by_kind(overlay, "Service").values()
    [service] = [s for s in services if selects({"matchLabels": s["spec"]["selector"]}, template["metadata"]["labels"])]
    [port] = [p["port"] for p in service["spec"]["ports"] if container_port(template, p["targetPort"]) == serving]
    host = f"{service['metadata']['name']}.{namespace}.svc"

    queues = {worker_queue(d["spec"]["template"]["spec"]["containers"][0]): name for name, d in deployments.items()}
    queues.pop(None, None)
    backlog = {queue: 8 * (i + 3) for i, queue in enumerate(settings.QUEUES)}  # what /backlog answers
    scaled_queues = set()
    for name, scaled in scaled_objects(overlay).items():
        [trigger] = scaled["spec"]["triggers"]
        assert trigger["type"] == "metrics-api" and trigger["metricType"] == "AverageValue", name
        target = deployments[scaled["spec"]["scaleTargetRef"]["name"]]
        queue = worker_queue(target["spec"]["template"]["spec"]["containers"][0])
        url = urlsplit(trigger["metadata"]["url"])
        assert (url.scheme, url.hostname, url.port, url.path) in {
            ("http", host, port, "/backlog"), ("http", f"{host}.cluster.local", port, "/backlog")
        }, (name, trigger["metadata"]["url"], f"the exporter is {exporter_name} behind {host}:{port}")  # fmt: skip
        location = trigger["metadata"]["valueLocation"]
        try:
            assert value_at(backlog, location) == backlog[queue], f"{name}: {location} is not {queue}'s backlog"
        except KeyError:
            pytest.fail(f"{name}: valueLocation {location} finds nothing in {backlog} (escape the dot: \\.)")
        assert int(trigger["metadata"]["targetValue"]) >= 1
        assert scaled["spec"]["fallback"]["replicas"] >= 1, "a down exporter must not scale the workers to nothing"
        scaled_queues.add(queue)
    assert scaled_queues == set(queues), "every worker Deployment scales on its own queue"


def test_value_at_reads_gjson_paths() -> None:
    backlog = {"translate.cpu": 80, "translate": {"cpu": 1}, "list": [{"a": 2}]}
    assert value_at(backlog, r"translate\.cpu") == 80
    assert value_at(backlog, "translate.cpu") == 1  # unescaped, the dot descends: why ours are escaped
    assert value_at(backlog, "list.0.a") == 2
    with pytest.raises(ValueError):
        value_at(backlog, "list.#.a")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pods_meet_the_restricted_pod_security_standard(overlay: str) -> None:
    [namespace] = by_kind(overlay, "Namespace").values()
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for where, template in pod_templates(overlay).items():
        pod = template["spec"]
        context = pod["securityContext"]
        assert context["runAsNonRoot"] is True and context["runAsUser"] == USER, where
        assert context["seccompProfile"]["type"] == "RuntimeDefault", where
        assert not any(pod.get(host) for host in ("hostNetwork", "hostPID", "hostIPC")), where
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for volume in volumes.values():
            assert set(volume) - {"name"} <= RESTRICTED_VOLUMES, (where, volume)
        for container in containers(template):
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, where
            assert security["capabilities"] == {"drop": ["ALL"]}, where
            assert not security.get("privileged") and security.get("runAsUser", USER) != 0, where
            assert security["readOnlyRootFilesystem"] is True, where
            assert not any("hostPort" in p for p in container.get("ports", [])), where
            mounts = {m["mountPath"]: m for m in container.get("volumeMounts", [])}
            assert "emptyDir" in volumes[mounts["/tmp"]["name"]], f"{where}: /tmp must be a writable emptyDir"
            if "/artifacts" in mounts:
                writes = where.startswith("Job/")
                assert mounts["/artifacts"].get("readOnly", False) is not writes, where
                assert not writes or pod["securityContext"]["fsGroup"] == USER, f"{where} must own /artifacts"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_deployments_have_probes_that_check_what_matters(overlay: str) -> None:
    heartbeat_silence = 6 * settings.HEARTBEAT  # worker.monitoring.health --live fails after this
    for name, deployment in by_kind(overlay, "Deployment").items():
        template = deployment["spec"]["template"]
        for container in template["spec"]["containers"]:
            ready, live = container["readinessProbe"], container["livenessProbe"]
            for probe in (ready, live, container.get("startupProbe", {})):
                if "exec" in probe and ours(container):
                    check_command(probe["exec"]["command"])
                if "httpGet" in probe:
                    assert container_port(template, probe["httpGet"]["port"]), (name, probe)
            if worker_queue(container):
                assert ready["exec"]["command"] == ["python", "-m", "worker.health"], name
                assert live["exec"]["command"] == ["python", "-m", "worker.health", "--live"], name
                start = container.get("startupProbe")
                grace = start["periodSeconds"] * start["failureThreshold"] if start else 0
                grace = max(grace, live.get("initialDelaySeconds", 0))
                assert grace >= 300, f"{name}: model loading gets {grace} s before liveness may kill it"
                assert live["periodSeconds"] * live["failureThreshold"] >= heartbeat_silence, name
                assert live["timeoutSeconds"] >= 5 and ready["timeoutSeconds"] >= 5, f"{name}: python starts slowly"
            elif "beat" in command_of(container):  # its ticks are recorded as a worker's watchdog beats
                assert live["exec"]["command"] == ["python", "-m", "worker.health", "--live"], name
                start = container["startupProbe"]
                assert start["periodSeconds"] * start["failureThreshold"] > 300, f"{name}: RedBeat's lock is 300 s"
            elif command_of(container)[:3] == ["python", "-m", "worker.exporter"]:
                assert ready["httpGet"]["path"] == live["httpGet"]["path"] == "/healthz", name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_worker_processes_match_their_cpu_request(overlay: str) -> None:
    config = by_kind(overlay, "ConfigMap")["fanyi-config"]["data"]
    workers = 0
    for name, deployment in by_kind(overlay, "Deployment").items():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            if not worker_queue(container):
                continue
            workers += 1
            env = env_of(container, config)
            count = processes(container, env)
            assert count, f"{name}: set FANYI_CONCURRENCY (there is no CPU limit to size it from)"
            threads = int(env.get("FANYI_THREADS", settings.THREADS))
            assert count * threads == cores(container["resources"]["requests"]["cpu"]), name
            if "nvidia.com/gpu" in container["resources"].get("limits", {}):
                assert count == 1 == container["resources"]["limits"]["nvidia.com/gpu"], name
    assert workers


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_budgets_services_and_monitors_select_pods_with_their_ports(overlay: str) -> None:
    templates = pod_templates(overlay)
    budgets = by_kind(overlay, "PodDisruptionBudget")
    for name, budget in budgets.items():
        chosen = [w for w, t in templates.items() if selects(budget["spec"]["selector"], t["metadata"]["labels"])]
        assert chosen == [f"Deployment/{name}"], (name, chosen)
        assert "maxUnavailable" in budget["spec"] and "minAvailable" not in budget["spec"], name
    assert "fanyi-worker-cpu" in budgets
    services = by_kind(overlay, "Service")
    for name, service in services.items():
        chosen = [t for t in templates.values() if selects({"matchLabels": service["spec"]["selector"]},
                                                           t["metadata"]["labels"])]  # fmt: skip
        assert chosen, f"Service {name} selects no pods"
        for port in service["spec"]["ports"]:
            assert all(container_port(t, port["targetPort"]) for t in chosen), (name, port)
    for name, monitor in by_kind(overlay, "ServiceMonitor").items():
        chosen = [s for s in services.values() if selects(monitor["spec"]["selector"], s["metadata"]["labels"])]
        assert chosen, f"ServiceMonitor {name} selects no Service"
        for endpoint in monitor["spec"]["endpoints"]:
            assert all(endpoint["port"] in {p.get("name") for p in s["spec"]["ports"]} for s in chosen), name
    for name, monitor in by_kind(overlay, "PodMonitor").items():
        chosen = {w: t for w, t in templates.items() if selects(monitor["spec"]["selector"], t["metadata"]["labels"])}
        assert {w for w, t in templates.items() if worker_queue(t["spec"]["containers"][0])} <= set(chosen), name
        for endpoint in monitor["spec"]["podMetricsEndpoints"]:
            assert all(container_port(t, endpoint["port"]) for t in chosen.values()), name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_references_resolve_inside_the_overlay(overlay: str) -> None:
    """Every ConfigMap, Secret (key) and claim a pod names is rendered, or is one the base documents as
    external (fanyi-secrets), which overlays/dev must generate itself."""
    objects = {(o["kind"], o["metadata"]["name"]): o for o in rendered(overlay)}
    external = set() if overlay == "dev" else EXTERNAL

    def check(kind: str, name: str, key: str | None = None) -> None:
        if (kind, name) in external:
            return
        assert (kind, name) in objects, f"{overlay}: {kind} {name} is not rendered"
        if key is not None:
            assert key in objects[kind, name].get("data", {}), f"{overlay}: {kind} {name} has no {key}"

    for template in pod_templates(overlay).values():
        for container in containers(template):
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    check("ConfigMap", source["configMapRef"]["name"])
                if "secretRef" in source:
                    check("Secret", source["secretRef"]["name"])
            for variable in container.get("env", []):
                ref = variable.get("valueFrom", {})
                if "secretKeyRef" in ref:
                    check("Secret", ref["secretKeyRef"]["name"], ref["secretKeyRef"]["key"])
                if "configMapKeyRef" in ref:
                    check("ConfigMap", ref["configMapKeyRef"]["name"], ref["configMapKeyRef"]["key"])
        for volume in template["spec"].get("volumes", []):
            if "persistentVolumeClaim" in volume:
                check("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    known = settings_the_code_reads()
    assert set(objects["ConfigMap", "fanyi-config"]["data"]) <= known


# --- each overlay's own promises -----------------------------------------------------------------------------


def secret_data(secret: dict) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()} | secret.get("stringData", {})


def service_address(overlay: str, url: str) -> tuple[str, int]:
    """(Service name, port) that ``url`` reaches from a pod of the overlay's namespace."""
    parts = urlsplit(url)
    service = by_kind(overlay, "Service")[parts.hostname]
    assert parts.port in [p["port"] for p in service["spec"]["ports"]], url
    return parts.hostname, parts.port


def test_dev_runs_on_its_own_without_gpu_objects() -> None:
    text = json.dumps([o for o in rendered("dev") if o["kind"] != "ConfigMap"])  # not the dashboard's queries
    assert "nvidia.com/gpu" not in text and "fanyi-worker-gpu" not in text and "translate.gpu" not in text
    deployments = by_kind("dev", "Deployment")
    secrets = {name.rsplit("-", 1)[0]: s for name, s in by_kind("dev", "Secret").items()}  # generated: name-hash
    assert set(secrets) == {"fanyi-secrets", "fanyi-api-tokens"}
    data = secret_data(secrets["fanyi-secrets"])
    team, token = secret_data(secrets["fanyi-api-tokens"])["tokens"].split()  # what jobs.server.load_tokens reads
    assert team == "dev" and len(token) >= 16
    assert data["FANYI_BROKER_URL"] == "redis://redis:6379/0"
    assert service_address("dev", data["FANYI_BROKER_URL"]) == ("redis", 6379)
    assert data["AWS_ACCESS_KEY_ID"] and data["AWS_SECRET_ACCESS_KEY"]
    config = by_kind("dev", "ConfigMap")["fanyi-config"]["data"]
    assert service_address("dev", config["FANYI_S3_ENDPOINT_URL"])[0] == "minio"
    artifact = by_kind("dev", "Job")["fanyi-build-artifact"]["spec"]["template"]["spec"]["containers"][0]
    assert config["FANYI_ARTIFACT"] == "/artifacts/demo"
    assert artifact["args"][:3] == ["demo", "--out", "/artifacts/demo"]
    minio = deployments["minio"]["spec"]["template"]["spec"]["containers"][0]
    credentials = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in minio["env"] if "valueFrom" in e}
    assert {k: v["key"] for k, v in credentials.items()} == {
        "MINIO_ROOT_USER": "AWS_ACCESS_KEY_ID", "MINIO_ROOT_PASSWORD": "AWS_SECRET_ACCESS_KEY"
    }  # fmt: skip
    bucket = yaml.safe_load((ROOT / "examples" / "compose-job.yaml").read_text())["output"].split("/")[2]
    assert any(f"mc mb --ignore-existing local/{bucket}" in " ".join(command_of(t["spec"]["containers"][0]))
               for t in pod_templates("dev").values())  # fmt: skip
    for template in pod_templates("dev").values():
        for container in containers(template):
            if not ours(container):
                name, _, tag = container["image"].rpartition(":")
                assert name and re.search(r"\d", tag) and tag != "latest", f"{container['image']} is not pinned"
    assert all(s["spec"]["maxReplicaCount"] >= 1 for s in scaled_objects("dev").values())


def test_prod_pins_our_images_and_includes_monitoring() -> None:
    for template in pod_templates("prod").values():
        for container in containers(template):
            assert re.fullmatch(r"[a-z0-9.-]+/fanyi/[a-z-]+:\d+\.\d+\.\d+", container["image"]), container["image"]
    [rule] = by_kind("prod", "PrometheusRule").values()
    assert rule["spec"]["groups"] == yaml.safe_load((BASE / "alerts.yaml").read_text())["groups"]
    assert by_kind("prod", "ServiceMonitor") and by_kind("prod", "PodMonitor")


# --- metric names --------------------------------------------------------------------------------------------


def exported_metric_names(redis_url: str) -> set[str]:
    """Every sample name the worker and the exporter serve."""
    import redis as redis_client

    from contract import cache
    from worker.monitoring import exporter, metrics
    from worker.monitoring.exporter import QueueCollector

    names = set()
    for value in vars(metrics).values():
        if hasattr(value, "collect") and hasattr(value, "_name"):
            suffixes = ("_total",) if value._type == "counter" else ("_bucket", "_count", "_sum")
            names |= {value._name + suffix for suffix in suffixes}
    redis_client.Redis.from_url(redis_url).ping()
    caches = [f for f in (cache.cache, getattr(exporter, "broker", None)) if hasattr(f, "cache_clear")]
    for f in caches:
        f.cache_clear()
    saved = settings.CACHE_URL, settings.BROKER_URL
    settings.CACHE_URL = settings.BROKER_URL = redis_url
    try:
        names |= {family.name for family in QueueCollector().collect()}
    finally:
        settings.CACHE_URL, settings.BROKER_URL = saved
        for f in caches:
            f.cache_clear()
    return names


def expressions(node: Any) -> list[str]:
    """Every ``expr`` in a dashboard, nested panels (rows) included."""
    if isinstance(node, dict):
        own = [node["expr"]] if isinstance(node.get("expr"), str) else []
        return own + [e for v in node.values() for e in expressions(v)]
    return [e for v in node for e in expressions(v)] if isinstance(node, list) else []


def test_dashboard_and_alerts_use_only_metrics_the_code_exports(redis_url) -> None:
    exported = exported_metric_names(redis_url)
    queries = expressions(json.loads((BASE / "dashboard.json").read_text()))
    rules = [rule for group in yaml.safe_load((BASE / "alerts.yaml").read_text())["groups"] for rule in group["rules"]]
    queries += [rule["expr"] for rule in rules]
    used = {name for q in queries for name in re.findall(r"\bfanyi_[a-z_]+\b", q)}
    assert used and used <= exported, used - exported
    assert {r["alert"] for r in rules} >= {"FanyiQueueBacklog", "FanyiNoWorkers", "FanyiErrorRate", "FanyiJobStuck"}
