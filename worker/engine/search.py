"""Greedy and beam search over an ``Inference``, step for step the algorithm of Hugging Face ``generate``.

The parts play the roles of openai-whisper's ``decoding.py``: ``DecodingOptions`` (resolved for a batch
by ``for_batch``); ``LogitFilter``s, each one of generate's logits processors, in their order; a
``TokenDecoder``, greedy or beam, that picks the next tokens and says which sentences are done;
``LengthPenalty``, the one ranker of finished hypotheses; and one loop, ``generate``.

Parity with ``transformers`` is the correctness bar, so the rules are theirs: logit filters in their
order (on raw logits for greedy, on log-probabilities for beam), ``2 * beams`` candidates per sentence,
EOS candidates finish only from the top ``beams``, finished scores divided by ``generated_length **
length_penalty``, and their early-stop heuristic. Sentences leave the batch as soon as their result can
no longer change, so later steps get cheaper.

Lengths follow ``generate``: ``length`` counts the decoder start token, so ``max_length = 1 +
max_new_tokens``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, TypeVar

import numpy as np

from worker.engine.inference import EncoderState, Inference, SlotCache

NEG = -1.0e9  # the "impossible" score generate uses
Score = TypeVar("Score", np.ndarray, np.floating)  # summed log-probabilities: one, or one per row


@dataclass(frozen=True)
class DecodingOptions:
    """How to search. Defaults are generate's; ``from_generation_config`` applies a model's own."""

    beam_size: int = 1
    length_penalty: float = 1.0
    early_stopping: bool | Literal["never"] = False
    min_new_tokens: int = 0
    max_new_tokens: int = 256
    no_repeat_ngram_size: int = 0
    repetition_penalty: float = 1.0
    num_hypotheses: int = 1
    renormalize: bool = False  # generate's renormalize_logits: log-softmax again after the filters
    source_language: str | None = None  # multilingual models: the source's language token (m2m100, nllb, mbart)
    target_language: str | None = None  # forced first target token, a >>lang<< source token, or a T5 task
    source_prefix: str | None = None  # text put before every source (T5's task prefix, chosen by the languages)
    max_length_ratio: float | None = None  # cap new tokens at ratio * source length (per batch)

    def __post_init__(self) -> None:
        if self.beam_size < 1:
            raise ValueError(f"beam_size must be >= 1, got {self.beam_size}")
        if not 1 <= self.num_hypotheses <= self.beam_size:
            raise ValueError(
                f"num_hypotheses must be between 1 and beam_size ({self.beam_size}), got {self.num_hypotheses}"
            )
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if not 0 <= self.min_new_tokens <= self.max_new_tokens:
            raise ValueError(f"min_new_tokens must be between 0 and max_new_tokens ({self.max_new_tokens})")
        if self.repetition_penalty <= 0:
            raise ValueError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        if self.no_repeat_ngram_size < 0:
            raise ValueError(f"no_repeat_ngram_size must be >= 0, got {self.no_repeat_ngram_size}")
        if self.max_length_ratio is not None and self.max_length_ratio <= 0:
            raise ValueError(f"max_length_ratio must be > 0, got {self.max_length_ratio}")
        if self.early_stopping not in (True, False, "never"):
            raise ValueError(f"early_stopping must be true, false or 'never', got {self.early_stopping!r}")

    @classmethod
    def from_generation_config(cls, config: dict[str, Any], **overrides: Any) -> DecodingOptions:
        """The model's generation config, then ``overrides``; unknown override names are refused."""
        names = {f.name for f in fields(cls)}
        unknown = set(overrides) - names
        if unknown:
            raise ValueError(f"unknown decoding options {sorted(unknown)}: valid are {sorted(names)}")
        base: dict[str, Any] = {}
        if config.get("num_beams"):
            base["beam_size"] = config["num_beams"]
        for ours, theirs in (
            ("length_penalty", "length_penalty"),
            ("early_stopping", "early_stopping"),
            ("no_repeat_ngram_size", "no_repeat_ngram_size"),
            ("repetition_penalty", "repetition_penalty"),
            ("renormalize", "renormalize_logits"),
        ):
            if config.get(theirs) is not None:
                base[ours] = config[theirs]
        if config.get("max_new_tokens"):
            base["max_new_tokens"] = config["max_new_tokens"]
        elif config.get("max_length"):
            base["max_new_tokens"] = config["max_length"] - 1
        if config.get("min_length"):
            base["min_new_tokens"] = max(config["min_length"] - 1, 0)
        return cls(**(base | {k: v for k, v in overrides.items() if v is not None}))

    @property
    def max_length(self) -> int:
        """generate's ``max_length``: the new tokens and the decoder start."""
        return self.max_new_tokens + 1


