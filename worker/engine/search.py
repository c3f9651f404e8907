"""Greedy and beam search over an ``Inference``, step for step the algorithm of Hugging Face ``generate``.

Parity with ``transformers`` is the correctness bar, so the rules are theirs: logit filters in
their order (on raw logits for greedy, on log-probabilities for beam), ``2 * beams`` candidates
per sentence, EOS candidates finish only from the top ``beams``, finished scores divided by
``generated_length ** length_penalty``, and their early-stop heuristic. Sentences leave the batch
as soon as their result can no longer change, so later steps get cheaper.

Lengths follow ``generate``: ``length`` counts the decoder start token, so ``max_length = 1 +
max_new_tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

import numpy as np

from worker.engine.inference import EncoderState, Inference

NEG = -1.0e9  # the "impossible" score generate uses


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


@dataclass(frozen=True)
class Vocabulary:
    """Special ids the search needs, from the artifact manifest."""

    decoder_start: int
    eos: int
    suppressed: tuple[int, ...] = ()  # never generated (e.g. Marian's pad)
    forced_eos: int | None = None  # forced at the length limit


@dataclass
class Hypothesis:
    tokens: list[int]  # generated ids, decoder start excluded, EOS included when generated
    score: float


@dataclass
class SearchResult:
    hypotheses: list[Hypothesis] = field(default_factory=list)
    hit_length_limit: bool = False


# ------------------------------------------------------------------------------------------------
# Logit filters, in generate's order. Bans reach the decoder graph, so its top-k candidates are exact
# whatever is banned; only the repetition penalty (which rescales, and can reorder the top) needs the
# full vocabulary in Python.


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


class Filters:
    def __init__(self, options: DecodingOptions, vocab: Vocabulary, forced_bos: int | None):
        self.options, self.vocab, self.forced_bos = options, vocab, forced_bos
        self.max_length = options.max_new_tokens + 1
        self.min_length = options.min_new_tokens + 1 if options.min_new_tokens else 0
        # Repetition penalty rescales kept tokens, which can reorder the top: only the full pass is exact.
        self.top_k_exact = options.repetition_penalty == 1.0

    def forced_token(self, length: int) -> int | None:
        if self.forced_bos is not None and length == 1:
            return self.forced_bos
        if self.vocab.forced_eos is not None and length == self.max_length - 1:
            return self.vocab.forced_eos
        return None

    def bans(self, sequences: np.ndarray) -> list[set[int]]:
        """Per row, the ids generate would set to -inf at this step."""
        always = set(self.vocab.suppressed)
        if sequences.shape[1] < self.min_length:
            always.add(self.vocab.eos)
        n = self.options.no_repeat_ngram_size
        if not n:
            return [always] * len(sequences)
        return [always | _repeated_ngram_ends(seq, n) for seq in sequences.tolist()]

    def ban_arrays(self, sequences: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The bans as the decoder graph takes them: ``banned_ids (rows, M)`` and ``banned_values`` (-inf,
        or 0 where a row has fewer than M bans)."""
        bans = [sorted(b) for b in self.bans(sequences)]
        width = max(1, max(map(len, bans)))
        ids = np.zeros((len(bans), width), dtype=np.int64)
        values = np.zeros((len(bans), width), dtype=np.float32)
        for row, banned in enumerate(bans):
            ids[row, : len(banned)], values[row, : len(banned)] = banned, -np.inf
        return ids, values

    def on_full(self, sequences: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """All filters on full scores (raw logits for greedy, log-probabilities for beam), as generate does."""
        if self.options.repetition_penalty != 1.0:
            penalty = self.options.repetition_penalty
            picked = np.take_along_axis(scores, sequences, axis=1)
            np.put_along_axis(scores, sequences, np.where(picked < 0, picked * penalty, picked / penalty), axis=1)
        for row, banned in enumerate(self.bans(sequences)):
            scores[row, list(banned)] = -np.inf
        return scores


def _repeated_ngram_ends(seq: list[int], n: int) -> set[int]:
    """Tokens that would complete an n-gram already present in ``seq`` (generate's no_repeat_ngram_size)."""
    length = len(seq)
    if length + 1 < n:
        return set()
    prefix = tuple(seq[length + 1 - n :])
    return {seq[i + n - 1] for i in range(length - n + 1) if tuple(seq[i : i + n - 1]) == prefix}


def next_candidates(
    inference: Inference,
    state: EncoderState,
    past: list[np.ndarray],
    sequences: np.ndarray,
    filters: Filters,
    *,
    need: int,
    greedy: bool,
) -> tuple[Candidates, list[np.ndarray]]:
    """One decoder step for the last token of each row of ``sequences (rows, length)``.

    Forced steps skip the scores; otherwise the graph's top ``need`` candidates after the bans, and the
    full vocabulary when a repetition penalty is set. ``renormalize`` divides by what probability the
    bans left, as generate's ``renormalize_logits`` does (a forced token scores 0 either way)."""
    tokens = sequences[:, -1:]
    renormalize = filters.options.renormalize
    forced = filters.forced_token(sequences.shape[1])
    if forced is not None:
        out = inference.step(tokens, state, past, top_k=1)
        return Candidates.forced(len(tokens), forced, need), out.present
    if filters.top_k_exact:
        out = inference.step(tokens, state, past, top_k=need, bans=filters.ban_arrays(sequences))
        assert out.ids is not None and out.log_mass is not None
        return Candidates(out.values - out.log_mass if renormalize else out.values, out.ids), out.present
    out = inference.step(tokens, state, past)
    logits = out.values.astype(np.float32)
    if greedy:  # generate filters raw logits for greedy; the score is the (renormalized) log-probability
        processed = filters.on_full(sequences, logits.copy())
        chosen = processed.argmax(axis=1)
        scores = log_softmax(processed if renormalize else logits)
        rows = np.arange(len(chosen))
        return Candidates(scores[rows, chosen][:, None], chosen[:, None].astype(np.int64)), out.present
    full = filters.on_full(sequences, log_softmax(logits))
    full = log_softmax(full) if renormalize else full
    return Candidates(full, np.broadcast_to(np.arange(full.shape[1]), full.shape)), out.present


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest per row, largest first (stable for ties)."""
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


# ------------------------------------------------------------------------------------------------


def generate(
    inference: Inference,
    state: EncoderState,
    options: DecodingOptions,
    vocab: Vocabulary,
    forced_bos: int | None = None,
) -> list[SearchResult]:
    """Translate the encoded batch; one result per sentence, in input order. ``forced_bos``: the target
    language token generation starts with (from the request's framing)."""
    filters = Filters(options, vocab, forced_bos)
    if options.beam_size == 1:
        return _greedy(inference, state, options, vocab, filters)
    return BeamSearch(inference, options, vocab, filters).run(state)


def _greedy(
    inference: Inference, state: EncoderState, options: DecodingOptions, vocab: Vocabulary, filters: Filters
) -> list[SearchResult]:
    batch = state.mask.shape[0]
    results = [SearchResult() for _ in range(batch)]
    active = np.arange(batch)
    sequences = np.full((batch, 1), vocab.decoder_start, dtype=np.int64)
    sums = np.zeros(batch)
    past = inference.empty_past(batch)
    while len(active):
        cands, past = next_candidates(inference, state, past, sequences, filters, need=1, greedy=True)
        best = cands.values.argmax(axis=1)
        rows = np.arange(len(best))
        tokens = cands.ids[rows, best]
        sums += cands.values[rows, best]
        sequences = np.concatenate([sequences, tokens[:, None]], axis=1)
        done = (tokens == vocab.eos) | (sequences.shape[1] >= filters.max_length)
        for row in np.flatnonzero(done):
            generated = sequences[row, 1:].tolist()
            score = sums[row] / (len(generated) ** options.length_penalty)
            limit = len(generated) >= options.max_new_tokens
            results[active[row]] = SearchResult([Hypothesis(generated, float(score))], limit)
        keep = np.flatnonzero(~done)
        if len(keep) < len(active):
            active, sequences, sums = active[keep], sequences[keep], sums[keep]
            state, past = inference.select(state, keep), inference.reorder(past, keep)
    return results


class BeamSearch:
    """generate's beam search, vectorised over the sentences still open."""

    def __init__(self, inference: Inference, options: DecodingOptions, vocab: Vocabulary, filters: Filters):
        self.inference, self.options, self.vocab, self.filters = inference, options, vocab, filters
        self.k = options.beam_size

    def run(self, state: EncoderState) -> list[SearchResult]:
        k, batch = self.k, state.mask.shape[0]
        self.results = [SearchResult() for _ in range(batch)]
        self.active = np.arange(batch)
        self.running = np.full((batch, k, 1), self.vocab.decoder_start, dtype=np.int64)  # (B, K, length)
        self.running_scores = np.tile(np.array([0.0] + [NEG] * (k - 1), dtype=np.float32), (batch, 1))
        self.finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(batch)]
        self.improvable = np.ones(batch, dtype=bool)
        past = self.inference.empty_past(batch)  # step 0 runs one row per sentence: its beams are identical
        while len(self.active):
            length = self.running.shape[2]
            first = length == 1
            sequences = self.running[:, :1] if first else self.running
            cands, past = next_candidates(
                self.inference, state, past, sequences.reshape(-1, length), self.filters, need=2 * k, greedy=False
            )
            if first:
                cands, past = cands.repeat(k), self.inference.expand(past, k)
            rows = self._advance(cands, length)
            past = self.inference.reorder(past, rows)
            keep = self._close_done(length + 1)
            if keep is not None:
                state = self.inference.select(state, keep)
                past = self.inference.reorder(past, (keep[:, None] * k + np.arange(k)).reshape(-1))
        return self.results

    def _advance(self, cands: Candidates, length: int) -> np.ndarray:
        """One step for every open sentence; returns the cache rows the new beams continue.

        ``cands`` holds each beam's best next tokens; the sentence's best 2K over all its beams
        are among them, so this picks exactly what generate's top-2K over beams x vocabulary picks.
        """
        k, n = self.k, len(self.active)
        width = cands.values.shape[1]
        total = (cands.values.reshape(n, k, width) + self.running_scores[:, :, None]).reshape(n, k * width)
        picks = top_k(total, 2 * k)  # (n, 2K)
        cand_scores = np.take_along_axis(total, picks, axis=1)
        cand_beams = picks // width
        cand_tokens = np.take_along_axis(cands.ids.reshape(n, k * width), picks, axis=1)
        hits = (cand_tokens == self.vocab.eos) | (length + 1 >= self.filters.max_length)
        self._collect_finished(cand_scores, cand_beams, cand_tokens, hits, length)
        alive = top_k(np.where(hits, cand_scores + NEG, cand_scores), k)  # (n, K) positions in candidates
        beams = np.take_along_axis(cand_beams, alive, axis=1)
        tokens = np.take_along_axis(cand_tokens, alive, axis=1)
        self.running_scores = np.take_along_axis(np.where(hits, cand_scores + NEG, cand_scores), alive, axis=1)
        self.running = np.concatenate(
            [np.take_along_axis(self.running, beams[:, :, None], axis=1), tokens[:, :, None]], axis=2
        )
        return (np.arange(n)[:, None] * k + beams).reshape(-1)

    def _collect_finished(self, scores, beams, tokens, hits, length: int) -> None:
        """EOS (or length-limit) candidates among the top K join their sentence's finished set."""
        penalty = float(length**self.options.length_penalty)  # generated length incl. the new token
        for i in range(len(self.active)):
            if not self.improvable[i] or (self._all_finished(i) and self.options.early_stopping is True):
                continue
            pool = self.finished[i]
            for c in np.flatnonzero(hits[i, : self.k]):
                tokens_so_far = self.running[i, beams[i, c], 1:].tolist() + [int(tokens[i, c])]
                pool.append((float(np.float32(scores[i, c]) / np.float32(penalty)), tokens_so_far))
            pool.sort(key=lambda h: -h[0])
            del pool[self.k :]

    def _all_finished(self, i: int) -> bool:
        return len(self.finished[i]) == self.k

    def _close_done(self, length: int) -> np.ndarray | None:
        """Record sentences whose result is final; returns the open ones' positions if any closed."""
        o = self.options
        if o.early_stopping == "never" and o.length_penalty > 0.0:
            best_length = self.filters.max_length - 1
        else:
            best_length = length - 1
        best_possible = self.running_scores[:, 0] / np.float32(best_length**o.length_penalty)
        done = np.zeros(len(self.active), dtype=bool)
        for i in range(len(self.active)):
            full = self._all_finished(i)
            if full:
                self.improvable[i] &= bool(best_possible[i] > min(s for s, _ in self.finished[i]))
            done[i] = (
                (not self.improvable[i]) or (full and o.early_stopping is True) or length >= self.filters.max_length
            )
        for i in np.flatnonzero(done).tolist():
            hyps = [Hypothesis(t, s) for s, t in self.finished[i][: o.num_hypotheses]]
            limit = bool(hyps) and len(hyps[0].tokens) >= o.max_new_tokens
            self.results[self.active[i]] = SearchResult(hyps, limit)
        if not done.any():
            return None
        keep = np.flatnonzero(~done)
        self.active = self.active[keep]
        self.running, self.running_scores = self.running[keep], self.running_scores[keep]
        self.finished = [self.finished[i] for i in keep]
        self.improvable = self.improvable[keep]
        return keep
