"""The worker's metrics say what the code counts."""

from __future__ import annotations

import re
from pathlib import Path

from worker.monitoring import metrics
from worker.runtime.faults import Fault

WORKER = Path(metrics.__file__).resolve().parents[1]


def test_the_errors_help_lists_exactly_the_kinds_the_worker_counts() -> None:
    counted: set[str] = set()
    for path in sorted(WORKER.rglob("*.py")):
        for argument in re.findall(r"ERRORS\.labels\(kind=([^)]*)\)", path.read_text()):
            if argument == "fault.value":  # worker.runtime.chunk_task: a classified fault
                counted |= {fault.value for fault in Fault}
            else:
                assert re.fullmatch(r'"\w+"', argument), f"{path}: a kind this test cannot read: {argument}"
                counted.add(argument.strip('"'))
    (family,) = metrics.ERRORS.describe()
    listed = re.fullmatch(r"Errors by kind \((.+)\)", family.documentation)
    assert listed, family.documentation
    kinds = listed.group(1).split(", ")
    assert len(kinds) == len(set(kinds)) and set(kinds) == counted, (kinds, sorted(counted))
    assert {"document", "poison", "time_limit", "handler", "job_gone", "transient", "environment", "chunk"} <= counted
