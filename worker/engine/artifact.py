"""An artifact directory: manifest, graphs per precision, tokenizer, generation config.

Every file is listed in ``manifest.json`` with its size and sha256; ``Artifact.load`` checks all
of them before anything is handed to ONNX Runtime, so a tampered or half-copied artifact is
refused with the name of the file that is wrong.

An artifact's identity is its content: ``artifact_id`` is derived from the manifest (every file's
hash included), and ``load`` derives it again, so a file changed together with its hash in the
manifest is a different artifact (a job submitted for the old one refuses it), never the same one.

Files change under a loaded artifact too (someone copies a new version over it): ONNX Runtime maps
the weights and the worker reads the token table while it translates. ``load`` notes each file's
inode, size, modification and change times; ``check_unchanged`` compares them again (a ``stat`` per
file, microseconds: the engine calls it after each ``translate_batch`` call's search, and before it
reuses a loaded engine for a chunk), and any write, truncation or replacement changes the change
time, which no user can set. The bytes read before the check are then discarded (``ArtifactChanged``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, cast

# 2: per-request languages in the tokenizer section, bans and log_mass in the decoder graph;
# 3: the decoder reads the self-attention cache through cache_index and returns only the new K/V;
#    the weights both graphs read are listed (shared_weights);
# 4: the decoder returns the full logits only for the rows logit_rows asks for;
# 5: top_logprobs are renormalized over what the bans left (log_mass turns them back);
# 6: the token table is stored (vocab, d_model) and looked up by the worker (token_table, token_rows);
# 7: the artifact_id is derived from the whole manifest (``content_id``) and checked on load
ARTIFACT_FORMAT = 7
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


class ArtifactChanged(ArtifactError):
    """A file changed under an artifact in use: what was read from it is discarded, the artifact is loaded
    (and verified) again."""


def content_id(manifest: dict[str, Any]) -> str:
    """The id an artifact's content gives it: its architecture and a digest of its manifest (every file's
    sha256 included), leaving out the id itself and the build's time."""
    content = {k: v for k, v in manifest.items() if k not in ("artifact_id", "created")}
    digest = hashlib.sha256(json.dumps(content, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    return f"{manifest.get('architecture', 'artifact')}-{digest[:12]}"


Stamp = tuple[int, int, int, int, int]  # a file's device, inode, size, modification and change times (ns)


def stamps(root: Path, files: Iterable[str]) -> dict[str, Stamp]:
    found = {}
    for rel in files:
        st = (root / rel).stat()
        found[rel] = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return found


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


def seal(root: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Write ``manifest`` into ``root`` with every file's size and hash and the id its content gives."""
    manifest["files"] = file_entries(root)
    manifest["artifact_id"] = content_id(manifest)
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return manifest


def identity_problems(manifest: dict[str, Any]) -> list[str]:
    """Whether the manifest's ``artifact_id`` is the one its content gives (empty when it is)."""
    derived = content_id(manifest)
    if manifest.get("artifact_id") == derived:
        return []
    return [f"{MANIFEST}: artifact_id {manifest.get('artifact_id')!r} is not its content's ({derived}): altered"]


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


def _verified(root: Path, listed: dict[str, dict[str, Any]]) -> tuple[dict[str, Stamp], list[str]]:
    """The files' stamps, taken before they were hashed, and their problems (a file that changed while
    it was hashed is one)."""
    try:
        before = stamps(root, listed)
    except OSError:
        before = {}  # a file is missing: ``file_problems`` names it
    problems = file_problems(root, listed)
    try:
        if not problems and stamps(root, listed) != before:
            problems = ["its files changed while they were verified"]
    except OSError as err:
        problems = [f"{err.filename}: {err.strerror}"]
    return before, problems


@dataclass(frozen=True)
class Artifact:
    root: Path
    manifest: dict[str, Any]
    stamps: dict[str, Stamp] = field(default_factory=dict)  # what the files were when verified

    @classmethod
    def load(cls, root: str | Path, *, verify: bool = True) -> Artifact:
        root = Path(root)
        try:
            manifest = json.loads((root / MANIFEST).read_text())
        except FileNotFoundError:
            raise ArtifactError(
                f"{root / MANIFEST} not found: build an artifact with `python -m export_tools build`"
            ) from None
        except (OSError, json.JSONDecodeError) as err:
            raise ArtifactError(f"{root / MANIFEST} cannot be read ({err}): rebuild the artifact") from None
        if manifest.get("format") != ARTIFACT_FORMAT:
            raise ArtifactError(
                f"artifact {root} has format {manifest.get('format')}, this worker reads format {ARTIFACT_FORMAT}: "
                "rebuild it with `python -m export_tools build` (or `demo`) from this version"
            )
        problems = identity_problems(manifest)  # the manifest alone: cheap, so always
        before: dict[str, Stamp] = {}
        if verify and not problems:
            before, problems = _verified(root, manifest["files"])
        if problems:
            raise ArtifactError(f"artifact {root} failed verification: " + "; ".join(problems))
        return cls(root, manifest, before)

    def check_unchanged(self) -> None:
        """Raise ``ArtifactChanged`` if a file changed since ``load`` verified it (see the module's docstring)."""
        try:
            changed = [rel for rel, stamp in stamps(self.root, self.stamps).items() if stamp != self.stamps[rel]]
        except OSError as err:
            changed = [f"{err.filename} ({err.strerror})"]
        if changed:
            raise ArtifactChanged(
                f"artifact {self.root} changed while in use ({', '.join(changed)}): what was read from it is "
                "discarded; artifacts are immutable, a new version goes to a new path"
            )

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
