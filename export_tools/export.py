"""Hugging Face model -> fp32 ONNX encoder and decoder (``graphs``), traced with dynamic axes."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import onnx
import torch

from export_tools import graphs
from export_tools.architectures import Architecture

OPSET = 17


def cache_names(layers: int, prefix: str) -> list[str]:
    return [f"{prefix}.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]


def layer_shape(model: Any) -> tuple[int, int, int]:
    """(decoder layers, heads, head size) from the config."""
    c = model.config
    if c.model_type in ("t5", "mt5"):
        return c.num_decoder_layers, c.num_heads, c.d_kv
    return c.decoder_layers, c.decoder_attention_heads, c.d_model // c.decoder_attention_heads


def reorder_graph(decoder: onnx.ModelProto) -> onnx.ModelProto:
    """``rows (M,), past.* (N, H, P, D) -> reordered.* (M, H, P, D)``: beam reordering on the device (the
    worker also feeds it the cross-attention K/V, of the same rank and type, to drop finished sentences).

    The worker runs it under IO binding (the default, and always on CUDA), so the self-attention
    cache never leaves the sessions' device when beams move; without IO binding numpy indexing does.
    """
    from onnx import helper

    past = [i for i in decoder.graph.input if i.name.startswith("past.")]
    dims = ["rows", "heads", "past", "head_size"]
    nodes, inputs, outputs = [], [helper.make_tensor_value_info("rows", onnx.TensorProto.INT64, ["kept"])], []
    for value in past:
        elem = value.type.tensor_type.elem_type
        out = value.name.replace("past.", "reordered.", 1)
        inputs.append(helper.make_tensor_value_info(value.name, elem, dims))
        outputs.append(helper.make_tensor_value_info(out, elem, ["kept", *dims[1:]]))
        nodes.append(helper.make_node("Gather", [value.name, "rows"], [out], axis=0))
    graph = helper.make_graph(nodes, "reorder", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def _trace(module: torch.nn.Module, args: tuple, path: Path, inputs: list[str], outputs: list[str], axes: dict) -> None:
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about shape arithmetic are expected here
        torch.onnx.export(
            module,
            args,
            str(path),
            dynamo=False,
            opset_version=OPSET,
            input_names=inputs,
            output_names=outputs,
            dynamic_axes=axes,
            do_constant_folding=True,
        )


def export_fp32(model: Any, arch: Architecture, directory: Path) -> dict[str, onnx.ModelProto]:
    """Trace both graphs into ``directory`` and return them loaded (tensors in memory)."""
    model = model.eval().float()
    parts = arch.parts(model)
    layers, heads, head = layer_shape(model)
    batch, source, beams = 2, 5, 2
    ids = torch.full((batch, source), 5, dtype=torch.long)
    mask = torch.ones_like(ids)
    cross = cache_names(layers, "cross")
    past, present = cache_names(layers, "past"), cache_names(layers, "present")

    directory.mkdir(parents=True, exist_ok=True)
    enc_axes = {"input_ids": {0: "batch", 1: "source"}, "attention_mask": {0: "batch", 1: "source"}}
    enc_axes |= {n: {0: "batch", 2: "source"} for n in cross}
    _trace(
        graphs.EncoderGraph(parts).eval(),
        (ids, mask),
        directory / "encoder.onnx",
        ["input_ids", "attention_mask"],
        cross,
        enc_axes,
    )

    cross_kv = [torch.randn(batch, heads, source, head) for _ in cross]
    past_kv = [torch.randn(batch * beams, heads, 3, head) for _ in past]
    step = torch.full((batch * beams, 1), 5, dtype=torch.long)
    slots = torch.zeros(6, dtype=torch.long)
    banned_ids = torch.zeros((batch * beams, 2), dtype=torch.long)
    banned_values = torch.zeros((batch * beams, 2), dtype=torch.float32)
    dec_inputs = ["input_ids", "encoder_attention_mask", "top_k_slots", "banned_ids", "banned_values", *cross, *past]
    dec_axes = {"input_ids": {0: "rows", 1: "new"}, "encoder_attention_mask": {0: "batch", 1: "source"}}
    dec_axes |= {"banned_ids": {0: "rows", 1: "banned"}, "banned_values": {0: "rows", 1: "banned"}}
    dec_axes |= {n: {0: "batch", 2: "source"} for n in cross}
    dec_axes |= {n: {0: "rows", 2: "past"} for n in past}
    dec_axes |= {n: {0: "rows", 2: "total"} for n in present}
    dec_axes |= {
        "logits": {0: "rows"},
        "top_k_slots": {0: "k"},
        "top_logprobs": {0: "rows", 1: "k"},
        "top_ids": {0: "rows", 1: "k"},
        "log_mass": {0: "rows"},
    }
    _trace(
        graphs.DecoderGraph(parts).eval(),
        (step, mask, slots, banned_ids, banned_values, *cross_kv, *past_kv),
        directory / "decoder.onnx",
        dec_inputs,
        ["logits", "top_logprobs", "top_ids", "log_mass", *present],
        dec_axes,
    )
    return {name: onnx.load(str(directory / f"{name}.onnx")) for name in ("encoder", "decoder")}
