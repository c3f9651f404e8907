"""fp32 graphs -> INT8 (CPU) and FP16 (GPU) graphs, with a count of what was converted.

INT8 is ONNX Runtime's dynamic quantization of every MatMul weight and of the token-table
Gather. It works here because our decoder has no ``If`` subgraphs (a merged decoder's MatMuls
sit inside them and ``quantize_dynamic`` leaves them all in fp32). The tied token table is one
initializer, quantized once and shared by the lookup and the LM head.

FP16 keeps normalisation, softmax and the logits in fp32: Marian/T5 activations overflow
fp16 there. The caches are fp16 on the wire, halving the KV memory traffic.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import onnx
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
    "ReduceLogSumExp",
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
            weight_type=QuantType.QInt8,
            extra_options={"MatMulConstBOnly": True},
        )
        return onnx.load(str(dst))


def to_fp16(model: onnx.ModelProto, keep_fp32_io: list[str]) -> onnx.ModelProto:
    return convert_float_to_float16(model, keep_io_types=keep_fp32_io, op_block_list=FP32_OPS)
