"""Store the graphs of one precision with every weight tensor written once.

Encoder and decoder share the token table and the sinusoidal positions; a tied LM head is the
token table itself. Each graph keeps only its structure in ``<name>.onnx``; tensor bytes go to one
``weights.bin`` beside them, deduplicated by content and aligned to 4 KiB so that ONNX Runtime can
memory-map them. ONNX Runtime maps each session's initializers on its own, so a tensor both graphs
read would be resident twice; the manifest lists those (``shared_weights``) and the worker maps each
once and hands it to both sessions (``worker/engine/sessions.py``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto

from worker.artifact import SharedWeights

DATA_FILE = "weights.bin"
ALIGNMENT = 4096
INLINE_BELOW = 1024  # bytes: small tensors (shapes, scalars) stay inside the graph


def _content_key(tensor: TensorProto) -> str:
    digest = hashlib.sha256(tensor.raw_data)
    digest.update(f"{tensor.data_type}:{list(tensor.dims)}".encode())
    return digest.hexdigest()


def _externalize(tensor: TensorProto, offset: int, length: int) -> None:
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    del tensor.external_data[:]
    for key, value in (("location", DATA_FILE), ("offset", str(offset)), ("length", str(length))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value


def _initializers(model: onnx.ModelProto) -> list[TensorProto]:
    """Top-level initializers and those of subgraphs (If/Loop bodies), which hold weights too."""
    found = list(model.graph.initializer)
    stack = list(model.graph.node)
    while stack:
        node = stack.pop()
        for attr in node.attribute:
            for graph in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                found += graph.initializer
                stack += graph.node
    return found


def save_shared(models: dict[str, onnx.ModelProto], directory: Path) -> dict[str, Any]:
    """Write ``<name>.onnx`` for each model and one shared ``weights.bin``; returns byte counts and
    ``shared``: the stored tensors that more than one graph reads (``SharedWeights``).

    The models must hold their tensors in memory (``raw_data``), as ``onnx.load`` gives them.
    """
    directory.mkdir(parents=True, exist_ok=True)
    placed: dict[str, tuple[int, int]] = {}
    readers: dict[str, dict[str, list[str]]] = {}  # content key -> graph -> its names for that tensor
    described: dict[str, TensorProto] = {}
    referenced = 0
    with open(directory / DATA_FILE, "wb") as data:
        for graph, model in models.items():
            for tensor in _initializers(model):
                if tensor.data_location == TensorProto.EXTERNAL:
                    raise ValueError(f"tensor {tensor.name} is external: load the model with its data first")
                if not tensor.HasField("raw_data"):
                    tensor.raw_data = onnx.numpy_helper.to_array(tensor).tobytes()
                    for field in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
                        tensor.ClearField(field)
                length = len(tensor.raw_data)
                if length < INLINE_BELOW:
                    continue
                referenced += length
                key = _content_key(tensor)
                if key not in placed:
                    offset = -data.tell() % ALIGNMENT + data.tell()
                    data.seek(offset)
                    data.write(tensor.raw_data)
                    placed[key] = (offset, length)
                readers.setdefault(key, {}).setdefault(graph, []).append(tensor.name)
                described.setdefault(key, tensor)
                _externalize(tensor, *placed[key])
        stored = data.tell()
    for name, model in models.items():
        onnx.save_model(model, directory / f"{name}.onnx")
    shared = [_shared(described[key], *placed[key], names) for key, names in readers.items() if len(names) > 1]
    return {"referenced_bytes": referenced, "stored_bytes": stored, "shared": shared}


def _shared(tensor: TensorProto, offset: int, length: int, names: dict[str, list[str]]) -> SharedWeights:
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).name
    return {"offset": offset, "length": length, "dtype": dtype, "shape": list(tensor.dims), "names": names}
