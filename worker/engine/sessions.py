"""ONNX Runtime sessions: one place for providers and threading options, and the pool of session pairs
a ``Translator`` runs on."""

from __future__ import annotations

import functools
import logging
import os
import queue
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import onnxruntime as ort

from worker.engine.artifact import Artifact
from worker.engine.inference import Inference, TokenRows

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


def make_session(
    path: Path, *, device: str = "cpu", threads: int = 1, initializers: Mapping[str, ort.OrtValue] | None = None
) -> ort.InferenceSession:
    """A session of one graph; ``initializers`` replace the graph's own (``shared_initializers``)."""
    options = ort.SessionOptions()
    for name, value in (initializers or {}).items():
        options.add_initializer(name, value)
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Spinning threads burn the cores that other sessions of the pool need (measured ~25% slower).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if device == "cpu":
        _shared_cpu_arena()
        options.add_session_config_entry("session.use_env_allocators", "1")
        # ONNX Runtime's memory pattern takes a run's planned intermediate tensors from the arena as one
        # block per set of input shapes. With it the second batch of the engine benchmark grew the arena by
        # 12 MiB, whichever batch came first. Off, each tensor is taken on its own: peak RSS int8 303 -> 290
        # MiB, fp32 557 -> 519, token-budget batches 435 -> 352, speed equal (BENCHMARKS.md).
        options.enable_mem_pattern = False
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), sess_options=options, providers=providers_for(device))


def shared_initializers(artifact: Artifact, precision: str) -> dict[str, dict[str, ort.OrtValue]]:
    """Per graph, ``{initializer name: OrtValue}`` over one read-only mapping of each tensor that several
    graphs read (``shared_weights`` in the manifest: positions, the token table's INT8 scales). ONNX
    Runtime maps every session's initializers on its own, so without this both graphs' copies were
    resident (-28 MiB peak on the engine benchmark when the graphs still looked up the token table;
    BENCHMARKS.md). The bytes are those the manifest's sha256 covered when the artifact was loaded."""
    found: dict[str, dict[str, ort.OrtValue]] = {}
    for entry in artifact.shared_weights(precision):
        shape = tuple(entry["shape"])
        array = np.memmap(artifact.weights(precision), entry["dtype"], mode="r", offset=entry["offset"], shape=shape)
        value = ort.OrtValue.ortvalue_from_numpy(array)  # keeps the mapping alive; no copy on the CPU
        for graph, names in entry["names"].items():
            found.setdefault(graph, {}).update(dict.fromkeys(names, value))
    return found


# The CPU arena's first region: address space, resident only as far as it is used. ONNX Runtime's default
# (1 MiB, each further region twice the last) left a batch's blocks spread over regions that the next
# batch's sizes no longer fitted: peak 378 -> 357 MiB on the engine benchmark at 128 MiB, speed equal.
# Without the memory pattern, four batches of 16 in one process peaked at 288 MiB (32 MiB region), 289
# (64), 299 (128), 304 (256).
ARENA_FIRST_REGION = 64 << 20


@functools.cache
def _shared_cpu_arena() -> None:
    """One CPU memory arena for every session of the process instead of one each: encoder, decoder and
    select sessions reuse each other's freed blocks (peak RSS 575 -> 494 MiB on the engine benchmark,
    speed unchanged; BENCHMARKS.md)."""
    memory = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
    ort.create_and_register_allocator(memory, ort.OrtArenaCfg(0, -1, ARENA_FIRST_REGION, -1))


def default_precision(artifact: Artifact, device: str) -> str:
    """The precision a pool runs when none is asked for: int8 on CPU when the artifact holds it, else fp32.

    Not int8-static, though it was the faster on every CPU class measured (BENCHMARKS.md, "Per CPU class"):
    its activation grids are fixed by the calibration set, and on real READMEs, far from the demo model's
    calibration text, it kept one link fewer and one document fewer identical in structure than int8."""
    return "int8" if device == "cpu" and "int8" in artifact.precisions else "fp32"


@functools.cache
def cpu_class() -> str:
    """The CPU's widest INT8 instructions (``amx``, ``avx512-vnni``, ``avx-vnni``, ``avx2`` or ``other``), by
    which the engine's speed against others changes: logged with each pool and counted in the metrics."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().partition("flags")[2].partition("\n")[0].split())
    except OSError:
        return "other"
    for flag, name in (("amx_int8", "amx"), ("avx512_vnni", "avx512-vnni"), ("avx_vnni", "avx-vnni"), ("avx2", "avx2")):
        if flag in flags:
            return name
    return "other"


class SessionPool:
    """``size`` encoder/decoder session pairs of one artifact at one precision, shared by threads.

    ``precision`` defaults to ``default_precision``; one the artifact lacks is refused at once. ``threads``
    is the total intra-op thread count, split evenly over the pairs so that concurrent batches never
    oversubscribe the cores. ``io_binding`` keeps the cross-attention K/V in OrtValues on the sessions'
    device and drops finished sentences from them with the artifact's select graph (always on for CUDA);
    False uses plain numpy runs.

    Sessions are made on first use in the process that uses them: a pool built in a parent and
    inherited through fork (Celery prefork) rebuilds its sessions in the child, never sharing them.
    """

    def __init__(
        self,
        artifact: Artifact,
        precision: str | None = None,
        *,
        device: str = "cpu",
        size: int = 1,
        threads: int = 1,
        io_binding: bool = True,
    ) -> None:
        if threads < 1 or size < 1:
            raise ValueError(f"threads and sessions must be >= 1, got threads={threads} sessions={size}")
        self.artifact, self.device, self.io_binding = artifact, device, io_binding
        self.size, self.threads = size, threads
        self.precision = precision or default_precision(artifact, device)
        artifact.graph(self.precision, "decoder")  # refuses a precision the artifact lacks, now
        log.info("%s: %s sessions on %s (CPU: %s)", artifact.artifact_id, self.precision, device, cpu_class())
        self._pid: int | None = None
        self._lock = threading.Lock()
        self._idle: queue.Queue[Inference] = queue.Queue()
        self._shared: dict[str, dict[str, ort.OrtValue]] = {}  # per graph: the weights its sessions share
        self._token_rows: TokenRows | None = None

    @contextmanager
    def acquire(self) -> Iterator[Inference]:
        self._ensure()
        inference = self._idle.get()
        try:
            yield inference
        finally:
            self._idle.put(inference)

    def _ensure(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                return
            self._idle = queue.Queue()
            self._shared = shared_initializers(self.artifact, self.precision) if self.device == "cpu" else {}
            table = self.artifact.token_table(self.precision)
            self._token_rows = TokenRows(self.artifact.weights(self.precision), table)
            for _ in range(self.size):
                self._idle.put(self._make())
            self._pid = os.getpid()

    def _make(self) -> Inference:
        graphs = self.artifact.manifest["precisions"][self.precision]["graphs"]
        bound = self.io_binding or self.device == "cuda"
        select = self._session("select") if bound and "select" in graphs else None
        encoder, decoder = self._session("encoder"), self._session("decoder")
        return Inference(encoder, decoder, token_rows=self._token_rows, io_binding=self.io_binding, select=select)

    def _session(self, graph: str) -> ort.InferenceSession:
        path = self.artifact.graph(self.precision, graph)
        threads = max(1, self.threads // self.size)
        return make_session(path, device=self.device, threads=threads, initializers=self._shared.get(graph))
