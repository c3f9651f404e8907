"""Document translation: segment, split what is too long, window, translate every window of every
document in one engine call, stitch, and rebuild the layout. One result per document, always.

Plan for a batch of documents (pure steps, then one engine call, then pure steps again):
``segment`` -> ``split_long`` -> ``plan_windows`` -> ``Translator.translate_batch`` (all windows of all
documents together, so short documents fill batches) -> ``stitch`` (with a context-free retranslation
of the windows whose output does not align) -> ``assemble``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from worker.engine.search import DecodingOptions
from worker.engine.translator import Translator
from worker.text.degeneration import symptoms
from worker.text.segment import Sentence, segment
from worker.text.split import split_long
from worker.text.stitch import assemble, stitch
from worker.text.windows import Window, plan_windows

DEFAULT_BUDGET = 64  # source tokens per window (capped by the model's positions); ~4 demo-domain sentences
MAX_CHARS = 1_000_000  # longest document accepted; a longer one is an error result asking to split it
# Control and zero-width characters become spaces: offsets stay those of the source text.
_INVISIBLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u2028\u2029\u2060\ufeff]")


def sanitize(text: str) -> str:
    return _INVISIBLE.sub(" ", text)


@dataclass
class DocumentResult:
    id: str
    translation: str
    status: str  # "ok" | "error"
    error: str | None = None
    alignment: list[tuple[tuple[int, int], tuple[int, int]]] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)  # "split", "restitched", "length_limit", ...
    # "prepare": this document's segmenting and planning; "translate": its share (by source tokens)
    # of the engine time of the call it was translated in; "total": the two together.
    timings: dict[str, float] = field(default_factory=dict)
    tokens: int = 0  # source tokens the model saw, context sentences included


@dataclass
class _Plan:
    """One document's sentences (split to fit) and windows."""

    id: str
    text: str
    sentences: list[Sentence]
    windows: list[Window]
    tokens: int  # source tokens the model sees, context included
    flags: set[str]
    prepare_seconds: float = 0.0


