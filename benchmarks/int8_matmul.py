"""INT8 MatMul schemes on one CPU: speed, error against fp32, and whether a row's result depends on its batch.

    python -m benchmarks.int8_matmul

One MatMul of the opus-mt-en-zh shape at a time (the LM head 512 x 65001, an FFN 512 x 2048 and
2048 x 512), 64 rows of Gaussian activations, 2 threads. Schemes: ONNX Runtime's dynamic
quantization (one activation scale per tensor, int8 weights); one activation scale per row with
uint8 x int8, int8 x int8 and uint8 x uint8 products (full-range 8-bit weights, a scale per column)
and uint8 x int8 with 7-bit weights (no int16 overflow on AVX2 without VNNI); what the exporter writes
(per-row activations, 7-bit weights with a scale per column, one ``MatMulIntegerToFloat``);
``MatMulNBits`` with 8-bit weights (block 32 and 128; accuracy level 4 quantizes activations per
block). "invariant": rows computed alone and four at a time equal the same rows among 64.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from export_tools.precision import to_int8

SHAPES = ((512, 65001), (512, 2048), (2048, 512))
ROWS, THREADS, RUNS = 64, 2, 30


def _graph(
    nodes: list[onnx.NodeProto], shape: tuple[int, ...], initializers: list[onnx.TensorProto]
) -> onnx.ModelProto:
    k, n = shape
    graph = helper.make_graph(
        nodes,
        "matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", n])],
        initializers,
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )


def fp32(w: np.ndarray) -> onnx.ModelProto:
    return _graph([helper.make_node("MatMul", ["x", "w"], ["y"])], w.shape, [numpy_helper.from_array(w, "w")])


def per_tensor(w: np.ndarray) -> onnx.ModelProto:
    """What ``quantize_dynamic`` writes: DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul."""
    scale = np.float32(np.abs(w).max() / 127)
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
        helper.make_node("MatMulInteger", ["q", "wq", "z", "wz"], ["i"]),
        helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["s", "ws"], ["sw"]),
        helper.make_node("Mul", ["f", "sw"], ["y"]),
    ]
    weights = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
    inits = [numpy_helper.from_array(np.asarray(a), n) for a, n in ((weights, "wq"), (np.int8(0), "wz"), (scale, "ws"))]
    return _graph(nodes, w.shape, inits)


def per_row(w: np.ndarray, activations: str, weights: str) -> onnx.ModelProto:
    """Symmetric per-row activations (scale max|x|/127), 8-bit weights (7-bit for ``s7``: products added
    in pairs stay inside int16) with a scale per column."""
    top = 63 if weights == "s7" else 127
    scale = (np.abs(w).max(axis=0) / top).astype(np.float32)
    q = np.clip(np.round(w / scale), -top, top)
    signed = weights in ("s8", "s7")
    wq, wz = (q.astype(np.int8), np.int8(0)) if signed else ((q + 128).astype(np.uint8), np.uint8(128))
    az = np.uint8(128) if activations == "u8" else np.int8(0)
    nodes = [
        helper.make_node("Abs", ["x"], ["a"]),
        helper.make_node("ReduceMax", ["a"], ["m"], axes=[-1], keepdims=1),
        helper.make_node("Max", ["m", "tiny"], ["m1"]),
        helper.make_node("Div", ["m1", "c127"], ["s"]),
        helper.make_node("Div", ["x", "s"], ["xs"]),
        helper.make_node("QuantizeLinear", ["xs", "one", "az"], ["q"]),
        helper.make_node("MatMulInteger", ["q", "wq", "az", "wz"], ["i"]),
        helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["f", "ws"], ["fw"]),
        helper.make_node("Mul", ["fw", "s"], ["y"]),
    ]
    consts = {"tiny": np.float32(1e-30), "c127": np.float32(127), "one": np.float32(1), "az": az}
    consts |= {"wq": wq, "wz": wz, "ws": scale}
    return _graph(nodes, w.shape, [numpy_helper.from_array(np.asarray(v), n) for n, v in consts.items()])


def nbits(w: np.ndarray, block: int) -> onnx.ModelProto:
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    config = DefaultWeightOnlyQuantConfig(block_size=block, is_symmetric=True, accuracy_level=4, bits=8)
    quantizer = MatMulNBitsQuantizer(fp32(w), algo_config=config)
    quantizer.process()
    model: onnx.ModelProto = quantizer.model.model
    return model


def schemes(w: np.ndarray) -> dict[str, Callable[[], onnx.ModelProto]]:
    return {
        "fp32": lambda: fp32(w),
        "per tensor, u8 x s8 (ORT dynamic)": lambda: per_tensor(w),
        "per row, u8 x s8": lambda: per_row(w, "u8", "s8"),
        "per row, u8 x s7 (7-bit weights)": lambda: per_row(w, "u8", "s7"),
        "per row, s8 x s8": lambda: per_row(w, "s8", "s8"),
        "per row, u8 x u8": lambda: per_row(w, "u8", "u8"),
        "ours (export_tools.precision.to_int8)": lambda: to_int8(fp32(w)),
        "MatMulNBits 8-bit, block 32": lambda: nbits(w, 32),
        "MatMulNBits 8-bit, block 128": lambda: nbits(w, 128),
    }


def measure(model: onnx.ModelProto, x: np.ndarray, reference: np.ndarray) -> tuple[float, float, bool]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    run = lambda rows: session.run(None, {"x": rows})[0]
    y = run(x)
    invariant = all(np.array_equal(run(x[i : i + 1])[0], y[i]) for i in range(0, ROWS, 7))
    invariant &= all(np.array_equal(run(x[i : i + 4]), y[i : i + 4]) for i in range(0, ROWS - 4, 9))
    for _ in range(3):
        run(x)
    started = time.perf_counter()
    for _ in range(RUNS):
        run(x)
    milliseconds = 1000 * (time.perf_counter() - started) / RUNS
    return milliseconds, float(np.abs(y - reference).max() / np.abs(reference).max()), invariant


def main() -> None:
    rng = np.random.default_rng(0)
    print("| scheme | K x N | ms (64 rows) | max error / max output | invariant |")
    print("| --- | --- | ---: | ---: | --- |")
    for k, n in SHAPES:
        w = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
        x = rng.standard_normal((ROWS, k)).astype(np.float32)
        for name, make in schemes(w).items():
            ms, error, invariant = measure(make(), x, x @ w)
            print(f"| {name} | {k} x {n} | {ms:.2f} | {error:.4f} | {'yes' if invariant else 'no'} |", flush=True)


if __name__ == "__main__":
    main()
