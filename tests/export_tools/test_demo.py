"""The demo model really translates its domain, in fp32 and both INT8s, through the worker's CLI."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from export_tools.cli import DEMO_CHECKPOINT, DEMO_DEV_SET
from export_tools.fixtures.demo_corpus import calibration_set, pairs


def test_the_checkpoint_is_small_and_was_trained_to_the_floor() -> None:
    """The committed checkpoint itself, loaded and run here (not the figures its report states), translates
    held-out text exactly as the references do: the report's own test streams, none of it seen in training."""
    import torch
    from transformers import MarianMTModel, MarianTokenizer

    from export_tools.fixtures import train_demo

    size = sum(p.stat().st_size for p in DEMO_CHECKPOINT.iterdir())
    assert size <= 20 * 2**20
    trained = json.loads((DEMO_CHECKPOINT / "train_report.json").read_text())
    seen = {p.en for p in pairs(train_demo.TRAIN_SEED, trained["args"]["examples"], max_sentences=4)}
    sentences = train_demo.held_out(train_demo.TEST_SEED, 1000, seen, 1)
    paragraphs = train_demo.held_out(train_demo.TEST_SEED + 10, 200, seen, 4)
    assert (len(sentences), len(paragraphs)) == (trained["test_sentences"], trained["test_paragraphs"])
    tokenizer = MarianTokenizer.from_pretrained(DEMO_CHECKPOINT)
    model = MarianMTModel.from_pretrained(DEMO_CHECKPOINT, dtype=torch.float32)
    assert train_demo.exact_match(model, tokenizer, sentences[:192]) >= 0.95
    assert train_demo.exact_match(model, tokenizer, paragraphs[:48]) >= 0.95


def test_demo_build_passes_parity_and_the_quality_gate(demo_artifact: Path) -> None:
    report = json.loads((demo_artifact / "report.json").read_text())
    assert all(g["identical"] for g in report["parity"]["fp32"]["generate"])
    scores = report["quality"]["scores"]
    assert report["quality"]["against"] == "references"
    assert scores["fp32"]["exact_match"] >= 0.95
    assert scores["int8"]["accepted"] and scores["int8"]["bleu_drop"] <= 0.5
    assert scores["int8-static"]["accepted"] and scores["int8-static"]["bleu_drop"] <= 0.5


def test_static_int8_records_the_set_it_was_calibrated_on(demo_artifact: Path) -> None:
    entry = json.loads((demo_artifact / "manifest.json").read_text())["precisions"]["int8-static"]
    sentences = calibration_set()
    assert entry["calibration"]["sentences"] == len(sentences) == 256
    assert entry["calibration"]["sha256"] == hashlib.sha256("".join(f"{s}\n" for s in sentences).encode()).hexdigest()


def test_worker_cli_prints_the_reference_translations(demo_artifact: Path) -> None:
    rows = [json.loads(line) for line in DEMO_DEV_SET.read_text().splitlines()[:12]]
    result = subprocess.run(
        [sys.executable, "-m", "worker", "translate", "--artifact", str(demo_artifact)],
        input="".join(r["source"] + "\n" for r in rows),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    got = result.stdout.splitlines()
    matches = sum(g == r["reference"] for g, r in zip(got, rows))
    assert matches >= 11, list(zip(got, (r["reference"] for r in rows)))


def test_demo_help_explains_out_and_force() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "export_tools", "demo", "--help"], capture_output=True, text=True)
    text = " ".join(done.stdout.split())
    assert done.returncode == 0
    assert "artifact directory to create" in text and "replace an existing --out" in text
