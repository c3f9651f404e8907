"""INT8 on one linear layer (MatMul + bias) through ONNX Runtime with every optimisation on, as the worker
runs it. Dynamic: each row is quantized on its own, so its result is the same alone and among other rows,
and close to fp32 for every row (one activation scale mixed into another row's would be off by the ratio
of the two rows' sizes). Static: every row on the one calibrated grid, whatever else is in the batch."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from export_tools.precision import to_int8, to_int8_static

K, N = 96, 160


def linear(rng: np.random.Generator) -> tuple[onnx.ModelProto, np.ndarray, np.ndarray]:
    weight = (rng.standard_normal((K, N)) * 0.1).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
        "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", N])],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), weight, bias


@pytest.mark.parametrize("seed", [0, 1])
def test_int8_rows_are_quantized_alone(seed: int) -> None:
    rng = np.random.default_rng(seed)
    model, weight, bias = linear(rng)
    session = ort.InferenceSession(to_int8(model).SerializeToString(), providers=["CPUExecutionProvider"])
    x = rng.standard_normal((3, 5, K)).astype(np.float32)
    x[0] *= 40  # rows of very different sizes in one batch
    batch = session.run(None, {"x": x})[0]
    exact = x @ weight
    error = np.abs(batch - (exact + bias)).max(axis=-1) / np.abs(exact).max(axis=-1)
    assert error.max() < 0.05, error.round(3)  # 8 bits of each row's own range, not another row's
    for b in range(3):
        assert np.array_equal(session.run(None, {"x": x[b : b + 1]})[0][0], batch[b])
        assert np.array_equal(session.run(None, {"x": x[b : b + 1, 1:3]})[0][0], batch[b, 1:3])


def _relative_error(got: np.ndarray, x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> float:
    exact = x @ weight
    return float(np.abs(got - (exact + bias)).max() / np.abs(exact).max())


@pytest.mark.parametrize("seed", [0, 1])
def test_static_int8_quantizes_on_the_calibrated_range(seed: int) -> None:
    rng = np.random.default_rng(seed)
    model, weight, bias = linear(rng)
    x = (rng.standard_normal((3, 5, K)) + 0.5).astype(np.float32)  # off-centre: the zero point is not 128
    static = to_int8_static(model, {"x": (float(x.min()), float(x.max()))})
    session = ort.InferenceSession(static.SerializeToString(), providers=["CPUExecutionProvider"])
    batch = session.run(None, {"x": x})[0]
    assert _relative_error(batch, x, weight, bias) < 0.05
    for b in range(3):
        assert np.array_equal(session.run(None, {"x": x[b : b + 1, 1:4]})[0][0], batch[b, 1:4])
    # Values past the calibrated range are clipped to its ends, not rescaled as a dynamic grid would.
    wider = 4 * x
    clipped = session.run(None, {"x": wider})[0]
    assert _relative_error(clipped, wider, weight, bias) > 5 * _relative_error(batch, x, weight, bias)
