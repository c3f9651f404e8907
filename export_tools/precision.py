"""fp32 graphs -> INT8 (CPU) and FP16 (GPU) graphs, with a count of what was converted.

INT8 is ONNX Runtime's dynamic quantization of every MatMul weight and of the token-table
Gather. It works here because our decoder has no ``If`` subgraphs (a merged decoder's MatMuls
sit inside them and ``quantize_dynamic`` leaves them all in fp32). The tied token table is one
initializer, quantized once and shared by the lookup and the LM head.

Activations are quantized one row (one token) at a time, never one scale for the whole batch as
ONNX Runtime's ``DynamicQuantizeLinear`` does: a sentence's translation and score are then the
same whatever else is in its batch and however it is padded (``per_row_activations``).

FP16 keeps normalisation, softmax and the logits in fp32: Marian/T5 activations overflow
fp16 there. The caches are fp16 on the wire, halving the KV memory traffic.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic
from onnxruntime.transformers.float16 import convert_float_to_float16

QUANTIZED_OPS = ("MatMulInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QGemm", "MatMulNBits")
FP32_OPS = [
    "LayerNormalization",
    "SimplifiedLayerNormalization",
    "ReduceMean",
    "Pow",
    "Sqrt",
    "Softmax",
    "Erf",
    "Range",
    "CumSum",
    "Log",
    "LogSoftmax",
    "TopK",
    "ScatterElements",
]
FP32_DECODER_IO = ["logits", "top_logprobs", "top_ids", "top_k_slots", "banned_values", "log_mass"]


def op_counts(model: onnx.ModelProto) -> dict[str, int]:
    """Node types of the graph and all its subgraphs."""
    counts: Counter[str] = Counter()
    stack = list(model.graph.node)
    while stack:
        node = stack.pop()
        counts[node.op_type] += 1
        for attr in node.attribute:
            for graph in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                stack += graph.node
    return dict(counts)


def quantization_summary(model: onnx.ModelProto) -> dict[str, int]:
    counts = op_counts(model)
    return {
        "quantized_matmul": sum(counts.get(op, 0) for op in QUANTIZED_OPS),
        "float_matmul": counts.get("MatMul", 0) + counts.get("Gemm", 0),
        "dequantize_linear": counts.get("DequantizeLinear", 0),
    }


def to_int8(model: onnx.ModelProto, *, per_channel: bool = False) -> onnx.ModelProto:
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        onnx.save_model(model, src)
        quantize_dynamic(
            src,
            dst,
            op_types_to_quantize=["MatMul", "Gather"],
            per_channel=per_channel,
            weight_type=QuantType.QUInt8,  # u8 x u8: exact on AVX2 (u8 x s8 saturates in pairs there)
            extra_options={"MatMulConstBOnly": True},
        )
        return per_row_activations(onnx.load(str(dst)))


def per_row_activations(model: onnx.ModelProto) -> onnx.ModelProto:
    """Replace every ``DynamicQuantizeLinear`` (one scale and zero point per tensor, i.e. per batch) by a
    symmetric quantization per row: ``scale = max|x| / 127`` over the last axis, ``q = round(x / scale) +
    128`` as uint8 with the scalar zero point 128 (``MatMulInteger`` takes no per-row zero point).

    ``quantize_dynamic`` follows each ``MatMulInteger`` with ``Cast -> Mul(activation scale * weight
    scale)``; the activation scale becomes 1 there and the row scale multiplies that ``Mul``'s output. So
    every scale ONNX Runtime's ``MatMulIntegerToFloat`` fusion sees is a scalar or per column, as that
    op requires (fed a per-row scale together with a bias it mixes rows up). Every op is row-local and
    the integer products are exact in any order, so a row's result depends on that row alone."""
    graph = model.graph
    users: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            users.setdefault(name, []).append(node)
    nodes: list[onnx.NodeProto] = []
    rescale: dict[str, str] = {}  # output of a quantized MatMul's last Mul -> the row scale it needs
    for node in graph.node:
        if node.op_type == "DynamicQuantizeLinear":
            nodes += _quantize_rows(node)
            for end in _dequantizing_muls(node.output[0], users):
                rescale[end.output[0]] = _row_scale(node)
            continue
        unscaled = {out: f"{out}_before_row_scale" for out in node.output if out in rescale}
        node.output[:] = [unscaled.get(out, out) for out in node.output]
        nodes.append(node)
        nodes += [onnx.helper.make_node("Mul", [unscaled[out], rescale[out]], [out]) for out in unscaled]
    if rescale:
        graph.initializer.extend(
            numpy_helper.from_array(np.array(value, dtype), name)
            for name, value, dtype in (
                (_INT8_MAX, 127.0, np.float32),
                (_TINY, np.finfo(np.float32).tiny, np.float32),
                (_ONE, 1.0, np.float32),
                (_MIDPOINT, 128, np.uint8),
            )
        )
    del graph.node[:]
    graph.node.extend(nodes)
    return model


_INT8_MAX, _TINY, _ONE, _MIDPOINT = "row_quant_127", "row_quant_tiny", "row_quant_one", "row_quant_128"


def _row_scale(node: onnx.NodeProto) -> str:
    return f"{node.output[0]}_row_scale"


def _quantize_rows(node: onnx.NodeProto) -> list[onnx.NodeProto]:
    """What replaces one ``DynamicQuantizeLinear``: the same three outputs (quantized rows, a scale of 1,
    the zero point 128) and the row scale beside them."""
    (x,), (q, scale, zero_point) = node.input, node.output
    t, row_scale = f"{q}_row", _row_scale(node)
    make = onnx.helper.make_node
    return [
        make("Abs", [x], [f"{t}_abs"]),
        make("ReduceMax", [f"{t}_abs"], [f"{t}_max"], axes=[-1], keepdims=1),
        make("Max", [f"{t}_max", _TINY], [f"{t}_max_nonzero"]),  # an all-zero row: scale > 0, q = 128
        make("Div", [f"{t}_max_nonzero", _INT8_MAX], [row_scale]),
        make("Div", [x, row_scale], [f"{t}_scaled"]),
        make("QuantizeLinear", [f"{t}_scaled", _ONE, _MIDPOINT], [q]),
        make("Identity", [_ONE], [scale]),
        make("Identity", [_MIDPOINT], [zero_point]),
    ]


def _dequantizing_muls(quantized: str, users: dict[str, list[onnx.NodeProto]]) -> list[onnx.NodeProto]:
    """The ``Mul`` that ends each ``MatMulInteger -> Cast -> Mul`` reading ``quantized``."""
    ends = []
    for matmul in users[quantized]:
        chain = [matmul]
        while len(chain) < 3 and len(users.get(chain[-1].output[0], [])) == 1:
            chain += users[chain[-1].output[0]]
        if [n.op_type for n in chain] != ["MatMulInteger", "Cast", "Mul"]:
            raise ValueError(f"unexpected INT8 graph: {quantized} feeds {[n.op_type for n in chain]}")
        ends.append(chain[-1])
    return ends


def to_fp16(model: onnx.ModelProto, keep_fp32_io: list[str]) -> onnx.ModelProto:
    return convert_float_to_float16(model, keep_io_types=keep_fp32_io, op_block_list=FP32_OPS)
