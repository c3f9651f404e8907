"""Encoder and decoder-step calls over one pair of sessions, with the KV cache as arrays.

Shapes: ``tokens (rows, T)`` with rows = sentences * beams; ``cross`` per layer ``(sentences, H, S, D)``;
``past`` per layer ``(rows, H, P, D)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort

_NP_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


@dataclass
class EncoderState:
    """What the decoder attends to, per sentence: cross-attention K/V and the source mask."""

    cross: list[np.ndarray]
    mask: np.ndarray

    def select(self, sentences: np.ndarray) -> EncoderState:
        """Keep only the given sentences (when others have finished)."""
        return EncoderState([c[sentences] for c in self.cross], self.mask[sentences])


class Inference:
    def __init__(self, encoder: ort.InferenceSession, decoder: ort.InferenceSession):
        self.encoder, self.decoder = encoder, decoder
        inputs = decoder.get_inputs()
        self.cross_names = [i.name for i in inputs if i.name.startswith("cross.")]
        self.past_names = [i.name for i in inputs if i.name.startswith("past.")]
        first_past = next(i for i in inputs if i.name.startswith("past."))
        self.cache_dtype = _NP_TYPES[first_past.type]
        self.heads, self.head_dim = first_past.shape[1], first_past.shape[3]
        self.present_names = [name.replace("past.", "present.", 1) for name in self.past_names]
        self._slot_cache = np.zeros(1, dtype=np.int64)

    def encode(self, ids: np.ndarray, mask: np.ndarray) -> EncoderState:
        cross = self.encoder.run(self.cross_names, {"input_ids": ids, "attention_mask": mask})
        return EncoderState(list(cross), mask)

    def empty_past(self, rows: int) -> list[np.ndarray]:
        return [np.zeros((rows, self.heads, 0, self.head_dim), self.cache_dtype) for _ in self.past_names]

    def step(self, tokens: np.ndarray, state: EncoderState, past: list[np.ndarray], top_k: int | None = None):
        """One decoder step for the last of ``tokens``, with the grown cache.

        With ``top_k``: the k best log-probabilities ``(rows, k)`` and their ids, computed in the
        graph. Without: the full logits ``(rows, V)`` (and ids None).
        """
        feeds = {"input_ids": tokens, "encoder_attention_mask": state.mask, "top_k_slots": self._slots(top_k or 1)}
        feeds |= dict(zip(self.cross_names, state.cross))
        feeds |= dict(zip(self.past_names, past))
        heads = ["top_logprobs", "top_ids"] if top_k else ["logits"]
        out = self.decoder.run(heads + self.present_names, feeds)
        if top_k:
            return out[0], out[1], out[2:]
        return out[0], None, out[1:]

    def _slots(self, k: int) -> np.ndarray:
        if self._slot_cache.shape[0] != k:
            self._slot_cache = np.zeros(k, dtype=np.int64)
        return self._slot_cache


def pad_batch(sources: Sequence[Sequence[int]], pad: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded ``ids (B, S)`` and the matching 1/0 ``mask``."""
    longest = max(len(s) for s in sources)
    ids = np.full((len(sources), longest), pad, dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, source in enumerate(sources):
        ids[row, : len(source)], mask[row, : len(source)] = source, 1
    return ids, mask


def reorder(past: list[np.ndarray], rows: np.ndarray) -> list[np.ndarray]:
    """Self-attention cache rows follow their beams; nothing is copied when no beam moved."""
    if len(rows) == past[0].shape[0] and np.array_equal(rows, np.arange(len(rows))):
        return past
    return [p[rows] for p in past]
