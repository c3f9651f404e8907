"""A job's options are defined once (``contract.options.JobOptions``): the spec's schema, the worker's
command line and the worker's defaults all come from there."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from contract.options import JobOptions
from contract.spec import SCHEMA, JobSpec, SpecError
from tests.services import ROOT
from worker.__main__ import parser

FAKE = """    glossary_strength: int = option(2, "how hard terms are held", minimum=0, maximum=3)\n"""
PROBE = """
import json
from contract.job import Job, read_job, write_job
from contract.spec import SCHEMA, JobSpec
from contract.storage import open_storage
from worker.__main__ import parser
from worker.documents.translator import DEFAULTS

schema = SCHEMA["properties"]["options"]["properties"]["glossary_strength"]
default = parser().parse_args(["translate", "--artifact", "a"]).glossary_strength
flag = parser().parse_args(["translate", "--artifact", "a", "--glossary-strength", "3"]).glossary_strength
raw = {"name": "n", "inputs": ["i"], "output": "o", "artifact": "a"}
spec = JobSpec.from_dict({**raw, "options": {"glossary_strength": 1}})
write_job(open_storage("jobs"), Job("n-1", spec, "artifact-id", [1]))
manifest = read_job(open_storage("jobs"), "n-1").spec.options.glossary_strength
print(json.dumps([schema, default, flag, manifest, DEFAULTS.glossary_strength]))
"""


def test_an_option_added_in_one_place_is_in_the_schema_the_cli_and_the_worker(tmp_path: Path) -> None:
    contract = shutil.copytree(ROOT / "contract", tmp_path / "contract")
    options = contract / "options.py"
    text = options.read_text()
    anchor = "    @classmethod\n    def schema(cls)"
    assert anchor in text
    options.write_text(text.replace(anchor, FAKE + "\n" + anchor, 1))  # the one edit
    # the copy of contract/ first on the path (the folder it runs in); worker/ and jobs/ as installed
    found = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert found.returncode == 0, found.stderr[-2000:]
    schema, default, flag, manifest, worker_default = json.loads(found.stdout)
    assert schema == {"type": "integer", "minimum": 0, "maximum": 3}
    assert (default, flag, manifest, worker_default) == (2, 3, 1, 2)


def test_the_spec_schema_and_the_cli_take_the_options_bounds_from_joboptions() -> None:
    assert SCHEMA["properties"]["options"] == JobOptions.schema()
    args = parser().parse_args(["translate", "--artifact", "a", "--beam", "4", "--format", "html"])
    assert JobOptions.from_arguments(args) == JobOptions(beam_size=4, format="html")
    with pytest.raises(SystemExit):  # argparse: "argument --beam: 17 is not within 1..16", exit 2
        parser().parse_args(["translate", "--artifact", "a", "--beam", "17"])
    with pytest.raises(SpecError, match="options/beam_size: 17 is greater than the maximum of 16"):
        JobSpec.from_dict({"name": "n", "inputs": ["i"], "output": "o", "artifact": "a", "options": {"beam_size": 17}})


def test_only_the_decoding_options_that_are_set_go_to_the_engine() -> None:
    options = JobOptions(beam_size=2, target_language="zh", overlap=3, format="markdown")
    assert options.decoding() == {"beam_size": 2, "target_language": "zh"}
    assert JobOptions().decoding() == {}  # the model's own generation config


def test_a_manifest_keeps_the_options_the_job_ran_with(tmp_path: Path) -> None:
    spec = JobSpec.from_dict({"name": "n", "inputs": ["i"], "output": "o", "artifact": "a", "options": {"budget": 32}})
    assert spec.to_dict()["options"] == {"overlap": 1, "budget": 32, "format": "text"}
    assert JobSpec.from_dict(spec.to_dict()) == spec
