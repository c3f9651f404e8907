"""Store the graphs of one precision with every weight tensor written once.

Each graph keeps only its structure in ``<name>.onnx``; tensor bytes go to one ``weights.bin`` beside
them, deduplicated by content and aligned to 4 KiB so that ONNX Runtime can memory-map them. ONNX
Runtime maps each session's initializers on its own, so a tensor both graphs read (the positions, the
token table's INT8 scales) would be resident twice; the manifest lists those (``shared_weights``) and
the worker maps each once and hands it to both sessions (``worker/engine/sessions.py``).

The token table is not looked up in the graphs (``token_rows_as_input``): it is stored ``(vocab,
d_model)`` (the manifest's ``token_table``), the worker reads the rows a call needs from the file and
the graphs take them as the ``token_rows`` input. A graph's lookup made the whole table resident after
a few sentences (one token's vector was a column of the ``(d_model, vocab)`` tensor the LM head
multiplies by), beside the LM head's own prepacked copy: 32 MiB of the INT8 worker's peak
(BENCHMARKS.md). A tied LM head reads the same stored bytes through a ``Transpose``, which ONNX
Runtime folds and prepacks at load, releasing the mapping.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from worker.engine.artifact import TOKEN_ROWS, SharedWeights, StoredTensor

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


def token_rows_as_input(models: dict[str, onnx.ModelProto]) -> TensorProto:
    """Each graph's token lookup (a ``Gather`` along axis 1 of the ``(d_model, vocab)`` table,
    ``graphs.TokenTable``) replaced by the ``token_rows`` input ``(tokens, d_model)``: the rows of the
    looked-up ids in order, as the worker reads them. Returns the table ``(vocab, d_model)``, which a
    tied LM head then reads through a ``Transpose``; the graphs' arithmetic is unchanged (the INT8
    per-token scales are still looked up inside, from a vector of ``vocab`` floats)."""
    tables = [_rows_as_input(model) for model in models.values()]
    if any(table.raw_data != tables[0].raw_data for table in tables):
        raise ValueError("expected every graph to look tokens up in one token table")
    return tables[0]


def _rows_as_input(model: onnx.ModelProto) -> TensorProto:
    """The worker feeds ``token_rows`` to every graph, so each must have exactly one token lookup."""
    graph = model.graph
    tensors = {t.name: t for t in graph.initializer}
    lookups = [n for n in graph.node if n.op_type == "Gather" and gather_axis(n) == 1 and n.input[0] in tensors]
    if len(lookups) != 1:
        raise ValueError(f"{graph.name}: {len(lookups)} lookups along axis 1, expected one token lookup")
    (lookup,) = lookups
    columns = tensors[lookup.input[0]]
    rows = numpy_helper.from_array(np.ascontiguousarray(numpy_helper.to_array(columns).T), f"{columns.name}_rows")
    make = onnx.helper.make_node
    nodes = [make("Transpose", [TOKEN_ROWS], lookup.output, perm=[1, 0]) if n is lookup else n for n in graph.node]
    graph.initializer.remove(columns)
    if any(columns.name in n.input for n in nodes):  # a tied LM head: it reads the rows transposed
        graph.initializer.append(rows)
        nodes.insert(0, make("Transpose", [rows.name], [columns.name], perm=[1, 0]))
    del graph.node[:]
    graph.node.extend(nodes)
    graph.input.append(onnx.helper.make_tensor_value_info(TOKEN_ROWS, columns.data_type, ["tokens", rows.dims[1]]))
    return rows


def gather_axis(node: onnx.NodeProto) -> int:
    return next((a.i for a in node.attribute if a.name == "axis"), 0)


def save_shared(models: dict[str, onnx.ModelProto], directory: Path, token_table: TensorProto) -> dict[str, Any]:
    """Write ``<name>.onnx`` for each model and one shared ``weights.bin``, the ``token_table`` first;
    returns byte counts, ``shared``: the stored tensors that more than one graph reads
    (``SharedWeights``), and where the ``token_table`` lies (``StoredTensor``).

    The models must hold their tensors in memory (``raw_data``), as ``onnx.load`` gives them.
    """
    directory.mkdir(parents=True, exist_ok=True)
    placed: dict[str, tuple[int, int]] = {}
    readers: dict[str, dict[str, list[str]]] = {}  # content key -> graph -> its names for that tensor
    described: dict[str, TensorProto] = {}
    with open(directory / DATA_FILE, "wb") as data:

        def place(tensor: TensorProto) -> str:
            key = _content_key(tensor)
            if key not in placed:
                offset = -data.tell() % ALIGNMENT + data.tell()
                data.seek(offset)
                data.write(tensor.raw_data)
                placed[key] = (offset, len(tensor.raw_data))
            return key

        table = _stored(token_table, *placed[place(token_table)])
        referenced = table["length"]  # read by the worker's lookups
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
                key = place(tensor)
                readers.setdefault(key, {}).setdefault(graph, []).append(tensor.name)
                described.setdefault(key, tensor)
                _externalize(tensor, *placed[key])
        stored = data.tell()
    for name, model in models.items():
        onnx.save_model(model, directory / f"{name}.onnx")
    shared = [
        SharedWeights(**_stored(described[key], *placed[key]), names=names)
        for key, names in readers.items()
        if len(names) > 1
    ]
    return {"referenced_bytes": referenced, "stored_bytes": stored, "shared": shared, "token_table": table}


def _stored(tensor: TensorProto, offset: int, length: int) -> StoredTensor:
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).name
    return {"offset": offset, "length": length, "dtype": dtype, "shape": list(tensor.dims)}
