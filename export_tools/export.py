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


def select_graph(decoder: onnx.ModelProto) -> onnx.ModelProto:
    """``rows (M,), cross.* (B, H, S, D) -> kept.* (M, H, S, D)``: the cross-attention K/V of the sentences
    still searched, cut on the device when others finish. The worker runs it under IO binding (the
    default, and always on CUDA), so those K/V never leave the sessions' device; without IO binding numpy
    indexing does it."""
    from onnx import helper

    cross = [i for i in decoder.graph.input if i.name.startswith("cross.")]
    dims = ["sentences", "heads", "source", "head_size"]
    nodes, inputs, outputs = [], [helper.make_tensor_value_info("rows", onnx.TensorProto.INT64, ["kept"])], []
    for value in cross:
        elem = value.type.tensor_type.elem_type
        out = value.name.replace("cross.", "kept.", 1)
        inputs.append(helper.make_tensor_value_info(value.name, elem, dims))
        outputs.append(helper.make_tensor_value_info(out, elem, ["kept", *dims[1:]]))
        nodes.append(helper.make_node("Gather", [value.name, "rows"], [out], axis=0))
    graph = helper.make_graph(nodes, "select", inputs, outputs)
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
    cache, new = cache_names(layers, "cache"), cache_names(layers, "new")  # the slot cache; the step's K/V

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
    rows, capacity = batch * beams, 4
    cache_kv = [torch.randn(heads, capacity, rows, head) for _ in cache]
    cache_index = torch.tensor([[0, 5, 9], [1, 4, 10], [2, 7, 8], [3, 6, 11]], dtype=torch.long)  # (rows, 3 past)
    step = torch.full((rows, 1), 5, dtype=torch.long)
    slots = torch.zeros(6, dtype=torch.long)
    logit_rows = torch.zeros(rows - 1, dtype=torch.long)  # not ``rows``: the trace must keep the cut
    banned_ids = torch.zeros((batch * beams, 2), dtype=torch.long)
    banned_values = torch.zeros((batch * beams, 2), dtype=torch.float32)
    dec_inputs = ["input_ids", "encoder_attention_mask", "top_k_slots", "logit_rows", "banned_ids"]
    dec_inputs += ["banned_values", "cache_index", *cross, *cache]
    dec_axes = {"input_ids": {0: "rows", 1: "new"}, "encoder_attention_mask": {0: "batch", 1: "source"}}
    dec_axes |= {"banned_ids": {0: "rows", 1: "banned"}, "banned_values": {0: "rows", 1: "banned"}}
    dec_axes |= {n: {0: "batch", 2: "source"} for n in cross}
    dec_axes |= {"cache_index": {0: "rows", 1: "past"}}
    dec_axes |= {n: {1: "capacity", 2: "slots"} for n in cache}
    dec_axes |= {n: {1: "new", 2: "rows"} for n in new}
    dec_axes |= {
        "logits": {0: "logit_rows"},
        "logit_rows": {0: "logit_rows"},
        "top_k_slots": {0: "k"},
        "top_logprobs": {0: "rows", 1: "k"},
        "top_ids": {0: "rows", 1: "k"},
        "log_mass": {0: "rows"},
    }
    _trace(
        graphs.DecoderGraph(parts).eval(),
        (step, mask, slots, logit_rows, banned_ids, banned_values, cache_index, *cross_kv, *cache_kv),
        directory / "decoder.onnx",
        dec_inputs,
        ["logits", "top_logprobs", "top_ids", "log_mass", *new],
        dec_axes,
    )
    return {name: onnx.load(str(directory / f"{name}.onnx")) for name in ("encoder", "decoder")}
