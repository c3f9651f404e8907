"""The quality gate scores every precision and refuses INT8 that trails fp32 by too much.

On the demo artifact: a trained model stops at its EOS, where a random one writes to its length limit
(512 tokens a sentence, a second a sentence per precision)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.export_tools.conftest import run_cli


@pytest.fixture
def demo_copy(demo_artifact: Path, tmp_path: Path) -> Path:
    """A private copy: verify writes its report into the artifact."""
    return Path(shutil.copytree(demo_artifact, tmp_path / "demo"))


def test_int8_trailing_fp32_by_more_than_allowed_is_refused_and_the_report_says_by_how_much(
    demo_copy: Path, tmp_path: Path
) -> None:
    dev = tmp_path / "dev.tsv"
    dev.write_text("Tom has 3 apples.\nThe meeting starts at 9 am.\nAnna went to the park today.\n")
    # A threshold below any drop: INT8 may or may not drift from fp32 on three sentences.
    result = run_cli("verify", str(demo_copy), "--dev-set", str(dev), "--max-bleu-drop=-1")
    report = json.loads((demo_copy / "report.json").read_text())["quality"]
    assert report["against"] == "fp32 outputs"
    assert report["scores"]["fp32"]["bleu"] == 100.0
    assert report["scores"]["int8"]["bleu_drop"] == round(100.0 - report["scores"]["int8"]["bleu"], 2)
    assert report["scores"]["int8"]["accepted"] is False
    assert result.returncode == 1
    assert "int8 BLEU is" in result.stderr and "below fp32" in result.stderr


def test_a_generous_threshold_accepts_the_same_artifact(demo_copy: Path, tmp_path: Path) -> None:
    dev = tmp_path / "dev.jsonl"
    dev.write_text(json.dumps({"source": "Tom has 3 apples.", "reference": "汤姆有3个苹果。"}) + "\n")
    result = run_cli("verify", str(demo_copy), "--dev-set", str(dev), "--max-bleu-drop", "100")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["quality"]["against"] == "references"