class DocumentTranslator:
    def __init__(
        self, translator: Translator, *, budget: int = DEFAULT_BUDGET, overlap: int = 1, max_chars: int = MAX_CHARS
    ):
        limit = (translator.max_positions or budget + 2) - 2
        self.translator, self.budget, self.overlap = translator, min(budget, limit), overlap
        self.max_chars = max_chars

    def _count(self, text: str) -> int:
        return len(self.translator.tokenizer.encode(text))

    def plan(self, doc_id: str, text: str) -> _Plan:
        if len(text) > self.max_chars:
            raise ValueError(
                f"document has {len(text):,} characters, more than the limit of {self.max_chars:,}: "
                "split it into smaller documents"
            )
        clean = sanitize(text)
        flags: set[str] = {"cleaned"} if clean != text else set()
        text = clean
        sentences: list[Sentence] = []
        for sentence in segment(text):
            pieces = split_long(sentence, self._count, self.budget)
            flags |= {"split"} if len(pieces) > 1 else set()
            sentences += pieces
        counts = [self._count(s.text) for s in sentences]
        windows = plan_windows(doc_id, counts, budget=self.budget, overlap=self.overlap)
        return _Plan(doc_id, text, sentences, windows, sum(sum(counts[w.start : w.end]) for w in windows), flags)

    def translate(
        self, documents: Sequence[tuple[str, str]], options: DecodingOptions | None = None
    ) -> list[DocumentResult]:
        """``documents`` are ``(id, text)``; a document that fails becomes an error result, never an exception."""
        options = options or self.translator.options()
        plans = [self._plan_or_error(doc_id, text) for doc_id, text in documents]
        started = time.perf_counter()
        jobs = [(p, w) for p in plans if isinstance(p, _Plan) for w in p.windows]
        outputs = self.translator.translate_batch([_window_text(p, w) for p, w in jobs], options)
        per_sentence = self._stitched(jobs, [o.text for o in outputs], options)
        self._guard(jobs, ["length_limit" in o.flags for o in outputs], per_sentence, options)
        _copy_untranslatable(plans, per_sentence)
        for (plan, _), out in zip(jobs, outputs):
            plan.flags |= set(out.flags) - {"truncated_input"}
        per_token = (time.perf_counter() - started) / max(1, sum(p.tokens for p in plans if isinstance(p, _Plan)))
        return [p if isinstance(p, DocumentResult) else _result(p, per_sentence, per_token) for p in plans]

    def _plan_or_error(self, doc_id: str, text: str) -> _Plan | DocumentResult:
        started = time.perf_counter()
        try:
            plan = self.plan(doc_id, text)
        except Exception as err:  # noqa: BLE001 - bad input must not sink the batch
            seconds = time.perf_counter() - started
            return DocumentResult(doc_id, "", "error", f"{type(err).__name__}: {err}", timings={"total": seconds})
        plan.prepare_seconds = time.perf_counter() - started
        return plan

    def _stitched(self, jobs, texts: list[str], options: DecodingOptions) -> dict[tuple[int, int], str]:
        """(plan id, sentence index) -> translation; windows that do not align are retranslated sentence by sentence."""
        found: dict[tuple[int, int], str] = {}
        retry: list[tuple[_Plan, int]] = []
        for (plan, window), text in zip(jobs, texts):
            pieces = stitch(window, text)
            if pieces is None:
                plan.flags.add("restitched")
                retry += [(plan, i) for i in range(window.first, window.last)]
                continue
            for i, piece in zip(range(window.first, window.last), pieces):
                found[(id(plan), i)] = piece
        redone = self.translator.translate_batch([plan.sentences[i].text for plan, i in retry], options)
        for (plan, i), out in zip(retry, redone):
            found[(id(plan), i)] = out.text
        return found

    def _guard(self, jobs, limits: list[bool], found: dict[tuple[int, int], str], options: DecodingOptions) -> None:
        """Retry suspicious sentences alone, in fp32 when the artifact has it, with a wider beam and no
        repeated trigrams; keep the result with fewer symptoms."""
        suspects = []
        for (plan, window), limit in zip(jobs, limits):
            for i in range(window.first, window.last):
                seen = symptoms(plan.sentences[i].text, found[(id(plan), i)], hit_length_limit=limit)
                if seen:
                    suspects.append((plan, i, seen))
        if not suspects:
            return
        stronger = replace(
            options,
            beam_size=max(options.beam_size, 4),
            num_hypotheses=1,
            no_repeat_ngram_size=options.no_repeat_ngram_size or 3,
        )
        retry = (
            self.translator.at_precision("fp32") if "fp32" in self.translator.artifact.precisions else self.translator
        )
        redone = retry.translate_batch([plan.sentences[i].text for plan, i, _ in suspects], stronger)
        for (plan, i, before), out in zip(suspects, redone):
            plan.flags |= {"degenerate", "retried"}
            after = symptoms(plan.sentences[i].text, out.text, hit_length_limit="length_limit" in out.flags)
            if len(after) < len(before):
                found[(id(plan), i)] = out.text


def _result(plan: _Plan, per_sentence: dict[tuple[int, int], str], seconds_per_token: float) -> DocumentResult:
    translations = [per_sentence[(id(plan), i)] for i in range(len(plan.sentences))]
    text, alignment = assemble(plan.text, plan.sentences, translations)
    timings = {"prepare": plan.prepare_seconds, "translate": plan.tokens * seconds_per_token}
    timings["total"] = timings["prepare"] + timings["translate"]
    return DocumentResult(plan.id, text, "ok", None, alignment, sorted(plan.flags), timings, plan.tokens)


def _copy_untranslatable(plans, found: dict[tuple[int, int], str]) -> None:
    """Sentences of only punctuation, symbols or emoji pass through unchanged: there is nothing to translate."""
    for plan in plans:
        if not isinstance(plan, _Plan):
            continue
        for i, sentence in enumerate(plan.sentences):
            if not any(ch.isalnum() for ch in sentence.text):
                found[(id(plan), i)] = sentence.text
                plan.flags.add("copied")


def _window_text(plan: _Plan, window: Window) -> str:
    return " ".join(s.text for s in plan.sentences[window.start : window.end])
