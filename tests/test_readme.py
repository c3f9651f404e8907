"""What the README promises a new user: its settings table is the one ``contract/settings.py`` reads,
and its local example job is runnable as written."""

from __future__ import annotations

import re
from pathlib import Path

from jobs.spec import load_spec
from scripts.settings_table import READERS, README, ROOT, SETTINGS, readme_table, rows, table


def test_the_readme_lists_every_setting_as_the_settings_module_reads_it() -> None:
    assert readme_table(README.read_text()) == table(), "run `python -m scripts.settings_table --write`"


def test_the_table_has_a_row_for_each_fanyi_variable_the_settings_read() -> None:
    read = set(re.findall(READERS + r'\("(FANYI_\w+)"', SETTINGS.read_text()))
    assert read >= {"FANYI_THREADS", "FANYI_BROKER_URL", "FANYI_S3_ENDPOINT_URL"}
    assert set(re.findall(r'"(FANYI_\w+)"', SETTINGS.read_text())) == read  # every variable through a reader
    assert {name for name, _, _ in rows(SETTINGS.read_text())} == read  # none without its comment
    example = 'X = _integer("FANYI_X", "7", 1)  # sev|en\nY = _redis_url("FANYI_Y", X)  # as x\n'
    example += 'Z = _optional("FANYI_Z")  # z'
    assert rows(example) == [
        ("FANYI_X", "`7`", "sev\\|en"),
        ("FANYI_Y", "as `FANYI_X`", "as x"),
        ("FANYI_Z", "unset", "z"),
    ]


def test_the_local_example_job_names_the_corpus_the_demo_artifact_and_results_of_this_checkout() -> None:
    spec = load_spec(ROOT / "examples" / "local-job.yaml")
    assert [Path(p) for p in spec.inputs] == [ROOT / "examples" / "corpus.jsonl"]
    assert (ROOT / "examples" / "corpus.jsonl").is_file()
    assert (Path(spec.output), Path(spec.artifact)) == (ROOT / "results", ROOT / "artifacts" / "demo")
    assert "python -m jobs submit examples/local-job.yaml" in README.read_text()
