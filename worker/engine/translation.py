"""What the engine gives back for a sentence: its best hypothesis, the others, and its flags."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Alternative:
    """One hypothesis of a sentence: its text, generated ids (EOS included when generated) and search score."""

    text: str
    tokens: list[int]
    score: float


@dataclass
class Translation:
    """The best hypothesis first in ``hypotheses`` (``num_hypotheses`` of them), and the sentence's flags."""

    text: str
    tokens: list[int]
    score: float
    hypotheses: list[Alternative] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)  # "truncated_input", "length_limit"
    source_tokens: int = 0  # what the model read
    reused: bool = False  # from a translation memory, or another copy of the text in the same call
    error: str | None = None  # why the sentence could not be read (it was not translated: ``text`` is empty)