def for_batch(options: DecodingOptions, *, longest_source: int, max_positions: int | None) -> DecodingOptions:
    """``options`` for one batch: new tokens capped at ``max_length_ratio`` times its longest source (never
    below ``min_new_tokens`` or 1), then both limits at what the decoder's ``max_positions`` hold."""
    most, least = options.max_new_tokens, options.min_new_tokens
    if options.max_length_ratio is not None:
        most = max(least, 1, min(most, math.ceil(options.max_length_ratio * longest_source)))
    if max_positions is not None and most > max_positions:
        most, least = max_positions, min(least, max_positions)
    return replace(options, max_new_tokens=most, min_new_tokens=least)


@dataclass(frozen=True)
class Vocabulary:
    """Special ids the search needs, from the artifact manifest."""

    decoder_start: int
    eos: int
    suppressed: tuple[int, ...] = ()  # never generated (e.g. Marian's pad)
    forced_eos: int | None = None  # forced at the length limit

    @classmethod
    def from_special_tokens(cls, special: dict[str, Any]) -> Vocabulary:
        """From the manifest's ``special_tokens``."""
        return cls(
            decoder_start=special["decoder_start_token_id"],
            eos=special["eos_token_id"],
            suppressed=tuple(special.get("suppressed_ids", [])),
            forced_eos=special.get("forced_eos_token_id"),
        )


@dataclass
class Hypothesis:
    tokens: list[int]  # generated ids, decoder start excluded, EOS included when generated
    score: float
    complete: bool = True  # False: a constrained search ended it at the length limit with a phrase not written


@dataclass
class SearchResult:
    hypotheses: list[Hypothesis] = field(default_factory=list)
    hit_length_limit: bool = False

    @classmethod
    def of(cls, hypotheses: list[Hypothesis], max_new_tokens: int) -> SearchResult:
        """A sentence's result: it hit the length limit when its best hypothesis fills ``max_new_tokens``."""
        return cls(hypotheses, bool(hypotheses) and len(hypotheses[0].tokens) >= max_new_tokens)


# ------------------------------------------------------------------------------------------------
# Logit filters, one of generate's logits processors each. A filter forces a token, bans ids, or
# rescales scores. Bans reach the decoder graph, so its top-k candidates are exact whatever is banned;
# a filter that rescales (which can reorder the top) needs the full vocabulary in Python.


class LogitFilter:
    """One logits processor; each kind overrides the one hook it uses."""

    rescales = False  # True: it changes kept scores, so the step must score the full vocabulary

    def forced_token(self, length: int) -> int | None:
        """The token every row must take at this ``length`` (generate: it scores 0, all others -inf)."""
        return None

    def banned(self, sequences: np.ndarray) -> list[set[int]]:
        """Per row of ``sequences (rows, length)``, the ids set to -inf at this step."""
        return [set() for _ in range(len(sequences))]

    def apply(self, scores: np.ndarray, sequences: np.ndarray) -> None:
        """On full scores ``(rows, V)``, in place: the bans. Forced steps never get here (see ``next_candidates``)."""
        for row, ids in enumerate(self.banned(sequences)):
            scores[row, list(ids)] = -np.inf


@dataclass(frozen=True)
class RepetitionPenalty(LogitFilter):
    """Scores of tokens already in the row: divided by ``penalty`` when positive, multiplied when negative."""

    penalty: float
    rescales = True

    def apply(self, scores: np.ndarray, sequences: np.ndarray) -> None:
        picked = np.take_along_axis(scores, sequences, axis=1)
        rescaled = np.where(picked < 0, picked * self.penalty, picked / self.penalty)
        np.put_along_axis(scores, sequences, rescaled, axis=1)


@dataclass(frozen=True)
class NoRepeatNGram(LogitFilter):
    """Bans each token that would complete an ``n``-gram already in the row."""

    n: int

    def banned(self, sequences: np.ndarray) -> list[set[int]]:
        return [self._completions(row) for row in sequences.tolist()]

    def _completions(self, row: list[int]) -> set[int]:
        n, length = self.n, len(row)
        if length + 1 < n:
            return set()
        prefix = tuple(row[length + 1 - n :])
        return {row[i + n - 1] for i in range(length - n + 1) if tuple(row[i : i + n - 1]) == prefix}


