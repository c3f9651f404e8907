"""The self-attention cache written in place (``SlotCache``): what the decoder reads through
``cache_index`` is each row's own past, however beams moved, sentences finished or the buffers grew."""

from __future__ import annotations

import numpy as np

from worker.engine.inference import CAPACITY_STEP, SlotCache

HEADS, SIZE = 2, 3


def read(cache: SlotCache) -> np.ndarray:
    """What the decoder's ``past_keys`` gathers: ``(H, N, P, D)``."""
    heads, _, _, size = cache.buffers[0].shape
    return cache.buffers[0].reshape(heads, -1, size)[:, cache.index()]


def values(rows: int, steps: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((HEADS, steps, rows, SIZE)).astype(np.float32)


def test_rows_read_their_own_past_through_moves_finishes_and_growth() -> None:
    cache = SlotCache([np.zeros((HEADS, CAPACITY_STEP, 1, SIZE), np.float32)], np.zeros((1, 0), np.int64))
    expected = np.zeros((HEADS, 1, 0, SIZE), np.float32)  # the past each row must read, kept the slow way
    rng = np.random.default_rng(0)
    rows = 1
    for step in range(2 * CAPACITY_STEP + 3):  # past two growths of the positions
        steps = 2 if step == 0 else 1  # a forced prefix, then one token a step
        new = values(rows, steps, step)
        cache = cache.written([new])
        expected = np.concatenate([expected, new.transpose(0, 2, 1, 3)], axis=2)
        np.testing.assert_array_equal(read(cache), expected)
        if step == 0:
            parents = np.zeros(4, np.int64)  # one row per sentence at first, then 4 beams: the slots grow
        elif step == CAPACITY_STEP:
            parents = np.array([0, 2])  # a sentence finished: fewer rows
        else:
            parents = rng.integers(0, rows, rows)  # beams move, some twice, some not at all
        cache, expected, rows = cache.follow(parents), expected[:, parents], len(parents)
    assert cache.buffers[0].shape[1] == 3 * CAPACITY_STEP


def test_moving_beams_copies_no_key_or_value() -> None:
    cache = SlotCache([np.zeros((HEADS, CAPACITY_STEP, 4, SIZE), np.float32)], np.zeros((4, 0), np.int64))
    cache = cache.written([values(4, 1, 0)])
    moved = cache.follow(np.array([3, 3, 1, 0]))
    assert moved.buffers[0] is cache.buffers[0]
    np.testing.assert_array_equal(moved.history, [[3], [3], [1], [0]])
