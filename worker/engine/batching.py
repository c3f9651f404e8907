"""Length-sorted batches filled up to a token budget; results go back in input order.

A batch's cost is its padded source plus the target it may grow, per beam:
``rows * (longest_source + beams * target_estimate)``. Sorting by length keeps padding small;
the caller restores the input order from each batch's ``indices``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Batch:
    indices: tuple[int, ...]  # positions in the caller's input, longest source first
    cost: int  # tokens the batch is planned to hold


def plan_batches(
    lengths: Sequence[int], *, max_tokens: int, beams: int, target_estimate: Callable[[int], int]
) -> list[Batch]:
    """Group source positions into batches of at most ``max_tokens`` (a lone long sentence may exceed it)."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[Batch] = []
    current: list[int] = []
    for i in order:
        longest = lengths[current[0]] if current else lengths[i]
        cost = (len(current) + 1) * (longest + beams * target_estimate(longest))
        if current and cost > max_tokens:
            batches.append(_close(current, lengths, beams, target_estimate))
            current = []
        current.append(i)
    if current:
        batches.append(_close(current, lengths, beams, target_estimate))
    return batches


def _close(indices: list[int], lengths: Sequence[int], beams: int, target_estimate: Callable[[int], int]) -> Batch:
    longest = lengths[indices[0]]
    return Batch(tuple(indices), len(indices) * (longest + beams * target_estimate(longest)))
