"""Encoder and decoder-step calls over one pair of sessions, and the self-attention cache.

Shapes: ``tokens (rows, T)`` with rows = sentences * beams; ``cross`` per layer ``(sentences, H, S, D)``;
the self-attention cache per layer ``(H, C, R, D)`` (``SlotCache``).

The self-attention cache is the worker's: numpy buffers that each step's new K/V are written into in
place, read by the decoder through ``cache_index``. Beams that move and sentences that finish change
that index, never the buffers, so a step neither copies the cache nor holds a past and a present one.
The search makes the buffers once per batch, as large as its longest sentence can grow, on pages of
their own (``lazy_zeros``): resident only as far as written, never grown by a copy, and given back to
the system when the batch ends.

The token table is the worker's too (``TokenRows``): the graphs take the rows of the ids they are
given as ``token_rows``, read from the artifact's weights file as they are needed. Read, not mapped:
rows sit in the page cache, shared by every worker of the node and never in a process's resident
memory; a lookup over a mapping made the whole table resident (one token's vector was a column of the
LM head's ``(d_model, vocab)`` tensor, and the kernel maps page-cache folios of up to 2 MiB).

Two ways to call the sessions, behind one interface:
* plain ``run`` with numpy arrays (CPU);
* IO binding (``io_binding=True``; always on CUDA): cross-attention K/V are OrtValues on the sessions'
  device, bound as every step's inputs without a round trip through host memory, and cut to the
  unfinished sentences there by the artifact's select graph. The self-attention cache stays in host
  memory (on CUDA its written positions are copied to the device each step: not measured, there was
  no GPU).
"""

from __future__ import annotations

import math
import mmap
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnxruntime as ort

from worker.engine.artifact import TOKEN_ROWS, StoredTensor

_NP_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}
Cache = list[Any]  # cross-attention K/V per layer: numpy arrays, or OrtValues under IO binding
CAPACITY_STEP = 16  # a slot cache made without a size grows by this many positions at a time


@dataclass
class SlotCache:
    """The self-attention cache. ``buffers``: per layer K and V ``(H, C, R, D)``, position p of slot r;
    each step's new K/V are written into them in place, row n of the step into slot n. ``history (N,
    P)``: for each row, the slot its ancestor wrote at each past position. A beam that moves changes
    its row of ``history`` only; no K/V is copied, and the process holds one cache, not a past and a
    present."""

    buffers: list[np.ndarray]
    history: np.ndarray

    def written(self, new: list[np.ndarray]) -> SlotCache:
        """This cache with ``new`` K/V ``(H, T, N, D)`` per layer written after the past positions."""
        past = self.history.shape[1]
        _, steps, rows, _ = new[0].shape
        buffers = [_room(b, past, past + steps, rows) for b in self.buffers]
        for buffer, values in zip(buffers, new):
            buffer[:, past : past + steps, :rows] = values
        own = np.broadcast_to(np.arange(rows)[:, None], (rows, steps))
        return SlotCache(buffers, np.concatenate([self.history, own], axis=1))

    def follow(self, rows: np.ndarray) -> SlotCache:
        return SlotCache(self.buffers, self.history[rows])

    def written_positions(self) -> list[np.ndarray]:
        """The buffers cut to the positions written so far (at least one): what a device copy needs."""
        used = max(self.history.shape[1], 1)
        return [np.ascontiguousarray(b[:, :used]) for b in self.buffers]

    def index(self) -> np.ndarray:
        """The decoder's ``cache_index (N, P)``: where row n's position p lies in a buffer's flattened
        (positions x slots) axes."""
        slots = self.buffers[0].shape[2]
        return self.history + np.arange(self.history.shape[1]) * slots


