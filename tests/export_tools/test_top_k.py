"""``exact_top_k``, the decoder's two-stage top-k, as ONNX Runtime runs it: the same values and ids as one
TopK over the vocabulary, equal values in id order, whatever the vocabulary size and k."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch import nn

from export_tools.export import _trace
from export_tools.graphs import exact_top_k, top_k_chunk


class TwoStages(nn.Module):
    def forward(self, scores: torch.Tensor, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return exact_top_k(scores, slots)


# 30: 15 chunks, fewer than k = 20; 32003: no divisor near, so padded by one id
@pytest.mark.parametrize("size", [5, 30, 256, 3000, 32003, 65001])
def test_two_stages_give_what_one_top_k_gives_ties_in_id_order(size: int, tmp_path: Path, model_seed: int) -> None:
    path = tmp_path / "top_k.onnx"
    example = (torch.randn(3, size), torch.zeros(4, dtype=torch.long))
    axes = {"scores": {0: "rows"}, "slots": {0: "k"}}
    _trace(TwoStages(), example, path, ["scores", "slots"], ["values", "ids"], axes)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(model_seed)
    for k in (1, 8, 20):
        if k > size:
            continue
        scores = np.round(rng.standard_normal((16, size)) * 3).astype(np.float32)  # many equal values
        scores[0], scores[1] = -np.inf, -np.inf  # row 0: three finite values; row 1: none
        scores[0, :3] = 1.0
        scores[2] = -5.0  # row 2: all below zero, the largest in the last chunk
        scores[2, -1] = -1.0
        values, ids = session.run(None, {"scores": scores, "slots": np.zeros(k, np.int64)})
        expected = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        np.testing.assert_array_equal(ids, expected, err_msg=f"size {size}, k {k}, seed {model_seed}")
        np.testing.assert_array_equal(values, np.take_along_axis(scores, expected, axis=1))


def test_chunks_divide_the_vocabulary_when_a_divisor_lies_near() -> None:
    assert top_k_chunk(65001) == (141, 0)  # 65001 = 3 x 47 x 461
    assert top_k_chunk(32003) == (63, 1)  # prime: padded to 32004
