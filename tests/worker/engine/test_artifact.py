"""The worker refuses artifacts that fail their hashes or whose id is not their content's, before ONNX Runtime
sees them, and notices a file that changes under an artifact it uses."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from worker.engine.artifact import MANIFEST, Artifact, ArtifactError, file_entries, seal
from worker.engine.translator import Translator


def test_tampered_weights_are_refused_naming_the_file(artifact_copy) -> None:
    root = artifact_copy("opus-mt-en-zh")
    weights = root / "int8" / "weights.bin"
    data = bytearray(weights.read_bytes())
    data[100] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="int8/weights.bin: content changed"):
        Translator(root)


def test_missing_manifest_says_how_to_build_one(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="python -m export_tools build"):
        Artifact.load(tmp_path)


def test_asking_for_a_precision_the_artifact_lacks_says_how_to_get_it(artifacts) -> None:
    with pytest.raises(ArtifactError, match="--precision fp16"):
        Translator(artifacts["t5-small"], precision="fp16")


def flip_a_byte(path: Path, at: int = 100) -> None:
    with open(path, "r+b") as f:  # in place: same inode, same size
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_a_file_changed_with_its_hash_in_the_manifest_is_another_artifact(artifact_copy) -> None:
    root = artifact_copy("opus-mt-en-zh")
    before = Artifact.load(root).artifact_id
    flip_a_byte(root / "int8" / "weights.bin")
    manifest = json.loads((root / MANIFEST).read_text())
    manifest["files"] = file_entries(root)  # the new hash written in, the id left as it was
    (root / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="not its content's"):
        Artifact.load(root, verify=False)  # even without hashing the files: the id is checked always
    assert seal(root, manifest)["artifact_id"] != before  # sealed again: a new id, which jobs of the old refuse
    assert Artifact.load(root).artifact_id == manifest["artifact_id"]


def test_a_byte_changed_under_a_loaded_artifact_discards_what_was_translated(artifact_copy) -> None:
    root = artifact_copy("opus-mt-en-zh")
    translator = Translator(root)
    translator.translate_batch(["Tom has 3 apples."])
    flip_a_byte(root / "int8" / "weights.bin", at=(root / "int8" / "weights.bin").stat().st_size // 2)
    with pytest.raises(ArtifactError, match=r"changed while in use \(int8/weights.bin\)"):
        translator.translate_batch(["Tom has 3 apples."])


def test_a_file_replaced_under_a_loaded_artifact_is_seen(artifact_copy) -> None:
    root = artifact_copy("opus-mt-en-zh")
    artifact = Artifact.load(root)
    artifact.check_unchanged()
    config = root / "generation_config.json"
    copy = root.parent / "copy.json"
    shutil.copy2(config, copy)  # the same bytes and modification time, a new inode
    os.replace(copy, config)
    with pytest.raises(ArtifactError, match="generation_config.json"):
        artifact.check_unchanged()