@dataclass(frozen=True)
class MinLength(LogitFilter):
    """Bans EOS while the rows are shorter than ``min_length``."""

    eos: int
    min_length: int

    def banned(self, sequences: np.ndarray) -> list[set[int]]:
        return [{self.eos} if sequences.shape[1] < self.min_length else set() for _ in range(len(sequences))]


@dataclass(frozen=True)
class ForcedBos(LogitFilter):
    """The first generated token: the target language's (many-to-many models)."""

    token: int

    def forced_token(self, length: int) -> int | None:
        return self.token if length == 1 else None


@dataclass(frozen=True)
class ForcedEos(LogitFilter):
    """The model's ``forced_eos_token_id`` as the last token a row has room for: hypotheses that reach
    the length limit end with it."""

    token: int
    max_length: int

    def forced_token(self, length: int) -> int | None:
        return self.token if length == self.max_length - 1 else None


@dataclass(frozen=True)
class SuppressTokens(LogitFilter):
    """Ids never generated."""

    ids: frozenset[int]

    def banned(self, sequences: np.ndarray) -> list[set[int]]:
        return [set(self.ids) for _ in range(len(sequences))]


@dataclass(frozen=True)
class LogitFilters:
    """The filters in generate's order, and its ``renormalize_logits`` after them. When two filters
    force a token at the same step, the first in the list wins."""

    filters: Sequence[LogitFilter]
    renormalize: bool = False

    @classmethod
    def of(cls, options: DecodingOptions, vocab: Vocabulary, forced_bos: int | None) -> LogitFilters:
        """The filters ``options`` and the model's ``vocab`` ask for; ``forced_bos`` from the request's framing."""
        chosen: list[LogitFilter] = []
        if options.repetition_penalty != 1.0:
            chosen.append(RepetitionPenalty(options.repetition_penalty))
        if options.no_repeat_ngram_size:
            chosen.append(NoRepeatNGram(options.no_repeat_ngram_size))
        if options.min_new_tokens:
            chosen.append(MinLength(vocab.eos, options.min_new_tokens + 1))
        if forced_bos is not None:
            chosen.append(ForcedBos(forced_bos))
        if vocab.forced_eos is not None:
            chosen.append(ForcedEos(vocab.forced_eos, options.max_length))
        if vocab.suppressed:
            chosen.append(SuppressTokens(frozenset(vocab.suppressed)))
        return cls(chosen, options.renormalize)

    def forced_token(self, length: int) -> int | None:
        return next((t for f in self.filters if (t := f.forced_token(length)) is not None), None)

    @property
    def top_k_exact(self) -> bool:
        """Whether the decoder graph's top-k after the bans is what the filters would leave on top."""
        return not any(f.rescales for f in self.filters)

    def bans(self, sequences: np.ndarray) -> list[set[int]]:
        """Per row of ``sequences``, the ids some filter sets to -inf at this step."""
        rows: list[set[int]] = [set() for _ in range(len(sequences))]
        for f in self.filters:
            for row, banned in zip(rows, f.banned(sequences)):
                row |= banned
        return rows

    def ban_arrays(self, sequences: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The bans as the decoder graph takes them: ``banned_ids (rows, M)`` and ``banned_values`` -inf;
        where a row has fewer than M bans, the rest is padding: value 0 at an id the row does not ban."""
        bans = [sorted(b) for b in self.bans(sequences)]
        width = max(1, max(map(len, bans)))
        ids = np.zeros((len(bans), width), dtype=np.int64)
        values = np.zeros((len(bans), width), dtype=np.float32)
        for row, banned in enumerate(bans):
            ids[row] = min(set(range(len(banned) + 1)) - set(banned))
            ids[row, : len(banned)], values[row, : len(banned)] = banned, -np.inf
        return ids, values

    def apply(self, scores: np.ndarray, sequences: np.ndarray) -> np.ndarray:
        """Every filter on full ``scores``, in order and in place (without the renormalization)."""
        for f in self.filters:
            f.apply(scores, sequences)
        return scores


# ------------------------------------------------------------------------------------------------
# One decoder step: each row's next-token candidates.


@dataclass
class Candidates:
    """Next-token candidates per row: processed log-probabilities ``values (rows, k)`` and ``ids (rows, k)``."""

    values: np.ndarray
    ids: np.ndarray

    @classmethod
    def forced(cls, rows: int, token: int, width: int) -> Candidates:
        """generate's forcing: the token scores 0, everything else -inf (padding ids are never used)."""
        values = np.full((rows, width), -np.inf, dtype=np.float32)
        values[:, 0] = 0.0
        ids = np.full((rows, width), -1, dtype=np.int64)
        ids[:, 0] = token
        return cls(values, ids)

    def repeat(self, times: int) -> Candidates:
        return Candidates(np.repeat(self.values, times, axis=0), np.repeat(self.ids, times, axis=0))


def next_candidates(
    inference: Inference,
    state: EncoderState,
    past: SlotCache,
    sequences: np.ndarray,
    filters: LogitFilters,
    decoder: TokenDecoder,
) -> tuple[Candidates, SlotCache]:
    """One decoder step for the last token of each row of ``sequences (rows, length)``: ``decoder.width``
    candidates per row, and the new cache.

    Forced steps skip the scores; otherwise the graph's top candidates after the bans, or, when a filter
    rescales or the decoder reads every score (``full_scores``), the full vocabulary filtered by the decoder's
    rule. The graph's candidates are renormalized over what the bans left, as generate's ``renormalize_logits``
    scores them; without it they are log-probabilities of the whole vocabulary again (a forced token scores 0
    either way)."""
    tokens = sequences[:, -1:]
    forced = filters.forced_token(sequences.shape[1])
    if forced is not None:
        out = inference.step(tokens, state, past, top_k=1)
        return Candidates.forced(len(tokens), forced, decoder.width), out.present
    if filters.top_k_exact and not decoder.full_scores:
        out = inference.step(tokens, state, past, top_k=decoder.width, bans=filters.ban_arrays(sequences))
        assert out.ids is not None and out.log_mass is not None
        values = out.values if filters.renormalize else out.values + out.log_mass
        return Candidates(values, out.ids), out.present
    out = inference.step(tokens, state, past)
    return decoder.from_logits(out.values.astype(np.float32), sequences, filters), out.present


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest per row, largest first (stable for ties)."""
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


# ------------------------------------------------------------------------------------------------
# Ranking and decoders.


@dataclass(frozen=True)
class LengthPenalty:
    """generate's ranking of hypotheses: summed log-probability over ``generated_length ** alpha``."""

    alpha: float

    def __call__(self, logprob: Score, length: int) -> Score:
        """``logprob`` ranked, in its own precision: float64 for greedy's sums, float32 for beams'."""
        return logprob / logprob.dtype.type(length**self.alpha)


class TokenDecoder(ABC):
    """Picks each open sentence's next tokens and says when its result is final (whisper's TokenDecoder).

    Each open sentence holds ``beams`` rows of the cache; a step gives ``width`` candidates per row."""

    beams: int
    width: int
    full_scores = False  # True: it reads every row's scores over the whole vocabulary, not the graph's top

    def __init__(self, options: DecodingOptions, vocab: Vocabulary) -> None:
        self.options, self.vocab = options, vocab
        self.rank = LengthPenalty(options.length_penalty)

    @abstractmethod
    def sequences(self) -> np.ndarray:
        """What the next step scores, one row per cache row ``(rows, length)``, decoder start first."""

    @abstractmethod
    def from_logits(self, logits: np.ndarray, sequences: np.ndarray, filters: LogitFilters) -> Candidates:
        """Candidates from full logits, filtered as generate filters them for this search."""

    @abstractmethod
    def update(self, candidates: Candidates) -> tuple[np.ndarray, np.ndarray]:
        """Extend every open sentence by one token. Returns the scored row each new cache row continues,
        and which open sentences are done."""

    @abstractmethod
    def finalize(self, done: np.ndarray) -> list[SearchResult]:
        """The results of the sentences ``done`` marks, in order; they leave the decoder."""


class GreedyDecoder(TokenDecoder):
    """The best token of each row; a sentence ends at EOS or the length limit."""

    beams = width = 1

    def __init__(self, batch: int, options: DecodingOptions, vocab: Vocabulary) -> None:
        super().__init__(options, vocab)
        self.running = np.full((batch, 1), vocab.decoder_start, dtype=np.int64)
        self.sums = np.zeros(batch)  # summed log-probabilities, float64

    def sequences(self) -> np.ndarray:
        return self.running

    def from_logits(self, logits: np.ndarray, sequences: np.ndarray, filters: LogitFilters) -> Candidates:
        """generate filters raw logits for greedy; the score is the (renormalized) log-probability."""
        processed = filters.apply(logits.copy(), sequences)
        chosen = processed.argmax(axis=1)
        scores = log_softmax(processed if filters.renormalize else logits)
        rows = np.arange(len(chosen))
        return Candidates(scores[rows, chosen][:, None], chosen[:, None].astype(np.int64))

    def update(self, candidates: Candidates) -> tuple[np.ndarray, np.ndarray]:
        rows = np.arange(len(self.running))
        best = candidates.values.argmax(axis=1)
        tokens = candidates.ids[rows, best]
        self.sums += candidates.values[rows, best]
        self.running = np.concatenate([self.running, tokens[:, None]], axis=1)
        return rows, (tokens == self.vocab.eos) | (self.running.shape[1] >= self.options.max_length)

    def finalize(self, done: np.ndarray) -> list[SearchResult]:
        results = []
        for row in np.flatnonzero(done):
            generated = self.running[row, 1:].tolist()
            score = float(self.rank(self.sums[row], len(generated)))
            results.append(SearchResult.of([Hypothesis(generated, score)], self.options.max_new_tokens))
        self.running, self.sums = self.running[~done], self.sums[~done]
        return results


class Finished:
    """One sentence's finished hypotheses: the best ``size``, best first (generate's ``BeamHypotheses``)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.hypotheses: list[Hypothesis] = []
        self.improvable = True  # False once no running beam can beat the worst one kept

    @property
    def full(self) -> bool:
        return len(self.hypotheses) == self.size

    @property
    def worst(self) -> float:
        return min(h.score for h in self.hypotheses)

    def add(self, new: list[Hypothesis]) -> None:
        """Keep the best ``size`` of those kept and ``new``; equal scores keep the earlier first, and an
        incomplete hypothesis (``Hypothesis.complete``) comes after every complete one."""
        self.hypotheses.extend(new)
        self.hypotheses.sort(key=lambda h: (not h.complete, -h.score))
        del self.hypotheses[self.size :]


class BeamDecoder(TokenDecoder):
    """generate's beam search, vectorised over the open sentences: ``running (sentences, beams, length)``."""

    def __init__(self, batch: int, options: DecodingOptions, vocab: Vocabulary) -> None:
        super().__init__(options, vocab)
        self.beams = k = options.beam_size
        self.width = 2 * k
        self.running = np.full((batch, k, 1), vocab.decoder_start, dtype=np.int64)
        # Beams 1.. start impossible: the first step's 2K candidates all continue beam 0.
        self.running_scores = np.tile(np.array([0.0] + [NEG] * (k - 1), dtype=np.float32), (batch, 1))
        self.finished = [Finished(k) for _ in range(batch)]

    def sequences(self) -> np.ndarray:
        """At the first step a sentence's beams are identical: one row each is scored."""
        length = self.running.shape[2]
        return self.running[:, 0] if length == 1 else self.running.reshape(-1, length)

    def from_logits(self, logits: np.ndarray, sequences: np.ndarray, filters: LogitFilters) -> Candidates:
        """generate filters log-probabilities for beam search, then renormalizes if asked."""
        full = filters.apply(log_softmax(logits), sequences)
        full = log_softmax(full) if filters.renormalize else full
        return Candidates(full, np.broadcast_to(np.arange(full.shape[1]), full.shape))

    def update(self, candidates: Candidates) -> tuple[np.ndarray, np.ndarray]:
        (n, k, length), first = self.running.shape, self.running.shape[2] == 1
        scores, beams, tokens = self._best_2k(candidates.repeat(k) if first else candidates)
        hits = (tokens == self.vocab.eos) | (length + 1 >= self.options.max_length)
        self._collect(scores, beams, tokens, hits)
        beams = self._continue(np.where(hits, scores + NEG, scores), beams, tokens)
        rows = np.repeat(np.arange(n), k) if first else (np.arange(n)[:, None] * k + beams).reshape(-1)
        return rows, self._done()

    def _best_2k(self, candidates: Candidates) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each sentence's best 2K continuations: ``(scores, beams, tokens)``, each ``(sentences, 2K)``.

        ``candidates`` holds each beam's best next tokens; the sentence's best 2K over all its beams
        are among them, so this picks exactly what generate's top-2K over beams x vocabulary picks."""
        (n, k, _), width = self.running.shape, candidates.values.shape[1]
        total = (candidates.values.reshape(n, k, width) + self.running_scores[:, :, None]).reshape(n, k * width)
        picks = top_k(total, 2 * k)
        tokens = np.take_along_axis(candidates.ids.reshape(n, k * width), picks, axis=1)
        return np.take_along_axis(total, picks, axis=1), picks // width, tokens

    def _continue(self, live: np.ndarray, beams: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """The best K of the 2K that did not finish (``live`` scores) run on; returns the beam each continues."""
        alive = top_k(live, self.beams)
        beams, tokens = np.take_along_axis(beams, alive, axis=1), np.take_along_axis(tokens, alive, axis=1)
        self.running_scores = np.take_along_axis(live, alive, axis=1)
        self.running = np.concatenate(
            [np.take_along_axis(self.running, beams[:, :, None], axis=1), tokens[:, :, None]], axis=2
        )
        return beams

    def _collect(self, scores: np.ndarray, beams: np.ndarray, tokens: np.ndarray, hits: np.ndarray) -> None:
        """EOS (or length-limit) candidates among the top K join their sentence's finished hypotheses."""
        length = self.running.shape[2]  # the decoder start and the tokens so far: as many as generated with the new one
        for i, pool in enumerate(self.finished):
            if not pool.improvable or (pool.full and self.options.early_stopping is True):
                continue
            pool.add(
                [
                    Hypothesis(
                        self.running[i, beams[i, c], 1:].tolist() + [int(tokens[i, c])],
                        float(self.rank(np.float32(scores[i, c]), length)),
                    )
                    for c in np.flatnonzero(hits[i, : self.beams])
                ]
            )

    def _done(self) -> np.ndarray:
        """Sentences whose result is final: no running beam can do better (generate's heuristic, by
        ``early_stopping``), or the length limit."""
        o, length = self.options, self.running.shape[2]
        best_length = o.max_length - 1 if o.early_stopping == "never" and o.length_penalty > 0.0 else length - 1
        best_possible = self.rank(self.running_scores.max(axis=1), best_length)
        done = np.zeros(len(self.finished), dtype=bool)
        for i, pool in enumerate(self.finished):
            if pool.full:
                pool.improvable &= bool(best_possible[i] > pool.worst)
            done[i] = not pool.improvable or (pool.full and o.early_stopping is True) or length >= o.max_length
        return done

    def finalize(self, done: np.ndarray) -> list[SearchResult]:
        best = [self.finished[i].hypotheses[: self.options.num_hypotheses] for i in np.flatnonzero(done)]
        keep = np.flatnonzero(~done)
        self.running, self.running_scores = self.running[keep], self.running_scores[keep]
        self.finished = [self.finished[i] for i in keep]
        return [SearchResult.of(hypotheses, self.options.max_new_tokens) for hypotheses in best]


# ------------------------------------------------------------------------------------------------


def generate(
    inference: Inference,
    state: EncoderState,
    options: DecodingOptions,
    vocab: Vocabulary,
    forced_bos: int | None = None,
    decoder: TokenDecoder | None = None,
) -> list[SearchResult]:
    """Translate the encoded batch; one result per sentence, in input order. ``options`` as resolved for
    the batch (``for_batch``); ``forced_bos``: the target language token generation starts with (from
    the request's framing); ``decoder``: one made for this batch (``worker.engine.constrained``), instead
    of generate's greedy or beam search."""
    batch = state.mask.shape[0]
    filters = LogitFilters.of(options, vocab, forced_bos)
    if decoder is None:
        decoder = GreedyDecoder(batch, options, vocab) if options.beam_size == 1 else BeamDecoder(batch, options, vocab)
    results = [SearchResult() for _ in range(batch)]
    open_ = np.arange(batch)  # input positions of the sentences still searched
    past = inference.empty_past(batch, options.max_new_tokens, batch * decoder.beams)  # a step writes one position
    while len(open_):
        candidates, past = next_candidates(inference, state, past, decoder.sequences(), filters, decoder)
        rows, done = decoder.update(candidates)
        past = inference.reorder(past, rows)
        if done.any():
            for sentence, result in zip(open_[done], decoder.finalize(done)):
                results[sentence] = result
            keep = np.flatnonzero(~done)
            open_, state = open_[keep], inference.select(state, keep)
            past = inference.reorder(past, (keep[:, None] * decoder.beams + np.arange(decoder.beams)).reshape(-1))
    return results
