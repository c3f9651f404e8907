"""Known failure modes of translation models, detected on one sentence's output.

opus-mt-en-zh in particular loops ("你好你好你好...") and ignores EOS until the length limit; small
models also change or drop numbers, or say nothing at all for a short input. The checks are cheap
and text-only, so they run on every sentence; the document layer retries a sentence that shows any
of them with stronger settings, keeps the better result, and flags what is left.
"""

from __future__ import annotations

import re
from collections import Counter

SYMPTOMS = frozenset({"empty", "repetition", "length_limit", "length_ratio", "numbers"})
# A unit of 2-8 characters four times in a row, or one character six times: a loop, not language.
_LOOP = re.compile(r"(.{2,8}?)\1{3,}|(.)\2{5,}", re.DOTALL)
MIN_RATIO, MAX_RATIO = 0.1, 4.0  # target/source characters outside these is suspicious
RATIO_MIN_SOURCE = 20  # ratios of very short sentences say nothing
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def symptoms(source: str, translation: str, *, hit_length_limit: bool = False) -> list[str]:
    """What looks wrong with ``translation`` of ``source``.

    "empty" when a source with letters or digits got no translation, "repetition", "length_limit",
    "length_ratio", and "numbers" when a number of the source is missing from the translation (extra
    ones are fine: "March" may become "3月")."""
    found = []
    if not translation.strip() and any(ch.isalnum() for ch in source):
        found.append("empty")
    if _LOOP.search(translation):
        found.append("repetition")
    if hit_length_limit:
        found.append("length_limit")
    if len(source.strip()) >= RATIO_MIN_SOURCE:
        ratio = len(translation.strip()) / len(source.strip())
        if not MIN_RATIO <= ratio <= MAX_RATIO:
            found.append("length_ratio")
    if _numbers(source) - _numbers(translation):
        found.append("numbers")
    return found


def _numbers(text: str) -> Counter[str]:
    return Counter(n.replace(",", "") for n in _NUMBER.findall(text))
