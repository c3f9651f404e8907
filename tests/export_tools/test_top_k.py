"""The decoder's top-k as ONNX Runtime runs it. ``exact_top_k``, in two stages: the same values and ids as
one TopK over the vocabulary, equal values in id order, whatever the vocabulary size and k.
``top_k_after_bans``: the logits after the bans, the candidates renormalized over what the bans left
and the log of that share, against float64, a banned id holding nearly all the probability included."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch import nn

from export_tools.export import _trace
from export_tools.graphs import exact_top_k, top_k_after_bans, top_k_chunk


class TwoStages(nn.Module):
    def forward(self, scores: torch.Tensor, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return exact_top_k(scores, slots)


class AfterBans(nn.Module):
    def forward(self, logits, banned_ids, banned_values, slots) -> tuple[torch.Tensor, ...]:
        return top_k_after_bans(logits, banned_ids, banned_values, slots)


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


def test_candidates_after_bans_are_renormalized_and_the_mass_left_turns_them_back(
    tmp_path: Path, model_seed: int
) -> None:
    path = tmp_path / "bans.onnx"
    names = ["logits", "banned_ids", "banned_values", "slots"]
    example = (
        torch.randn(2, 300),
        torch.zeros(2, 3, dtype=torch.long),
        torch.zeros(2, 3),
        torch.zeros(4, dtype=torch.long),
    )
    axes = {"logits": {0: "rows", 1: "vocab"}, "banned_ids": {0: "rows", 1: "m"}, "banned_values": {0: "rows", 1: "m"}}
    _trace(AfterBans(), example, path, names, ["allowed", "values", "ids", "log_mass"], axes | {"slots": {0: "k"}})
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    logits = (np.random.default_rng(model_seed).standard_normal((4, 3000)) * 4).astype(np.float32)
    banned_ids = np.array([[0, 0], [7, 0], [7, 12], [5, 9]])
    banned_values = np.array([[0, 0], [-np.inf, 0], [-np.inf, -np.inf], [-np.inf, -np.inf]], dtype=np.float32)
    logits[1, 7] = logits[3, 5] = 200.0  # rows 1 and 3: a banned id holds all but e^-180 of the probability
    allowed_logits, values, ids, log_mass = session.run(
        None, dict(zip(names, [logits, banned_ids, banned_values, np.zeros(4, np.int64)]))
    )

    exact = logits.astype(np.float64)
    allowed = exact.copy()
    for row, (banned, value) in enumerate(zip(banned_ids, banned_values)):
        allowed[row, banned[value < 0]] = -np.inf
    top = np.argsort(-allowed, axis=1, kind="stable")[:, :4]
    np.testing.assert_array_equal(allowed_logits, allowed.astype(np.float32))  # padding leaves its id alone
    np.testing.assert_array_equal(ids, top)
    np.testing.assert_allclose(values, np.take_along_axis(allowed - _log_sum_exp(allowed), top, 1), atol=2e-5)
    np.testing.assert_allclose(log_mass, _log_sum_exp(allowed) - _log_sum_exp(exact), rtol=1e-6, atol=2e-6)
    assert log_mass[0, 0] == 0.0  # nothing banned: padding bans nothing
    np.testing.assert_allclose(
        values + log_mass, np.take_along_axis(exact - _log_sum_exp(exact), top, 1), rtol=1e-6, atol=2e-5
    )


def _log_sum_exp(x: np.ndarray) -> np.ndarray:
    top = x.max(axis=1, keepdims=True)
    return top + np.log(np.exp(x - top).sum(axis=1, keepdims=True))