def _room(buffer: np.ndarray, used: int, positions: int, slots: int) -> np.ndarray:
    """``buffer``, or a larger copy of its first ``used`` positions when it lacks positions or slots."""
    heads, capacity, width, size = buffer.shape
    if positions <= capacity and slots <= width:
        return buffer
    capacity = max(capacity, -(-positions // CAPACITY_STEP) * CAPACITY_STEP)
    grown = lazy_zeros((heads, capacity, max(width, slots), size), buffer.dtype)
    grown[:, :used, :width] = buffer[:, :used]
    return grown


def lazy_zeros(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Zeros on an anonymous mapping of their own: a page becomes resident when first written, and all of
    them go back to the system when the array is dropped. ``np.zeros`` of a few MiB comes from glibc's
    heap once a freed block has raised its mmap threshold, and the heap kept one batch's cache after the
    batch (peak +23 MiB from the second batch on, engine benchmark; BENCHMARKS.md)."""
    count = math.prod(shape)
    size = count * np.dtype(dtype).itemsize
    return np.frombuffer(mmap.mmap(-1, max(size, 1)), dtype, count).reshape(shape)


class TokenRows:
    """Rows of a ``(vocab, d_model)`` token ``table`` stored in the file at ``path``, read with ``pread``."""

    def __init__(self, path: str | os.PathLike[str], table: StoredTensor) -> None:
        self.offset, self.dtype = table["offset"], np.dtype(table["dtype"])
        self.vocab, self.width = table["shape"]
        self._row = self.width * self.dtype.itemsize
        self._file = open(path, "rb", buffering=0)  # closed with this object

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """``(ids.size, d_model)``: the row of each id, in order."""
        unique, where = np.unique(ids, return_inverse=True)
        if len(unique) and not 0 <= unique[0] <= unique[-1] < self.vocab:
            raise ValueError(f"token ids must lie in [0, {self.vocab}), got {unique[0]}..{unique[-1]}")
        found = np.empty((len(unique), self.width), self.dtype)
        for row, token in zip(found, unique.tolist()):
            if os.preadv(self._file.fileno(), [row], self.offset + token * self._row) != self._row:
                raise OSError(f"{self._file.name}: the token table ends before row {token}")
        return found[where.reshape(-1)]


@dataclass
class Step:
    """One decoder step: the top-k log-probabilities after the bans, renormalized over what they left,
    ``values (rows, k)`` with their ``ids`` and ``log_mass (rows, 1)`` (the log of the probability the
    bans left), or, without top-k, the full ``values`` logits ``(rows, V)``; and the self-attention
    cache ``present``."""

    values: np.ndarray
    ids: np.ndarray | None
    log_mass: np.ndarray | None
    present: SlotCache


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
        token_rows: TokenRows | None = None,
        io_binding: bool = False,
        select: ort.InferenceSession | None = None,
    ):
        """``token_rows``: where the graphs' ``token_rows`` come from; every stored graph reads them
        (``None`` for graphs that look up their own, as calibration's fp32 graphs before storing)."""
        self.encoder, self.decoder, self.select_session = encoder, decoder, select
        self.token_rows = token_rows
        inputs = decoder.get_inputs()
        self.cross_names = [i.name for i in inputs if i.name.startswith("cross.")]
        self.cache_names = [i.name for i in inputs if i.name.startswith("cache.")]
        self.new_names = [name.replace("cache.", "new.", 1) for name in self.cache_names]
        first = next(i for i in inputs if i.name.startswith("cache."))
        self.cache_dtype = _NP_TYPES[first.type]
        self.heads, self.head_dim = first.shape[0], first.shape[3]
        self.device = "cuda" if "CUDAExecutionProvider" in decoder.get_providers() else "cpu"
        self.bound = io_binding or self.device == "cuda"
        self._top_k_slots = np.zeros(1, dtype=np.int64)
        self._no_rows = np.zeros(0, dtype=np.int64)  # logit_rows when only the top k are wanted

    # -- encoder -----------------------------------------------------------------------------------

    def encode(self, ids: np.ndarray, mask: np.ndarray) -> EncoderState:
        feeds = {"input_ids": ids, "attention_mask": mask} | self._looked_up(ids)
        if not self.bound:
            return EncoderState(list(self.encoder.run(self.cross_names, feeds)), mask)
        return EncoderState(self._run_bound(self.encoder, feeds, {}, [], self.cross_names)[1], mask)

    # -- decoder step ------------------------------------------------------------------------------

    def step(
        self,
        tokens: np.ndarray,
        state: EncoderState,
        past: SlotCache,
        top_k: int | None = None,
        bans: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> Step:
        """One decoder step for the last of ``tokens``.

        With ``top_k``: the k best log-probabilities after ``bans`` (``banned_ids``, ``banned_values``,
        both ``(rows, M)``: ``LogitFilters.ban_arrays``), computed in the graph. Without: the full
        logits (after ``bans``, if any).
        """
        banned_ids, banned_values = bans if bans is not None else self._no_bans(len(tokens))
        host = {
            "input_ids": tokens,
            "encoder_attention_mask": state.mask,
            "top_k_slots": self._slots(top_k or 1),
            "logit_rows": self._no_rows if top_k else np.zeros(len(tokens), dtype=np.int64),
            "banned_ids": banned_ids,
            "banned_values": banned_values,
        } | self._looked_up(tokens)
        heads = ["top_logprobs", "top_ids", "log_mass"] if top_k else ["logits"]
        buffers = past.buffers if self.device == "cpu" else past.written_positions()
        host |= {"cache_index": past.index()} | dict(zip(self.cache_names, buffers))
        device = dict(zip(self.cross_names, state.cross))
        if self.bound:
            out, _ = self._run_bound(self.decoder, host, device, heads + self.new_names, [])
        else:
            out = self.decoder.run(heads + self.new_names, host | device)
        out, new = out[: len(heads)], out[len(heads) :]
        present = past.written(new)
        if top_k:
            return Step(out[0], out[1], out[2], present)
        return Step(out[0], None, None, present)

    def _looked_up(self, ids: np.ndarray) -> dict[str, np.ndarray]:
        return {TOKEN_ROWS: self.token_rows.rows(ids)} if self.token_rows is not None else {}

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
        if self._top_k_slots.shape[0] != k:
            self._top_k_slots = np.zeros(k, dtype=np.int64)
        return self._top_k_slots

    # -- cache bookkeeping -------------------------------------------------------------------------

    def empty_past(self, rows: int, positions: int = CAPACITY_STEP, slots: int = 0) -> SlotCache:
        """A cache for ``rows`` rows with room for ``positions`` positions and ``slots`` slots (at least
        ``rows``); it grows past either when written there."""
        shape = (self.heads, positions, max(rows, slots), self.head_dim)
        buffers = [lazy_zeros(shape, self.cache_dtype) for _ in self.cache_names]
        return SlotCache(buffers, np.zeros((rows, 0), np.int64))

    def reorder(self, past: SlotCache, rows: np.ndarray) -> SlotCache:
        """Rows of the self-attention cache follow their beams (and drop finished sentences): only the
        history moves, never K/V."""
        return past.follow(rows)

    def select(self, state: EncoderState, sentences: np.ndarray) -> EncoderState:
        """Keep only the given sentences (when others have finished); cross K/V are never copied per step.
        On the device through the select graph under IO binding, else in numpy."""
        if self.bound and self.select_session is not None:
            outputs = [name.replace("cross.", "kept.", 1) for name in self.cross_names]
            feeds = dict(zip(self.cross_names, state.cross))
            cross = self._run_bound(self.select_session, {"rows": sentences.astype(np.int64)}, feeds, [], outputs)[1]
        else:
            cross = [self._wrap(self._host(c)[sentences]) for c in state.cross]
        return EncoderState(cross, state.mask[sentences])

    def _host(self, value: Any) -> np.ndarray:
        return value.numpy() if isinstance(value, ort.OrtValue) else value

    def _wrap(self, array: np.ndarray) -> Any:
        if not self.bound:
            return array
        return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), self.device, 0)


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
