"""Encoder and decoder-step calls over one pair of sessions; the KV cache stays where the sessions run.

Shapes: ``tokens (rows, T)`` with rows = sentences * beams; ``cross`` per layer ``(sentences, H, S, D)``;
``past`` per layer ``(rows, H, P, D)``.

Two ways to call the sessions, behind one interface:
* plain ``run`` with numpy arrays (CPU);
* IO binding (``io_binding=True``; always on CUDA): cross and self-attention K/V are OrtValues on the
  sessions' device, bound as the next step's inputs without a round trip through host memory, and
  reordered (and cut to the unfinished sentences) there by the artifact's reorder graph; only token
  ids go in and the top-k candidates come out through host memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnxruntime as ort

_NP_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}
Cache = list[Any]  # per layer key/value: numpy arrays, or OrtValues under IO binding


@dataclass
class Step:
    """One decoder step: the top-k log-probabilities after the bans ``values (rows, k)`` with their ``ids``
    and ``log_mass (rows, 1)`` (what probability the bans left), or, without top-k, the full ``values``
    logits ``(rows, V)``; and the self-attention cache ``present``."""

    values: np.ndarray
    ids: np.ndarray | None
    log_mass: np.ndarray | None
    present: Cache


@dataclass
class EncoderState:
    """What the decoder attends to, per sentence: cross-attention K/V and the source mask."""

    cross: Cache
    mask: np.ndarray


class Inference:
    def __init__(
        self,
        encoder: ort.InferenceSession,
        decoder: ort.InferenceSession,
        *,
        io_binding: bool = False,
        reorder: ort.InferenceSession | None = None,
    ):
        self.encoder, self.decoder, self.reorder_session = encoder, decoder, reorder
        inputs = decoder.get_inputs()
        self.cross_names = [i.name for i in inputs if i.name.startswith("cross.")]
        self.past_names = [i.name for i in inputs if i.name.startswith("past.")]
        self.present_names = [name.replace("past.", "present.", 1) for name in self.past_names]
        first_past = next(i for i in inputs if i.name.startswith("past."))
        self.cache_dtype = _NP_TYPES[first_past.type]
        self.heads, self.head_dim = first_past.shape[1], first_past.shape[3]
        self.device = "cuda" if "CUDAExecutionProvider" in decoder.get_providers() else "cpu"
        self.bound = io_binding or self.device == "cuda"
        self._slot_cache = np.zeros(1, dtype=np.int64)

    # -- encoder -----------------------------------------------------------------------------------

    def encode(self, ids: np.ndarray, mask: np.ndarray) -> EncoderState:
        feeds = {"input_ids": ids, "attention_mask": mask}
        if not self.bound:
            return EncoderState(list(self.encoder.run(self.cross_names, feeds)), mask)
        return EncoderState(self._run_bound(self.encoder, feeds, {}, [], self.cross_names)[1], mask)

    # -- decoder step ------------------------------------------------------------------------------

    def step(
        self,
        tokens: np.ndarray,
        state: EncoderState,
        past: Cache,
        top_k: int | None = None,
        bans: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> Step:
        """One decoder step for the last of ``tokens``.

        With ``top_k``: the k best log-probabilities after ``bans`` (``banned_ids``, ``banned_values``,
        both ``(rows, M)``), computed in the graph. Without: the full logits.
        """
        banned_ids, banned_values = bans if bans is not None else self._no_bans(len(tokens))
        host = {
            "input_ids": tokens,
            "encoder_attention_mask": state.mask,
            "top_k_slots": self._slots(top_k or 1),
            "banned_ids": banned_ids,
            "banned_values": banned_values,
        }
        heads = ["top_logprobs", "top_ids", "log_mass"] if top_k else ["logits"]
        device = dict(zip(self.cross_names, state.cross)) | dict(zip(self.past_names, past))
        if self.bound:
            out, present = self._run_bound(self.decoder, host, device, heads, self.present_names)
        else:
            values = self.decoder.run(heads + self.present_names, host | device)
            out, present = values[: len(heads)], values[len(heads) :]
        if top_k:
            return Step(out[0], out[1], out[2], present)
        return Step(out[0], None, None, present)

    @staticmethod
    def _no_bans(rows: int) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((rows, 1), dtype=np.int64), np.zeros((rows, 1), dtype=np.float32)

    def _run_bound(
        self,
        session: ort.InferenceSession,
        host: dict[str, np.ndarray],
        device: dict[str, Any],
        to_host: list[str],
        to_device: list[str],
    ) -> tuple[list[np.ndarray], Cache]:
        """Run with IO binding: ``device`` inputs are OrtValues already there; returns (host arrays, OrtValues)."""
        binding = session.io_binding()
        for name, array in host.items():
            binding.bind_cpu_input(name, np.ascontiguousarray(array))
        for name, value in device.items():
            binding.bind_ortvalue_input(name, value)
        for name in to_host:
            binding.bind_output(name, "cpu")
        for name in to_device:
            binding.bind_output(name, self.device)
        session.run_with_iobinding(binding)
        outputs = binding.get_outputs()
        return [o.numpy() for o in outputs[: len(to_host)]], list(outputs[len(to_host) :])

    def _slots(self, k: int) -> np.ndarray:
        if self._slot_cache.shape[0] != k:
            self._slot_cache = np.zeros(k, dtype=np.int64)
        return self._slot_cache

    # -- cache bookkeeping -------------------------------------------------------------------------

    def empty_past(self, rows: int) -> Cache:
        return [self._wrap(np.zeros((rows, self.heads, 0, self.head_dim), self.cache_dtype)) for _ in self.past_names]

    def reorder(self, past: Cache, rows: np.ndarray) -> Cache:
        """Self-attention cache rows follow their beams; nothing is copied when no beam moved."""
        if len(rows) == self._rows(past[0]) and np.array_equal(rows, np.arange(len(rows))):
            return past
        return self._gather(past, rows)

    def select(self, state: EncoderState, sentences: np.ndarray) -> EncoderState:
        """Keep only the given sentences (when others have finished); cross K/V are never copied per step."""
        return EncoderState(self._gather(state.cross, sentences), state.mask[sentences])

    def _gather(self, cache: Cache, rows: np.ndarray) -> Cache:
        """``rows`` of every layer's K/V: on the device through the reorder graph (it gathers rows of any
        per-layer cache: self-attention's, or cross-attention's of the same rank and type), else in numpy."""
        if self.bound and self.reorder_session is not None:
            outputs = [name.replace("past.", "reordered.", 1) for name in self.past_names]
            feeds = dict(zip(self.past_names, cache))
            return self._run_bound(self.reorder_session, {"rows": rows.astype(np.int64)}, feeds, [], outputs)[1]
        return [self._wrap(self._host(c)[rows]) for c in cache]

    def _host(self, value: Any) -> np.ndarray:
        return value.numpy() if isinstance(value, ort.OrtValue) else value

    def _wrap(self, array: np.ndarray) -> Any:
        if not self.bound:
            return array
        return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), self.device, 0)

    @staticmethod
    def _rows(value: Any) -> int:
        return int(value.shape()[0] if isinstance(value, ort.OrtValue) else value.shape[0])


SOURCE_MULTIPLE = 16  # the worker pads sources to a multiple of this many positions (``pad_batch``)


def pad_batch(
    sources: Sequence[Sequence[int]], pad: int, *, multiple: int = 1, limit: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded ``ids (B, S)`` and the matching 1/0 ``mask``, S rounded up to a ``multiple`` of
    positions but never past ``limit`` (the model's positions) unless a source is longer.

    ONNX Runtime sums over the source (softmax, attention-weighted values) in 8- and 16-wide vectors
    with a shorter tail, so a sentence's scores depended in their last bits on how far its batch padded
    it: on fp32, the first step's logits of a sentence alone and beside a longer one differed for 16 of
    60 random pairs. Padded to a multiple of 16 (``SOURCE_MULTIPLE``) none did: extra padding then adds
    whole vectors of masked positions."""
    longest = max(len(s) for s in sources)
    rounded = -(-longest // multiple) * multiple
    longest = max(longest, min(rounded, limit)) if limit is not None else rounded
    ids = np.full((len(sources), longest), pad, dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, source in enumerate(sources):
        ids[row, : len(source)], mask[row, : len(source)] = source, 1
    return ids, mask
