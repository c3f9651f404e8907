"""A decoder step's self-attention on one CPU: our graph's against ONNX Runtime's fused decoder attention.

    python -m benchmarks.attention [--rows 116] [--past 20 40]

One layer of the demo model's shape (4 heads of 48) at one new token per row, beam 4, one thread.
"ours": ``Projections.cached_self_attention`` as the exporter writes it (the past gathered from the slot
cache through ``cache_index``, scores against the past and the new token, softmax, weighted sums), its
projections left out (identity). "fused": ``com.microsoft.DecoderMaskedMultiHeadAttention``, ONNX
Runtime's CPU kernel for one new token: each row's past in a buffer of its own row (rows, heads,
positions, head size) that the kernel writes the new K/V into in place (``past_present_share_buffer``),
read through a cache indirection that says, per sentence and beam, which beam's row holds each past
position, as the slot cache's history does. Same inputs; "max diff": the largest difference of their
outputs; "invariant": the fused kernel's output for a sentence alone equals its output among the batch,
bit for bit, at 1 and 2 threads.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable

import numpy as np
import onnxruntime as ort
import torch
from onnx import TensorProto, helper

from export_tools.graphs import Projections

HEADS, SIZE, BEAMS, POSITIONS, RUNS = 4, 48, 4, 64, 300
OURS = ("h", "cache_k", "cache_v", "cache_index", "bias")  # our graph's inputs
FUSED = ("h", "past_k", "past_v", "past_length", "beams", "indirection")  # the fused graph's


class OurAttention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        same = torch.nn.Identity()
        self.attention = Projections(same, same, same, same, HEADS, SIZE**-0.5)

    def forward(self, h: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor, index: torch.Tensor,
                bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
        return self.attention.cached_self_attention(h, cache_k, cache_v, index, bias)


def ours(rows: int) -> bytes:
    """Our graph for ``rows`` slots (the slot cache's width is fixed; rows and past positions are not)."""
    feeds = inputs(rows, 3, np.random.default_rng(0))
    example = tuple(torch.from_numpy(feeds[name]) for name in OURS)
    dynamic = {"h": {0: "n"}, "cache_index": {0: "n", 1: "p"}, "bias": {3: "total"}}
    with tempfile.NamedTemporaryFile(suffix=".onnx") as graph:
        outputs = ["out", "new_k", "new_v"]
        torch.onnx.export(OurAttention(), example, graph.name, input_names=list(OURS), output_names=outputs,
                          dynamic_axes=dynamic, opset_version=17, dynamo=False)  # fmt: skip
        return graph.read()


def fused() -> bytes:
    width = HEADS * SIZE
    past: list[str | int] = ["n", HEADS, POSITIONS, SIZE]
    shapes: dict[str, list[str | int]] = {"h": ["n", 1, width], "past_k": past, "past_v": past, "past_length": [1],
                                          "beams": [1], "indirection": ["b", BEAMS, POSITIONS]}  # fmt: skip
    types = {"past_length": TensorProto.INT32, "beams": TensorProto.INT32, "indirection": TensorProto.INT32}
    given = [helper.make_tensor_value_info(n, types.get(n, TensorProto.FLOAT), shapes[n]) for n in FUSED]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("out", "present_k", "present_v")]
    node = helper.make_node(
        "DecoderMaskedMultiHeadAttention",
        ["h", "h", "h", "", "", "past_k", "past_v", "past_length", "beams", "indirection"],
        ["out", "present_k", "present_v"],
        domain="com.microsoft",
        num_heads=HEADS,
        past_present_share_buffer=1,
        scale=SIZE**-0.5,
    )
    graph = helper.make_graph([node], "fused", given, outputs)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


