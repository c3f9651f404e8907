"""fp32 graphs -> INT8 (CPU) and FP16 (GPU) graphs, with a count of what was converted.

INT8 weights come from ONNX Runtime's dynamic quantization of every MatMul weight and of the
token-table Gather. It works here because our decoder has no ``If`` subgraphs (a merged decoder's
MatMuls sit inside them and ``quantize_dynamic`` leaves them all in fp32). The tied token table is one
initializer, quantized once and shared by the lookup and the LM head. Weights are 7-bit signed
(-64..64, ``reduce_range``) with a scale per output column: the fast uint8 x int8 kernel adds
products in pairs into int16 on AVX2 CPUs without VNNI, and 255 x 64 x 2 = 32640 never overflows it,
so the integer arithmetic is exact on every x86 CPU (full 8-bit weights saturate there; uint8 x uint8
is exact too but half as fast on a VNNI CPU: ``python -m benchmarks.int8_matmul``).

Activations are quantized on grids that do not depend on the batch, so a sentence's translation and
score are the same whatever else is in its batch and however it is padded; never one scale for the
whole batch as ONNX Runtime's ``DynamicQuantizeLinear`` does. ``int8`` quantizes each row (token) on
its own grid as it comes (``per_row_activations``); ``int8-static`` uses one fixed grid per tensor,
calibrated beforehand on real sentences (``calibrated_activations``, ``calibration.py``), and saves the
per-row scaling ops.

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

from export_tools.weights import gather_axis

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
    "ReduceMax",  # exact_top_k's stages read the fp32 log-probabilities
    "Pad",
    "GatherElements",
    "Where",
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


def to_int8(model: onnx.ModelProto) -> onnx.ModelProto:
    """Dynamic INT8: activations quantized one row at a time as they come."""
    return fused_dequantization(per_row_activations(_quantized_weights(model)))


def to_int8_static(model: onnx.ModelProto, ranges: dict[str, tuple[float, float]]) -> onnx.ModelProto:
    """Static INT8: activations quantized on fixed grids calibrated beforehand (``calibration.observe``)."""
    return fused_dequantization(calibrated_activations(_quantized_weights(model), ranges))


def _quantized_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """ONNX Runtime's dynamic quantization (7-bit signed weights with a scale per column, a
    ``DynamicQuantizeLinear`` per activation), the token table made like the other weights (``signed_tables``)."""
    return signed_tables(_ort_quantized(model), model)


def signed_tables(quantized: onnx.ModelProto, fp32: onnx.ModelProto) -> onnx.ModelProto:
    """The tied token table (``(d_model, vocab)``, looked up by a ``Gather`` along axis 1 and multiplied by
    the LM head's ``MatMulInteger``) as 7-bit signed with a scale per token, like the other weights; in
    the encoder too, where only the lookup reads it: both graphs' tables must be the same bytes, as the
    worker reads one stored table for both (``weights.token_rows_as_input``).

    ``quantize_dynamic`` gives a Gather's table the activations' type, uint8 with one zero point, which
    puts the LM head, the largest product of a step, on the uint8 x uint8 kernel: half as fast as uint8 x
    int8 on a VNNI CPU. The lookup's ``DequantizeLinear`` cannot take a scale per column of the table, so
    it becomes ``Cast`` times the looked-up tokens' scales."""
    originals = {t.name: t for t in fp32.graph.initializer}
    tensors = {t.name: t for t in quantized.graph.initializer}
    uint8 = {name for name, t in tensors.items() if t.data_type == onnx.TensorProto.UINT8}
    tables = {n.input[1] for n in quantized.graph.node if n.op_type == "MatMulInteger" and n.input[1] in uint8}
    lookups = [n for n in quantized.graph.node if n.op_type == "Gather" and gather_axis(n) == 1]
    tables |= {n.input[0] for n in lookups if n.input[0] in uint8}
    for name in tables:
        _requantize_per_token(tensors[name], numpy_helper.to_array(originals[name.removesuffix("_quantized")]), tensors)
    producer = {out: node for node in quantized.graph.node for out in node.output}
    nodes: list[onnx.NodeProto] = []
    for node in quantized.graph.node:
        lookup = producer.get(node.input[0]) if node.op_type == "DequantizeLinear" else None
        if lookup is not None and lookup.op_type == "Gather" and lookup.input[0] in tables:
            if gather_axis(lookup) != 1:
                raise ValueError(f"{lookup.input[0]} is looked up along axis 0: expected a (d_model, vocab) table")
            nodes += _dequantized_lookup(node, lookup)
        else:
            nodes.append(node)
    del quantized.graph.node[:]
    quantized.graph.node.extend(nodes)
    return quantized


def _requantize_per_token(table: onnx.TensorProto, weights: np.ndarray, tensors: dict[str, onnx.TensorProto]) -> None:
    name = table.name.removesuffix("_quantized")
    scale = np.maximum(np.abs(weights).max(axis=0), np.finfo(np.float32).tiny) / 64
    for tensor, value in (
        (table, np.clip(np.round(weights / scale), -64, 64).astype(np.int8)),
        (tensors[f"{name}_scale"], scale.astype(np.float32)),
        (tensors[f"{name}_zero_point"], np.zeros(len(scale), np.int8)),
    ):
        tensor.CopyFrom(numpy_helper.from_array(value, tensor.name))


def _dequantized_lookup(dequantize: onnx.NodeProto, lookup: onnx.NodeProto) -> list[onnx.NodeProto]:
    """``DequantizeLinear(Gather(table, ids), scale, 0)`` with a scale per token: each looked-up column
    times its own scale (``(d_model, *ids) * (*ids)`` broadcasts)."""
    (codes, scale, _), (out,) = dequantize.input, dequantize.output
    make = onnx.helper.make_node
    return [
        make("Cast", [codes], [f"{out}_codes"], to=onnx.TensorProto.FLOAT),
        make("Gather", [scale, lookup.input[1]], [f"{out}_scales"], axis=0),
        make("Mul", [f"{out}_codes", f"{out}_scales"], [out]),
    ]


def _ort_quantized(model: onnx.ModelProto) -> onnx.ModelProto:
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        onnx.save_model(model, src)
        quantize_dynamic(
            src,
            dst,
            op_types_to_quantize=["MatMul", "Gather"],
            weight_type=QuantType.QInt8,
            reduce_range=True,
            per_channel=True,
            extra_options={"MatMulConstBOnly": True},
        )
        return onnx.load(str(dst))


def per_row_activations(model: onnx.ModelProto) -> onnx.ModelProto:
    """Replace every ``DynamicQuantizeLinear`` (one scale and zero point per tensor, i.e. per batch) by a
    symmetric quantization per row: ``scale = max|x| / 127`` over the last axis, ``q = round(x / scale) +
    128`` as uint8 with the scalar zero point 128 (``MatMulInteger`` takes no per-row zero point).

    ``quantize_dynamic`` follows each ``MatMulInteger`` with ``Cast -> Mul(activation scale * weight
    scale)``; the activation scale becomes 1 there and the row scale multiplies that ``Mul``'s output. So
    the ``MatMulIntegerToFloat`` that replaces the chain (``fused_dequantization``) sees scalar or
    per-column scales only, as that op requires (fed a per-row scale together with a bias it mixes rows).
    Every op is row-local and the integer products are exact in any order, so a row's result depends on
    that row alone."""
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


def calibrated_activations(model: onnx.ModelProto, ranges: dict[str, tuple[float, float]]) -> onnx.ModelProto:
    """Replace every ``DynamicQuantizeLinear`` by a ``QuantizeLinear`` on the fixed uint8 grid of the
    activation's calibrated range (asymmetric: ``scale = (high - low) / 255``, zero point where 0 falls).
    Scale and zero point become constants (``fused_dequantization`` then hands them to one
    ``MatMulIntegerToFloat`` per product); fixed grids make a row's result independent of its batch, as
    per-row grids do."""
    graph = model.graph
    nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        if node.op_type != "DynamicQuantizeLinear":
            nodes.append(node)
            continue
        (x,), (q, scale, zero_point) = node.input, node.output
        if x not in ranges:
            raise ValueError(f"no calibrated range for {x}: calibrate on the graph that is being quantized")
        low, high = ranges[x]
        step = max(high - low, float(np.finfo(np.float32).tiny)) / 255
        zero = np.clip(round(-low / step), 0, 255)
        graph.initializer.extend(
            [
                numpy_helper.from_array(np.array(step, np.float32), f"{scale}_calibrated"),
                numpy_helper.from_array(np.array(zero, np.uint8), f"{zero_point}_calibrated"),
            ]
        )
        make = onnx.helper.make_node
        nodes += [
            make("QuantizeLinear", [x, f"{scale}_calibrated", f"{zero_point}_calibrated"], [q]),
            make("Identity", [f"{scale}_calibrated"], [scale]),
            make("Identity", [f"{zero_point}_calibrated"], [zero_point]),
        ]
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


def fused_dequantization(model: onnx.ModelProto) -> onnx.ModelProto:
    """Each ``MatMulInteger -> Cast -> Mul(activation scale * weight scale)`` as one ``MatMulIntegerToFloat``
    (ONNX Runtime's contrib op: the int32 sums are scaled to float inside the GEMM's output pass).

    A constant bias added straight after (static INT8; per-row scaling comes between them) is added in
    the same pass. ONNX Runtime fuses this chain itself only while the scale product is still a ``Mul``
    node; here both scales are constants (calibrated, or the 1 that per-row scaling leaves), constant
    folding runs first and the fusion never matches."""
    graph = model.graph
    constants = {t.name: t for t in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    users: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            users.setdefault(name, []).append(node)
    dropped: set[int] = set()
    fused: dict[int, onnx.NodeProto] = {}  # id of each chain's last Mul -> the node that replaces the chain
    for matmul in graph.node:
        if matmul.op_type != "MatMulInteger":
            continue
        (cast,) = users[matmul.output[0]]
        (mul,) = users[cast.output[0]]
        scales = producer[next(name for name in mul.input if name != cast.output[0])]
        a, b, a_zero, b_zero = matmul.input
        inputs = [a, b, *scales.input, a_zero, b_zero]  # quantize_dynamic multiplies (activation, weight) scales
        end, bias = mul, _bias_after(mul, users, constants)
        if bias is not None:
            end, inputs = bias, [*inputs, next(name for name in bias.input if name in constants)]
            dropped.add(id(mul))
        fused[id(end)] = onnx.helper.make_node("MatMulIntegerToFloat", inputs, end.output, domain="com.microsoft")
        dropped |= {id(matmul), id(cast)} | ({id(scales)} if len(users[scales.output[0]]) == 1 else set())
    nodes = [fused.get(id(node), node) for node in graph.node if id(node) not in dropped]
    del graph.node[:]
    graph.node.extend(nodes)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(onnx.helper.make_opsetid("com.microsoft", 1))
    return model


def _bias_after(
    node: onnx.NodeProto, users: dict[str, list[onnx.NodeProto]], constants: dict[str, onnx.TensorProto]
) -> onnx.NodeProto | None:
    """The ``Add`` of a constant vector that alone reads ``node``'s output, if there is one."""
    readers = users.get(node.output[0], [])
    if len(readers) != 1 or readers[0].op_type != "Add":
        return None
    others = [name for name in readers[0].input if name != node.output[0]]
    return readers[0] if len(others) == 1 and len(constants.get(others[0], onnx.TensorProto()).dims) == 1 else None


def to_fp16(model: onnx.ModelProto, keep_fp32_io: list[str]) -> onnx.ModelProto:
    return convert_float_to_float16(model, keep_io_types=keep_fp32_io, op_block_list=FP32_OPS)
