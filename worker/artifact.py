"""An artifact directory: manifest, graphs per precision, tokenizer, generation config.

Every file is listed in ``manifest.json`` with its size and sha256; ``Artifact.load`` checks all
of them before anything is handed to ONNX Runtime, so a tampered or half-copied artifact is
refused with the name of the file that is wrong.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

# 2: per-request languages in the tokenizer section, bans and log_mass in the decoder graph;
# 3: the decoder reads the self-attention cache through cache_index and returns only the new K/V;
#    the weights both graphs read are listed (shared_weights);
# 4: the decoder returns the full logits only for the rows logit_rows asks for;
# 5: top_logprobs are renormalized over what the bans left (log_mass turns them back);
# 6: the token table is stored (vocab, d_model) and looked up by the worker (token_table, token_rows)
ARTIFACT_FORMAT = 6
MANIFEST = "manifest.json"
REPORT = "report.json"  # written after the hashes (it holds verification results), so not hashed
PRECISIONS = ("fp32", "int8", "int8-static", "fp16")  # what an artifact may hold (export_tools/precision.py)
UNHASHED = {MANIFEST, REPORT}
TOKEN_ROWS = "token_rows"  # the stored graphs' input: the rows of the token table the worker looked up


class StoredTensor(TypedDict):
    """Where a tensor lies in a precision's ``weights.bin``."""

    offset: int
    length: int
    dtype: str
    shape: list[int]


class SharedWeights(StoredTensor):
    """A tensor that more than one graph reads (positions, the token table's scales), with each graph's
    initializer names for it: the worker maps it once for all its sessions."""

    names: dict[str, list[str]]


class ArtifactError(Exception):
    """The artifact is missing, incomplete or altered; the message names the file."""


def sha256_file(path: Path, block: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def file_entries(root: Path) -> dict[str, dict[str, Any]]:
    """``{relative path: {size, sha256}}`` for every file under ``root`` except the manifest and report."""
    entries = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel not in UNHASHED:
            entries[rel] = {"size": path.stat().st_size, "sha256": sha256_file(path)}
    return entries


def file_problems(root: Path, listed: dict[str, dict[str, Any]]) -> list[str]:
    """Human-readable problems: changed, missing or unlisted files (empty when all is well)."""
    problems = []
    present = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} - UNHASHED
    for rel in sorted(set(listed) - present):
        problems.append(f"{rel}: missing")
    for rel in sorted(present - set(listed)):
        problems.append(f"{rel}: not listed in the manifest")
    for rel in sorted(present & set(listed)):
        path, entry = root / rel, listed[rel]
        if path.stat().st_size != entry["size"] or sha256_file(path) != entry["sha256"]:
            problems.append(f"{rel}: content changed (sha256 differs from the manifest)")
    return problems


@dataclass(frozen=True)
class Artifact:
    root: Path
    manifest: dict[str, Any]

    @classmethod
    def load(cls, root: str | Path, *, verify: bool = True) -> Artifact:
        root = Path(root)
        try:
            manifest = json.loads((root / MANIFEST).read_text())
        except FileNotFoundError:
            raise ArtifactError(
                f"{root / MANIFEST} not found: build an artifact with `python -m export_tools build`"
            ) from None
        except json.JSONDecodeError as err:
            raise ArtifactError(f"{root / MANIFEST} is corrupt ({err}): rebuild the artifact") from None
        if manifest.get("format") != ARTIFACT_FORMAT:
            raise ArtifactError(
                f"artifact {root} has format {manifest.get('format')}, this worker reads format {ARTIFACT_FORMAT}: "
                "rebuild it with `python -m export_tools build` (or `demo`) from this version"
            )
        if verify:
            problems = file_problems(root, manifest["files"])
            if problems:
                raise ArtifactError(f"artifact {root} failed verification: " + "; ".join(problems))
        return cls(root, manifest)

    @property
    def artifact_id(self) -> str:
        return str(self.manifest["artifact_id"])

    @property
    def precisions(self) -> list[str]:
        return list(self.manifest["precisions"])

    def graph(self, precision: str, name: str) -> Path:
        if precision not in self.manifest["precisions"]:
            raise ArtifactError(
                f"artifact {self.root} has no {precision} graphs (it has {', '.join(self.precisions)}): "
                f"rebuild with --precision {precision}"
            )
        return self.root / self.manifest["precisions"][precision]["graphs"][name]

    def weights(self, precision: str) -> Path:
        return self.root / self.manifest["precisions"][precision]["weights"]

    def shared_weights(self, precision: str) -> list[SharedWeights]:
        return list(self.manifest["precisions"][precision]["shared_weights"])

    def token_table(self, precision: str) -> StoredTensor:
        """The ``(vocab, d_model)`` token table, whose rows the worker reads for the graphs' ``token_rows``."""
        return cast(StoredTensor, self.manifest["precisions"][precision]["token_table"])

    def generation_config(self) -> dict[str, Any]:
        return dict(json.loads((self.root / "generation_config.json").read_text()))