def inputs(rows: int, past: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Both layouts of the same past: the slot cache (heads, positions, slots, size) with each row's ancestors
    at random beams of its sentence, and per-row buffers with the matching indirection."""
    h = rng.standard_normal((rows, 1, HEADS * SIZE), dtype=np.float32)
    cache_k, cache_v = (rng.standard_normal((HEADS, POSITIONS, rows, SIZE), dtype=np.float32) for _ in range(2))
    beam = rng.integers(0, BEAMS, (rows, past))
    slot = np.arange(rows)[:, None] // BEAMS * BEAMS + beam
    indirection = np.zeros((rows // BEAMS, BEAMS, POSITIONS), np.int32)
    indirection[:, :, :past] = beam.reshape(-1, BEAMS, past)
    return {
        "h": h, "cache_k": cache_k, "cache_v": cache_v, "cache_index": slot + np.arange(past) * rows,
        "bias": np.zeros((1, 1, 1, past + 1), np.float32),
        "past_k": np.ascontiguousarray(cache_k.transpose(2, 0, 1, 3)),
        "past_v": np.ascontiguousarray(cache_v.transpose(2, 0, 1, 3)),
        "past_length": np.array([past], np.int32), "beams": np.array([BEAMS], np.int32), "indirection": indirection,
    }  # fmt: skip


def session(model: bytes, threads: int = 1) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def fused_run(graph: ort.InferenceSession, feeds: dict[str, np.ndarray]) -> Callable[[], np.ndarray]:
    """One step of the fused graph, its past bound as input and output: each run writes the new K/V at
    position ``past`` of ``feeds``' buffers, in place (the same values every run; nothing reads them)."""
    values = {name: ort.OrtValue.ortvalue_from_numpy(feeds[name]) for name in FUSED}
    binding = graph.io_binding()
    for name, value in values.items():
        binding.bind_ortvalue_input(name, value)
    binding.bind_output("out", "cpu")
    binding.bind_ortvalue_output("present_k", values["past_k"])
    binding.bind_ortvalue_output("present_v", values["past_v"])

    def run() -> np.ndarray:
        graph.run_with_iobinding(binding)
        return np.asarray(binding.get_outputs()[0].numpy())

    return run


def microseconds(run: Callable[[], object]) -> float:
    for _ in range(20):
        run()
    started = time.perf_counter()
    for _ in range(RUNS):
        run()
    return (time.perf_counter() - started) / RUNS * 1e6


def invariant(graph: bytes, feeds: dict[str, np.ndarray]) -> bool:
    """The fused kernel's output for sentence 0 alone equals its output among the whole batch, at 1 and 2
    threads (ours is batch-invariant by its own tests: ``tests/worker/engine``)."""
    alone = {**feeds, "h": feeds["h"][:BEAMS], "past_k": feeds["past_k"][:BEAMS].copy(),
             "past_v": feeds["past_v"][:BEAMS].copy(), "indirection": feeds["indirection"][:1].copy()}  # fmt: skip
    return all(
        np.array_equal(fused_run(s, alone)(), fused_run(s, dict(feeds))()[:BEAMS])
        for s in (session(graph, threads) for threads in (1, 2))
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[4, 32, 116], help="beam rows (multiples of 4)")
    parser.add_argument("--past", type=int, nargs="+", default=[20, 40], help="past positions")
    args = parser.parse_args()
    if any(rows % BEAMS for rows in args.rows):
        parser.error(f"--rows: beam rows come {BEAMS} to a sentence; give multiples of {BEAMS}")
    graph = fused()
    print("| rows | past | ours us | fused us | ours / fused | max diff | invariant |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for rows in args.rows:
        plain = session(ours(rows))
        for past in args.past:
            feeds = inputs(rows, past, np.random.default_rng(0))
            run_ours = lambda: plain.run(["out"], {n: feeds[n] for n in OURS})[0]  # noqa: B023 - called in the loop
            run_fused = fused_run(session(graph), dict(feeds))
            diff = float(np.abs(run_ours() - run_fused()).max())
            a, b = microseconds(run_ours), microseconds(run_fused)
            print(f"| {rows} | {past} | {a:.0f} | {b:.0f} | {a / b:.2f} | {diff:.1e} | {invariant(graph, feeds)} |")


if __name__ == "__main__":
    main()
