"""Bad models get one line that says what to do, exit 1, and no half-written artifact."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.export_tools.conftest import run_cli


def assert_refused(src: Path, out: Path, *needles: str) -> None:
    result = run_cli("build", str(src), "--out", str(out), "--skip-parity")
    assert result.returncode == 1, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0]
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]


def test_missing_model_directory(tmp_path: Path) -> None:
    src = tmp_path / "no-such-model"
    src.mkdir()
    assert_refused(src, tmp_path / "out", "config.json is missing", "save_pretrained")


def test_corrupt_config(tiny_models, tmp_path: Path) -> None:
    src = Path(shutil.copytree(tiny_models["opus-mt-en-zh"], tmp_path / "src"))
    (src / "config.json").write_text("{ not json")
    assert_refused(src, tmp_path / "out", "config.json is not valid JSON")


def test_missing_weights(tiny_models, tmp_path: Path) -> None:
    src = Path(shutil.copytree(tiny_models["opus-mt-en-zh"], tmp_path / "src"))
    (src / "model.safetensors").unlink()
    assert_refused(src, tmp_path / "out", "weights are missing")


def test_unsupported_architecture_names_the_supported_ones(tiny_models, tmp_path: Path) -> None:
    src = Path(shutil.copytree(tiny_models["opus-mt-en-zh"], tmp_path / "src"))
    config = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps(config | {"model_type": "bart"}))
    assert_refused(src, tmp_path / "out", "unsupported architecture 'bart'", "marian", "m2m100", "t5")


def test_model_without_generation_config(tiny_models, tmp_path: Path) -> None:
    src = Path(shutil.copytree(tiny_models["opus-mt-en-zh"], tmp_path / "src"))
    (src / "generation_config.json").unlink()
    assert_refused(src, tmp_path / "out", "no generation_config.json")


def test_tokenizer_of_another_model_is_refused(tiny_models, tmp_path: Path) -> None:
    src = Path(shutil.copytree(tiny_models["opus-mt-en-zh"], tmp_path / "src"))
    vocab = json.loads((src / "vocab.json").read_text())
    bigger = {piece: i + 5000 for piece, i in vocab.items()}  # a vocabulary 5,000 ids larger than the model's
    (src / "vocab.json").write_text(json.dumps(bigger))
    assert_refused(src, tmp_path / "out", "belongs to another model")


@pytest.mark.parametrize(
    ("precisions", "says"), [(["int8"], "fp32 (always needed"), (["fp32", "bf16"], "invalid choice: 'bf16'")]
)
def test_precision_list_needs_fp32_and_known_names(tiny_models, tmp_path: Path, precisions: list[str], says) -> None:
    result = run_cli(
        "build", str(tiny_models["opus-mt-en-zh"]), "--out", str(tmp_path / "o"), "--precision", *precisions
    )
    assert result.returncode != 0 and says in result.stderr, result.stderr
    assert not (tmp_path / "o").exists()


def test_static_int8_without_a_calibration_set_is_refused_before_loading(tmp_path: Path) -> None:
    result = run_cli(
        "build", str(tmp_path / "never-read"), "--out", str(tmp_path / "o"), "--precision", "fp32", "int8-static"
    )
    assert result.returncode == 1
    assert "int8-static needs --calibration-set FILE" in result.stderr
    assert not (tmp_path / "o").exists()


def test_a_full_disk_is_reported_and_leaves_nothing(tiny_models, tmp_path: Path, monkeypatch) -> None:
    import errno

    from export_tools import build as build_module
    from export_tools.architectures import ExportError

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(build_module, "save_shared", disk_full)
    with pytest.raises(ExportError, match="no space left on the device.*free space"):
        build_module.build(str(tiny_models["opus-mt-en-zh"]), tmp_path / "out", ["fp32"])
    assert list(tmp_path.iterdir()) == []
