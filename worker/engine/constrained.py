"""Lexically constrained beam search: target phrases a sentence's translation must contain (a glossary's
terms), by dynamic beam allocation (Post & Vilar 2018, as Sockeye and fairseq run it).

Each hypothesis knows where it stands with its sentence's phrases (``Progress``): those written, and the one
under way with how many of its tokens. A step's candidates are generate's best 2K over all beams, each beam's
best token, and each beam's tokens that advance a phrase. They are grouped into banks by how many phrase tokens
they have written, and the beam is filled from the banks in turn, the most advanced bank first and the best
first within a bank (fairseq's round robin): hypotheses that have written more of the phrases are kept beside
those that read best. A hypothesis may end only once every phrase is written, and one the model would end (EOS its
best token) may only go on with a phrase, not babble on until it finds a place for one; one the length limit stops
before every phrase is written comes back ``complete=False``, ranked after every complete one.

Only sentences with phrases are searched this way (``Translator``); every other sentence keeps generate's search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from worker.engine.search import (
    NEG,
    BeamDecoder,
    Candidates,
    DecodingOptions,
    Hypothesis,
    SearchResult,
    Vocabulary,
    top_k,
)

Phrase = tuple[tuple[int, ...], ...]  # the ways a phrase may be written, each its target ids in a row
Phrases = tuple[Phrase, ...]  # one sentence's phrases


@dataclass(frozen=True)
class Progress:
    """Where one hypothesis stands with its sentence's phrases."""

    written: frozenset[int] = frozenset()  # phrases written whole
    written_tokens: int = 0  # their tokens
    phrase: int = -1  # the phrase under way, -1 for none
    way: int = 0  # which of its ways
    at: int = 0  # how many of its tokens are written

    @property
    def tokens(self) -> int:
        """Phrase tokens written: the hypothesis's bank."""
        return self.written_tokens + self.at

    def complete(self, phrases: Phrases) -> bool:
        return len(self.written) == len(phrases)

    def advancing(self, phrases: Phrases) -> set[int]:
        """The tokens that write more of a phrase: the next of the one under way, else the first of each way of
        each phrase not written."""
        if self.phrase >= 0:
            return {phrases[self.phrase][self.way][self.at]}
        return {way[0] for p, phrase in enumerate(phrases) if p not in self.written for way in phrase}

    def after(self, token: int, phrases: Phrases) -> Progress:
        """The progress once ``token`` is written: a phrase under way goes on, or is given up (and ``token`` may
        start another, or the same one again)."""
        if self.phrase >= 0 and phrases[self.phrase][self.way][self.at] == token:
            return self._advanced(self.phrase, self.way, self.at + 1, phrases)
        starts = (
            (p, w) for p, phrase in enumerate(phrases) if p not in self.written for w, way in enumerate(phrase)
            if way[0] == token
        )  # fmt: skip
        start = next(starts, None)
        return Progress(self.written, self.written_tokens) if start is None else self._advanced(*start, 1, phrases)

    def _advanced(self, phrase: int, way: int, at: int, phrases: Phrases) -> Progress:
        if at == len(phrases[phrase][way]):
            return Progress(self.written | {phrase}, self.written_tokens + at)
        return Progress(self.written, self.written_tokens, phrase, way, at)


@dataclass(frozen=True)
class _Candidate:
    score: float  # summed log-probability with the token
    beam: int
    token: int
    progress: Progress
    bank: int  # phrase tokens written with the token


