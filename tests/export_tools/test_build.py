"""export_tools build/verify on tiny random models of every architecture."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from export_tools.build import build
from export_tools.fixtures.tiny import ARCHS
from export_tools.precision import op_counts
from export_tools.verify import VerificationError

pytestmark = pytest.mark.parametrize("arch", ARCHS)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "export_tools", *args], capture_output=True, text=True)


def test_fp32_generation_is_token_identical_to_generate(arch: str, artifacts: dict[str, Path]) -> None:
    report = json.loads((artifacts[arch] / "report.json").read_text())
    fp32 = report["parity"]["fp32"]
    assert fp32["logit_max_rel_diff"] <= 1e-4
    assert [g["beams"] for g in fp32["generate"]] == [1, 4]
    assert all(g["identical"] for g in fp32["generate"]), fp32["generate"]


def test_verify_passes_on_an_intact_artifact(arch: str, artifacts: dict[str, Path]) -> None:
    result = run_cli("verify", str(artifacts[arch]))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["hashes"] == "ok"


def test_flipping_one_byte_of_any_onnx_file_fails_verify_naming_it(arch: str, artifact_copy) -> None:
    root = artifact_copy(arch)
    for path in sorted(root.rglob("*.onnx")):
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
        result = run_cli("verify", str(root))
        rel = path.relative_to(root).as_posix()
        assert result.returncode != 0
        assert rel in result.stderr, result.stderr
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
    assert run_cli("verify", str(root)).returncode == 0


def test_missing_and_unlisted_files_are_named(arch: str, artifact_copy) -> None:
    root = artifact_copy(arch)
    (root / "int8" / "weights.bin").unlink()
    (root / "stray.txt").write_text("not part of the artifact")
    result = run_cli("verify", str(root))
    assert result.returncode != 0
    assert "int8/weights.bin: missing" in result.stderr
    assert "stray.txt: not listed" in result.stderr


def test_int8_decoder_that_the_worker_loads_is_quantized(arch: str, artifacts: dict[str, Path]) -> None:
    manifest = json.loads((artifacts[arch] / "manifest.json").read_text())
    decoder = onnx.load(str(artifacts[arch] / manifest["precisions"]["int8"]["graphs"]["decoder"]))
    counts = op_counts(decoder)
    quantized = manifest["precisions"]["int8"]["quantization"]["decoder"]["quantized_matmul"]
    assert counts.get("MatMulInteger", 0) == quantized > 0
    layers = manifest["model"]["decoder_layers"]
    # What stays float is activation x activation: two MatMuls per attention block.
    assert counts.get("MatMul", 0) == 4 * layers


def test_weights_are_stored_once(arch: str, artifacts: dict[str, Path], tiny_models: dict[str, Path]) -> None:
    from transformers import AutoModelForSeq2SeqLM

    model = AutoModelForSeq2SeqLM.from_pretrained(tiny_models[arch])
    unique = {p.data_ptr(): p.numel() * 4 for p in model.parameters()}
    manifest = json.loads((artifacts[arch] / "manifest.json").read_text())
    fp32 = manifest["precisions"]["fp32"]
    assert fp32["stored_bytes"] < fp32["referenced_bytes"]
    # At most the model's own parameters (+ position tables, alignment padding), never a second copy.
    table = model.config.vocab_size * model.config.d_model * 4
    assert fp32["stored_bytes"] < sum(unique.values()) + table // 2


def test_manifest_records_what_the_worker_needs(arch: str, artifacts: dict[str, Path], tiny_models) -> None:
    manifest = json.loads((artifacts[arch] / "manifest.json").read_text())
    config = json.loads((tiny_models[arch] / "config.json").read_text())
    special = manifest["special_tokens"]
    assert special["decoder_start_token_id"] == config["decoder_start_token_id"]
    assert special["eos_token_id"] == config["eos_token_id"]
    assert special["pad_token_id"] == config["pad_token_id"]
    assert manifest["source"]["content_sha256"]
    assert manifest["opset"] and manifest["versions"]["onnxruntime"]
    for precision in manifest["precisions"].values():
        assert "past.0.key" in precision["io"]["decoder"]["inputs"]
        assert "present.0.key" in precision["io"]["decoder"]["outputs"]
    assert all(len(entry["sha256"]) == 64 for entry in manifest["files"].values())


def test_existing_output_is_refused_without_force(arch: str, artifacts: dict[str, Path], tiny_models) -> None:
    result = run_cli("build", str(tiny_models[arch]), "--out", str(artifacts[arch]), "--skip-parity")
    assert result.returncode == 1
    assert "already exists" in result.stderr and "--force" in result.stderr


def test_a_failed_build_leaves_nothing_behind(arch: str, tiny_models, tmp_path: Path) -> None:
    def refuse(source, root):
        raise VerificationError("refused on purpose")

    with pytest.raises(VerificationError):
        build(str(tiny_models[arch]), tmp_path / "out", ["fp32"], verify=refuse)
    assert list(tmp_path.iterdir()) == []


def test_every_precision_stays_finite_on_the_check_set(arch: str, artifacts: dict[str, Path]) -> None:
    report = json.loads((artifacts[arch] / "report.json").read_text())
    assert report["finite_outputs"] and all(report["finite_outputs"].values())
