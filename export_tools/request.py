"""What a build is asked for, checked before anything heavy is imported: the CLI refuses a bad request
in a fraction of a second instead of after the seconds torch and transformers take to import, and
``build`` refuses it the same way when called from Python."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from export_tools.architectures import ExportError, local_architecture
from worker.engine.artifact import PRECISIONS


def check_request(
    src: str, out: Path, precisions: Sequence[str], calibration_set: Sequence[str], *, force: bool
) -> None:
    """Raise ``ExportError`` saying what to change: the precision list, int8-static without a calibration
    set, an existing ``out`` without ``force``, or a local model directory that cannot be exported."""
    unknown = [p for p in precisions if p not in PRECISIONS]
    if unknown or "fp32" not in precisions:
        raise ExportError(
            f"--precision takes fp32 (always needed, the reference) plus any of int8, int8-static, fp16; "
            f"got {list(precisions)}"
        )
    if "int8-static" in precisions and not calibration_set:
        raise ExportError(
            "int8-static needs --calibration-set FILE: a few hundred source sentences like those you will "
            'translate (a sample of the corpus, or the dev set\'s sources), one per line or JSONL with "source"'
        )
    if out.exists() and not force:
        raise ExportError(f"{out} already exists: choose another --out or pass --force to replace it")
    if Path(src).exists():
        local_architecture(Path(src))