class ConstrainedBeamDecoder(BeamDecoder):
    """Beam search in which every sentence of the batch has ``phrases`` its translation must contain."""

    full_scores = True  # a phrase's next token is rarely among the graph's top candidates

    def __init__(self, phrases: Sequence[Phrases], options: DecodingOptions, vocab: Vocabulary) -> None:
        if not all(p and all(phrase and all(phrase) for phrase in p) for p in phrases):
            raise ValueError("every sentence of a constrained search needs phrases, every phrase a way, every way ids")
        super().__init__(len(phrases), options, vocab)
        self.phrases = list(phrases)
        self.progress = [[Progress()] * self.beams for _ in phrases]

    def update(self, candidates: Candidates) -> tuple[np.ndarray, np.ndarray]:
        (n, k, length), first = self.running.shape, self.running.shape[2] == 1
        candidates = candidates.repeat(k) if first else candidates
        width = candidates.values.shape[1]
        totals = candidates.values.reshape(n, k, width) + self.running_scores[:, :, None]
        ids = candidates.ids.reshape(n, k, width)
        at_limit = length + 1 >= self.options.max_length
        chosen = [self._step(i, totals[i], ids[i], at_limit) for i in range(n)]
        beams = np.array([[c.beam for c in row] for row in chosen], dtype=np.int64)
        tokens = np.array([[c.token for c in row] for row in chosen], dtype=np.int64)
        self.running_scores = np.array([[c.score for c in row] for row in chosen], dtype=np.float32)
        self.running = np.concatenate(
            [np.take_along_axis(self.running, beams[:, :, None], axis=1), tokens[:, :, None]], axis=2
        )
        self.progress = [[c.progress for c in row] for row in chosen]
        rows = np.repeat(np.arange(n), k) if first else (np.arange(n)[:, None] * k + beams).reshape(-1)
        return rows, self._done()

    def _step(self, i: int, totals: np.ndarray, ids: np.ndarray, at_limit: bool) -> list[_Candidate]:
        """Sentence ``i``'s next beams (``totals``, ``ids``: its candidates, ``(beams, width)``); candidates that
        end among the first K of the allocation join its finished hypotheses."""
        order = _allocated(self._candidates(i, totals, ids, at_limit))
        k = self.beams
        running: list[_Candidate] = []
        ending: list[_Candidate] = []
        for rank, candidate in enumerate(order):
            if candidate.token == self.vocab.eos or at_limit:
                if rank < k:
                    ending.append(candidate)
            elif len(running) < k:
                running.append(candidate)
            if len(running) == k:
                break
        self._finish(i, ending)
        filler = _Candidate(float(NEG), 0, self.vocab.eos, Progress(), 0)  # a beam that can never be chosen again
        return running + [filler] * (k - len(running))

    def _candidates(self, i: int, totals: np.ndarray, ids: np.ndarray, at_limit: bool) -> list[_Candidate]:
        """Generate's best 2K over the beams, each beam's best token and its tokens that advance a phrase; EOS
        only for hypotheses that have written every phrase (or at the length limit)."""
        phrases, progress, eos = self.phrases[i], self.progress[i], self.vocab.eos
        scores = totals.copy()
        for beam, where in enumerate(progress):
            if at_limit or where.complete(phrases):
                continue
            if ids[beam, int(totals[beam].argmax())] == eos:  # the model would end here: only a phrase may go on
                advancing = np.isin(ids[beam], list(where.advancing(phrases)))
                scores[beam][~advancing] = -np.inf
            scores[beam][ids[beam] == eos] = -np.inf
        width = scores.shape[1]
        picks = {(int(p) // width, int(p) % width) for p in top_k(scores.reshape(1, -1), 2 * self.beams)[0]}
        for beam in range(len(scores)):
            picks.add((beam, int(scores[beam].argmax())))
            for token in progress[beam].advancing(phrases):
                picks.update((beam, int(column)) for column in np.flatnonzero(ids[beam] == token))
        return [
            _Candidate(float(scores[b, c]), b, token, after, after.tokens)
            for b, c in sorted(picks)
            if scores[b, c] > NEG / 2 and (token := int(ids[b, c])) >= 0
            for after in (progress[b].after(token, phrases),)
        ]

    def _finish(self, i: int, ending: list[_Candidate]) -> None:
        pool, length = self.finished[i], self.running.shape[2]
        if not ending or not pool.improvable or (pool.full and self.options.early_stopping is True):
            return
        pool.add(
            [
                Hypothesis(
                    self.running[i, c.beam, 1:].tolist() + [c.token],
                    float(self.rank(np.float32(c.score), length)),
                    c.progress.complete(self.phrases[i]),
                )
                for c in ending
            ]
        )

    def finalize(self, done: np.ndarray) -> list[SearchResult]:
        keep = np.flatnonzero(~done)
        self.phrases = [self.phrases[i] for i in keep]
        self.progress = [self.progress[i] for i in keep]
        return super().finalize(done)


def _allocated(candidates: list[_Candidate]) -> list[_Candidate]:
    """The candidates in the order the beam takes them: the best of each bank, the most advanced bank first,
    then the second best of each, and so on."""
    banks: dict[int, list[_Candidate]] = {}
    for candidate in sorted(candidates, key=lambda c: -c.score):
        banks.setdefault(candidate.bank, []).append(candidate)
    levels = sorted(banks, reverse=True)
    deepest = max((len(b) for b in banks.values()), default=0)
    return [banks[level][r] for r in range(deepest) for level in levels if r < len(banks[level])]
