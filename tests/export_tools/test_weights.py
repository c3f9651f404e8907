"""The token table taken out of the graphs (``token_rows_as_input``), stored once (``save_shared``) and
read back row by row by the worker (``TokenRows``): the graphs give what they gave when they looked the
tokens up themselves, bit for bit, with a tied LM head and with one of its own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from export_tools.weights import DATA_FILE, save_shared, token_rows_as_input
from worker.engine.artifact import StoredTensor
from worker.engine.inference import TokenRows

D, V = 8, 300  # rows of 32 bytes: several to a page, so a row read at the wrong offset shows


def graph(name: str, table: np.ndarray, head: np.ndarray | None) -> onnx.ModelProto:
    """``ids (B, S) -> vectors (B, S, D)`` looked up as ``graphs.TokenTable`` does (a Gather along axis 1
    of the ``(D, V)`` table), and with a ``head``, ``logits (B, S, V)`` of the vectors against it."""
    make = helper.make_node
    nodes = [
        make("Reshape", ["ids", "flat"], ["flat_ids"]),
        make("Gather", ["table", "flat_ids"], ["columns"], axis=1),
        make("Transpose", ["columns"], ["looked_up"], perm=[1, 0]),
        make("Shape", ["ids"], ["ids_shape"]),
        make("Concat", ["ids_shape", "width"], ["shape"], axis=0),
        make("Reshape", ["looked_up", "shape"], ["vectors"]),
    ]
    outputs = [helper.make_tensor_value_info("vectors", TensorProto.FLOAT, ["B", "S", D])]
    constants = [("table", table), ("flat", np.array([-1])), ("width", np.array([D]))]
    if head is not None:
        nodes.append(make("MatMul", ["vectors", "table" if head is table else "head"], ["logits"]))
        outputs.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", "S", V]))
        constants += [] if head is table else [("head", head)]
    inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, ["B", "S"])]
    initializers = [numpy_helper.from_array(value, key) for key, value in constants]
    return helper.make_model(
        helper.make_graph(nodes, name, inputs, outputs, initializers), opset_imports=[helper.make_opsetid("", 17)]
    )


def run(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("tied", [True, False])
def test_graphs_given_the_rows_the_worker_reads_compute_what_their_own_lookup_did(tied: bool, tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    table = rng.standard_normal((D, V)).astype(np.float32)
    head = table if tied else rng.standard_normal((D, V)).astype(np.float32)
    models = {"encoder": graph("encoder", table, None), "decoder": graph("decoder", table, head)}
    before = tmp_path / "before"
    before.mkdir()
    for name, model in models.items():
        onnx.save_model(model, before / f"{name}.onnx")
    ids = np.array([[5, V - 1, 0, 5], [17, 18, 299, 1]])

    rows = token_rows_as_input(models)
    stored = save_shared(models, tmp_path / "after", rows)

    assert np.array_equal(numpy_helper.to_array(rows), table.T)
    decoder = models["decoder"].graph
    assert [t.name for t in decoder.initializer if t.name.startswith("table")] == (["table_rows"] if tied else [])
    reader = TokenRows(tmp_path / "after" / DATA_FILE, stored["token_table"])
    for name in models:
        expected = run(before / f"{name}.onnx", {"ids": ids})
        got = run(tmp_path / "after" / f"{name}.onnx", {"ids": ids, "token_rows": reader.rows(ids)})
        assert len(got) == len(expected) and all(np.array_equal(a, b) for a, b in zip(got, expected)), name


def test_rows_are_read_from_the_table_where_it_lies_and_an_id_outside_it_is_refused(tmp_path: Path) -> None:
    rows = np.arange(V * D, dtype=np.float32).reshape(V, D)
    before = b"\xff" * 4096  # what lies before the table in weights.bin
    (tmp_path / DATA_FILE).write_bytes(before + rows.tobytes())
    table: StoredTensor = {"offset": len(before), "length": rows.nbytes, "dtype": "float32", "shape": [V, D]}
    reader = TokenRows(tmp_path / DATA_FILE, table)
    assert np.array_equal(reader.rows(np.array([[V - 1, 3, V - 1]])), rows[[V - 1, 3, V - 1]])
    for bad in (V, -1):
        with pytest.raises(ValueError, match=f"token ids must lie in \\[0, {V}\\)"):
            reader.rows(np.array([2, bad]))
