"""The worker refuses artifacts that fail their hashes, before ONNX Runtime sees them."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.artifact import Artifact, ArtifactError
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
