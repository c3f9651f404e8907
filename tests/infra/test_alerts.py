"""Alert rules: valid for Prometheus, and each one unit-tested with promtool (tests/infra/alerts_test.yaml).

promtool comes with Debian's ``prometheus`` package (``.ci/run`` installs it). Without it these tests
skip, except under CI (``CI`` set), where a missing promtool is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "infra" / "k8s" / "base" / "alerts.yaml"
UNIT_TESTS = Path(__file__).with_name("alerts_test.yaml")


def promtool(*args: str) -> subprocess.CompletedProcess:
    tool = shutil.which("promtool")
    if tool is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing: .ci/run installs Debian's prometheus package")
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=120)


def test_the_rules_are_valid_prometheus_rules() -> None:
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_alert_fires_when_it_should_and_names_what_it_is_about() -> None:
    tested = promtool("test", "rules", str(UNIT_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_rule_has_a_unit_test_that_sees_it_fire() -> None:
    rules = {rule["alert"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]}
    firing = {
        case["alertname"]
        for test in yaml.safe_load(UNIT_TESTS.read_text())["tests"]
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    assert firing == rules
