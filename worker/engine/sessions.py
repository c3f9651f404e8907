"""ONNX Runtime session creation: one place for providers and threading options."""

from __future__ import annotations

import logging
from pathlib import Path

import onnxruntime as ort

log = logging.getLogger(__name__)


def providers_for(device: str) -> list[str]:
    """CUDA when asked for and present, else CPU with a log line that says why."""
    if device == "cuda":
        if "CUDAExecutionProvider" in ort.get_available_providers():
            return ["CUDAExecutionProvider", "CPUExecutionProvider"]
        log.warning("device=cuda asked for but onnxruntime has no CUDAExecutionProvider: running on CPU")
    elif device != "cpu":
        raise ValueError(f"unknown device {device!r}: use 'cpu' or 'cuda'")
    return ["CPUExecutionProvider"]


def make_session(path: Path, *, device: str = "cpu", threads: int = 1) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Spinning threads burn the cores that other sessions of the pool need (measured ~25% slower).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), sess_options=options, providers=providers_for(device))
