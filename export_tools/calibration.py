"""Calibration for static INT8: the range of every activation a quantized MatMul reads, observed while
the fp32 graphs translate real sentences.

Each fp32 graph is run with the tensors to observe as extra outputs, under the worker's own search
(``worker.engine.search.generate``, greedy, the model's bans and forced tokens): the encoder reads the
calibration sentences in batches and every decoder step sees the states a translation passes through.
A tensor's range is ``[low, high]`` of everything it held, widened to contain 0 (the zero point must be
exact). Clipping the tails (a percentile) was measured and did worse on the demo model: 99.99% and
99.999% ranges gave logit errors of 0.025 and 0.040 against torch, the full range 0.018 (dynamic INT8:
0.019).
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from worker.engine.inference import Inference, pad_batch
from worker.engine.search import DecodingOptions, Vocabulary, generate

BATCH = 16  # sentences per encoder call and greedy decode
MAX_NEW_TOKENS = 64


class Ranges(dict[str, tuple[float, float]]):
    """``name -> (low, high)``: the extremes each observed tensor held, widened to contain 0."""

    def add(self, name: str, values: np.ndarray) -> None:
        low, high = self.get(name, (0.0, 0.0))
        self[name] = (min(low, float(values.min())), max(high, float(values.max())))


class ObservingSession(ort.InferenceSession):
    """An fp32 session that also computes the observed tensors on every run and adds them to ``ranges``."""

    def __init__(self, path: Path, observed: list[str], ranges: Ranges) -> None:
        options = ort.SessionOptions()
        options.log_severity_level = 3
        super().__init__(str(path), sess_options=options, providers=["CPUExecutionProvider"])
        self.observed, self.ranges = observed, ranges

    def run(self, output_names: Any, input_feed: Any, run_options: Any = None) -> Any:
        values = super().run([*output_names, *self.observed], input_feed, run_options)
        for name, value in zip(self.observed, values[len(output_names) :]):
            self.ranges.add(name, value)
        return values[: len(output_names)]


def weight_matmul_inputs(model: onnx.ModelProto) -> list[str]:
    """The activations of every MatMul with a constant weight: what INT8 quantizes."""
    constants = {t.name for t in model.graph.initializer}
    return sorted({n.input[0] for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in constants})


def _observing(model: onnx.ModelProto, name: str, ranges: Ranges, directory: Path) -> ObservingSession:
    observed = weight_matmul_inputs(model)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.graph.output.extend(onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in observed)
    path = directory / f"{name}.onnx"  # external data: a model over 2 GiB cannot be one protobuf
    onnx.save_model(copy, str(path), save_as_external_data=True, location=f"{name}.data")
    return ObservingSession(path, observed, ranges)


def observe(
    fp32: dict[str, onnx.ModelProto], sources: Sequence[list[int]], special: dict[str, Any], generation: dict[str, Any]
) -> Ranges:
    """Activation ranges of both fp32 graphs over ``sources`` (token ids, the tokenizer's own framing),
    decoded greedily under the model's ``generation`` config and the manifest's ``special`` tokens."""
    options = DecodingOptions.from_generation_config(generation, beam_size=1, max_new_tokens=MAX_NEW_TOKENS)
    vocab = Vocabulary.from_special_tokens(special)
    ranges = Ranges()
    with tempfile.TemporaryDirectory() as tmp:
        encoder = _observing(fp32["encoder"], "encoder", ranges, Path(tmp))
        decoder = _observing(fp32["decoder"], "decoder", ranges, Path(tmp))
        inference = Inference(encoder, decoder)
        ordered = sorted(sources, key=len)  # similar lengths together: little padding in the ranges
        for i in range(0, len(ordered), BATCH):
            ids, mask = pad_batch(ordered[i : i + BATCH], special["pad_token_id"])
            generate(inference, inference.encode(ids, mask), options, vocab)
    return ranges


def fingerprint(sentences: Sequence[str]) -> str:
    """sha256 of the calibration sentences, one per line, as the manifest records them."""
    return hashlib.sha256("".join(f"{s}\n" for s in sentences).encode()).hexdigest()
