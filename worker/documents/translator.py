"""Document translation: segment, split what is too long, window, translate every window of every
document in one engine call, stitch, check, and rebuild the layout. One result per document, always.

Plan for a batch of documents (pure steps, then one engine call, then pure steps again):
``units`` (the document's translatable text with its markup set aside, per ``format``) -> ``line_spans``
-> ``split_long`` -> ``plan_windows`` -> ``Translator.translate_batch`` (all windows of all documents
together, so short documents fill batches) -> ``stitch`` (with a context-free retranslation of the
windows whose output does not align) -> the degeneration guard -> ``place`` (markup back around the
words it enclosed) -> ``render``.

Nothing is silently wrong: every sentence ends with a translation that passed the checks, a retried
one that passed (flag ``retried``), or one that still shows a symptom (``empty``, ``repetition``,
``length_limit``, ``length_ratio``, ``numbers``), which makes its document ``partial`` rather than ``ok``;
so does a Markdown line whose markup could not be lifted out (``markup_unparsed``: translated as text).
"""

from __future__ import annotations

import bisect
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate, pairwise

from contract import settings
from contract.glossary import Glossary, Match
from contract.options import JobOptions
from worker.documents import languages, markup, structure, terms
from worker.documents.degeneration import SYMPTOMS, symptoms
from worker.documents.languages import Routing
from worker.documents.marks import Mark, Unit
from worker.documents.segment import Sentence, line_spans
from worker.documents.split import split_long
from worker.documents.stitch import render, split_target, stitch
from worker.documents.windows import Window, plan_windows
from worker.engine.memory import LocalMemory, Memory
from worker.engine.search import DecodingOptions
from worker.engine.translation import Translation
from worker.engine.translator import Translator

# Marks up to this many characters (links, emphasis of a phrase) keep their words in one sentence.
MARK_IN_ONE_SENTENCE = 300
DEFAULTS = JobOptions()  # a job's options, where neither the job nor the caller sets them
# A sentence whose markup could not be lifted out went to the model markup and all: its document is partial.
# A document whose translation lost or changed markup (``worker.documents.structure``) says so too.
MARKUP_SYMPTOMS = frozenset({"markup_unparsed", "markup_changed"})
# A paragraph in a language the model cannot read goes through untranslated: its document is partial.
LANGUAGE_SYMPTOMS = frozenset({"language_unread"})
# Terms' words translated alone, kept for the process's later chunks when the job keeps no memory (exact: the
# key holds the engine and its options, as the memory's own does).
RENDERINGS = LocalMemory(capacity=10_000)
# A glossary term that could not be put into its sentence's translation: its document is partial.
TERM_SYMPTOMS = frozenset({"term_missed"})
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")  # what ends a paragraph of text or Markdown
# Control and zero-width characters become spaces: offsets stay those of the source text.
_INVISIBLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u2028\u2029\u2060\ufeff]")


def sanitize(text: str) -> str:
    return _INVISIBLE.sub(" ", text)


@dataclass
class SentenceResult:
    """One source sentence: its span, its translation's span in the document's translation, its flags."""

    source: tuple[int, int]
    target: tuple[int, int]
    flags: list[str] = field(default_factory=list)


@dataclass
class DocumentResult:
    id: str
    translation: str
    status: str  # "ok" | "partial" (a sentence still shows a symptom) | "error" (nothing translated)
    error: str | None = None
    sentences: list[SentenceResult] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)  # the sentences' flags and the document's own ("cleaned", ...)
    # "prepare": this document's segmenting and planning; "translate": its share (by source tokens)
    # of the engine time of the call it was translated in; "total": the two together.
    timings: dict[str, float] = field(default_factory=dict)
    tokens: int = 0  # source tokens the model saw, context sentences included
    windows: int = 0  # engine inputs the document was cut into
    # Of them, those reused: from the translation memory (``worker.engine.memory``), or a copy earlier in the call.
    reused_windows: int = 0
    reused_tokens: int = 0  # source tokens of those: what the engine did not have to read
    source_language: str | None = None  # ISO: the language it was found in (``source_language: auto``), or the job's
    target_language: str | None = None  # ISO: the language it was translated into, where the job says
    terms: int = 0  # glossary terms whose target is in the translation (``worker.documents.terms``)
    terms_missed: int = 0  # glossary terms whose target could not be put in


@dataclass
class _Plan:
    """One document's units, sentences (split to fit; in their unit's plain coordinates), windows,
    and what became of each sentence."""

    id: str
    text: str
    units: list[Unit]
    sentences: list[Sentence]
    windows: list[Window]
    tokens: int  # source tokens the model sees, context included
    flags: set[str]  # the document's own
    sentence_flags: list[set[str]]
    translations: list[str] = field(default_factory=list)
    crlf: list[int] = field(default_factory=list)  # offsets (in ``text``) of the line ends written ``\r\n``
    marked: list[str] = field(default_factory=list)  # the translations written in the format, markup back in
    limited: set[int] = field(default_factory=set)  # sentences whose window output hit the length limit
    reused: list[Translation] = field(default_factory=list)  # window outputs the memory gave
    prepare_seconds: float = 0.0
    codes: list[str | None] = field(default_factory=list)  # per sentence: the model code it is read as (routing)
    kept: set[int] = field(default_factory=set)  # sentences copied through as they are (routing)
    language: str | None = None  # the document's language (routing)
    paragraph: list[int] = field(default_factory=list)  # per sentence: its paragraph's number
    terms: int = 0  # glossary terms put in
    terms_missed: int = 0  # glossary terms that could not be


class DocumentTranslator:
    """``format``: ``text`` (no markup handling: lines are layout), ``markdown`` or ``html`` (markup kept
    in place, code never translated; see ``worker.documents.markup``)."""

    def __init__(
        self,
        translator: Translator,
        *,
        budget: int = DEFAULTS.budget,
        overlap: int = DEFAULTS.overlap,
        max_chars: int = settings.MAX_DOCUMENT_CHARS,  # a longer document is an error asking to split it
        format: str = DEFAULTS.format,
        memory: Memory | None = None,  # translations of earlier windows (``worker.engine.memory``); None: none kept
        routing: Routing | None = None,  # documents routed by their language (``worker.documents.languages``)
        glossary: Glossary | None = None,  # terms that must come out one way (``worker.documents.terms``)
    ):
        if format not in markup.FORMATS:
            raise ValueError(f"unknown format {format!r}: use one of {', '.join(markup.FORMATS)}")
        limit = (translator.max_positions or budget + 2) - 2
        self.translator, self.budget, self.overlap = translator, min(budget, limit), overlap
        self.max_chars, self.format, self.memory, self.routing = max_chars, format, memory, routing
        self.glossary = glossary

    def _count(self, text: str) -> int:
        return len(self.translator.tokenizer.encode(text))

    def plan(self, doc_id: str, text: str) -> _Plan:
        if len(text) > self.max_chars:
            raise ValueError(
                f"document has {len(text):,} characters, more than the limit of {self.max_chars:,}: "
                "split it into smaller documents"
            )
        lines = text.replace("\r\n", "\n")  # line endings go back as they came (``_endings_back``)
        clean = sanitize(lines)
        flags: set[str] = {"cleaned"} if clean != lines else set()
        units = markup.units(clean, self.format)
        sentences: list[Sentence] = []
        sentence_flags: list[set[str]] = []
        for number, unit in enumerate(units):
            code = [(m.start, m.end) for m in unit.marks if m.verbatim]
            kept = [(m.start, m.end) for m in unit.marks if m.verbatim or 0 < m.end - m.start <= MARK_IN_ONE_SENTENCE]
            for start, end, cut in _joined_inside(line_spans(unit.plain), kept):
                pieces = split_long(Sentence(start, end, number, unit.plain[start:end]), self._count, self.budget)
                sentences += pieces
                sentence_flags += [
                    ({"split"} if len(pieces) > 1 or cut else set()) | ({"code"} if _covered(p, code) else set())
                    for p in pieces
                ]
        counts = [self._count(s.text) for s in sentences]
        paragraph = _paragraphs(clean, units, self.format)
        breaks = [
            i for i in range(1, len(sentences)) if paragraph[sentences[i].line] != paragraph[sentences[i - 1].line]
        ]
        windows = plan_windows(doc_id, counts, budget=self.budget, overlap=self.overlap, breaks=breaks)
        tokens = sum(sum(counts[w.start : w.end]) for w in windows)
        translations = [""] * len(sentences)
        crlf = _crlf_lines(text)
        plan = _Plan(doc_id, clean, units, sentences, windows, tokens, flags, sentence_flags, translations, crlf)
        plan.codes, plan.paragraph = [None] * len(sentences), [paragraph[s.line] for s in sentences]
        return plan

    def _routed(self, plan: _Plan, text: str, given: str | None) -> _Plan | DocumentResult:
        """The plan with the route of its language (``worker.documents.languages``): the paragraphs it does not
        translate copied through; or the document's result when it translates none."""
        assert self.routing is not None
        paragraph = plan.paragraph
        prose = [""] * (max(paragraph, default=0) + 1)
        for i, sentence in enumerate(plan.sentences):
            if "code" not in plan.sentence_flags[i]:
                prose[paragraph[i]] += sentence.text + " "
        found = languages.route(prose, self.routing, given)
        plan.language, plan.flags = found.language, plan.flags | set(found.flags)
        if not found.translated:
            if set(found.copied.values()) == {"already_target"}:
                flags = sorted(plan.flags | {"already_target"})
                return DocumentResult(plan.id, text, "ok", flags=flags, source_language=found.language)
            reason = languages.skip_reason(found.language, self.routing)
            return DocumentResult(plan.id, "", "skipped", reason, flags=found.flags, source_language=found.language)
        for i, sentence in enumerate(plan.sentences):
            plan.codes[i] = found.paragraphs[paragraph[i]]
            if paragraph[i] in found.copied:
                plan.translations[i] = sentence.text
                plan.sentence_flags[i].add(found.copied[paragraph[i]])
                plan.kept.add(i)
        return plan

    def _engine(
        self,
        texts: Sequence[str],
        codes: Sequence[str | None],
        options: DecodingOptions,
        memory: Memory | None = None,
        phrases: Sequence[Sequence[str]] | None = None,
    ) -> list[Translation]:
        """``texts`` translated (through ``memory``, this one's by default), each read as the language of its
        model code when documents are routed (one engine call a language); ``phrases``: per text, target text
        its translation must contain (``Translator.translate_batch``)."""
        engine, memory = self.translator, memory or self.memory
        wanted = list(phrases) if phrases is not None else [()] * len(texts)
        if self.routing is None:
            return engine.translate_batch(texts, options, memory, wanted)
        out: list[Translation | None] = [None] * len(texts)
        for code in dict.fromkeys(codes):
            picked = [k for k, c in enumerate(codes) if c == code]
            read_as = replace(options, source_language=code)
            done = engine.translate_batch([texts[k] for k in picked], read_as, memory, [wanted[k] for k in picked])
            for k, translation in zip(picked, done):
                out[k] = translation
        return [t for t in out if t is not None]

    def translate(
        self,
        documents: Sequence[tuple[str, str]],
        options: DecodingOptions | None = None,
        given: Mapping[str, str] | None = None,
    ) -> list[DocumentResult]:
        """``documents`` are ``(id, text)``; ``given``: the language of those whose input says it (id -> code),
        when documents are routed. A document that fails becomes an error result, never an exception."""
        options = options or self.translator.options()
        given = given or {}
        plans = [self._plan_or_error(doc_id, text, given.get(doc_id)) for doc_id, text in documents]
        live = [p for p in plans if isinstance(p, _Plan)]
        started = time.perf_counter()
        jobs = [(p, w) for p in live for w in p.windows if w.first not in p.kept]  # a window: one paragraph
        outputs = self._engine([_window_text(p, w) for p, w in jobs], [p.codes[w.first] for p, w in jobs], options)
        self._stitch(jobs, outputs, options)
        _copy_untranslatable(live)
        self._guard(live, options)
        self._put_terms(live, options)
        self._place_markup(live, options)
        per_token = (time.perf_counter() - started) / max(1, sum(p.tokens for p in live))
        return [p if isinstance(p, DocumentResult) else _result(p, per_token, self.format) for p in plans]

    def _plan_or_error(self, doc_id: str, text: str, given: str | None = None) -> _Plan | DocumentResult:
        started = time.perf_counter()
        try:
            plan = self.plan(doc_id, text)
            routed = self._routed(plan, text, given) if self.routing is not None else plan
        except Exception as err:  # noqa: BLE001 - bad input must not sink the batch
            seconds = time.perf_counter() - started
            return DocumentResult(doc_id, "", "error", f"{type(err).__name__}: {err}", timings={"total": seconds})
        seconds = time.perf_counter() - started
        if isinstance(routed, DocumentResult):
            routed.timings = {"prepare": seconds, "total": seconds}
            return routed
        routed.prepare_seconds = seconds
        return routed

    def _stitch(self, jobs: list[tuple[_Plan, Window]], outputs: list[Translation], options: DecodingOptions) -> None:
        """Each window's translation shared out to its sentences; windows that do not align are
        retranslated sentence by sentence (flag ``restitched``)."""
        retry: list[tuple[_Plan, int]] = []
        for (plan, window), out in zip(jobs, outputs):
            if out.reused:
                plan.reused.append(out)
            pieces = stitch(window, out.text)
            responsible = range(window.first, window.last)
            if pieces is None:
                retry += [(plan, i) for i in responsible]
                continue
            for i, piece in zip(responsible, pieces):
                plan.translations[i] = piece
                if "length_limit" in out.flags:
                    plan.limited.add(i)
        texts, codes = [plan.sentences[i].text for plan, i in retry], [plan.codes[i] for plan, i in retry]
        redone = self._engine(texts, codes, options)
        for (plan, i), out in zip(retry, redone):
            plan.translations[i] = out.text
            plan.sentence_flags[i].add("restitched")
            if "length_limit" in out.flags:
                plan.limited.add(i)

    def _guard(self, plans: list[_Plan], options: DecodingOptions) -> None:
        """Retry sentences that show a symptom alone, with a wider beam and no repeated trigrams; keep the result
        with fewer symptoms, and flag what remains. The retry runs on the engine's own sessions: fp32 sessions
        loaded for it took a process of the opus-mt shape from 284 to 612 MiB resident (peak 366 -> 710, past
        a process's budget) for 6 fixed suspects of 51 on real text where the engine's own fixed 3
        (BENCHMARKS.md, "The degeneration guard's retry")."""
        suspects = [
            (plan, i, seen)
            for plan in plans
            for i, sentence in enumerate(plan.sentences)
            if "copied" not in plan.sentence_flags[i]
            and i not in plan.kept
            and (seen := symptoms(sentence.text, plan.translations[i], hit_length_limit=i in plan.limited))
        ]
        if not suspects:
            return
        stronger = replace(
            options,
            beam_size=max(options.beam_size, 4),
            num_hypotheses=1,
            no_repeat_ngram_size=options.no_repeat_ngram_size or 3,
        )
        texts, codes = [plan.sentences[i].text for plan, i, _ in suspects], [plan.codes[i] for plan, i, _ in suspects]
        redone = self._engine(texts, codes, stronger)
        for (plan, i, before), out in zip(suspects, redone):
            after = symptoms(plan.sentences[i].text, out.text, hit_length_limit="length_limit" in out.flags)
            if len(after) < len(before):
                plan.translations[i], before = out.text, after
            plan.sentence_flags[i] |= {"retried", *before}

    def _alone(
        self, words: set[tuple[str, str | None]], options: DecodingOptions, memory: Memory | None = None
    ) -> dict[str | None, dict[str, str]]:
        """Words translated on their own (those a mark encloses, a glossary term's), each read as its model code:
        code -> words -> translation, in one engine call (one a language when documents are routed)."""
        ordered = sorted(words, key=lambda pair: (pair[0], pair[1] or ""))
        texts, codes = [w for w, _ in ordered], [c for _, c in ordered]
        translated = self._engine(texts, codes, options, memory=memory) if ordered else []
        found: dict[str | None, dict[str, str]] = {}
        for (text, code), out in zip(ordered, translated):
            found.setdefault(code, {})[text] = out.text
        return found

    def _put_terms(self, plans: list[_Plan], options: DecodingOptions) -> None:
        """Each glossary term of each translated sentence put into its translation (``worker.documents.terms``:
        the terms' words translated alone first, in one engine call, and their rendering replaced); a sentence with
        a term that could not be put in is searched again, constrained to write every one of its terms
        (``_force_terms``)."""
        if self.glossary is None:
            return
        found = [
            (plan, i, matches)
            for plan in plans
            for i, sentence in enumerate(plan.sentences)
            if i not in plan.kept and "code" not in plan.sentence_flags[i]
            if (matches := self.glossary.find(sentence.text))
        ]
        words = {(m.words, plan.codes[i]) for plan, i, matches in found for m in matches}
        # Only a rendering's start is used: a model that runs on after a lone word is cut off early.
        cap = 8 + 4 * max((self._count(w) for w, _ in words), default=0)
        short = replace(options, max_new_tokens=min(options.max_new_tokens, cap))
        renderings = self._alone(words, short, self.memory or RENDERINGS)
        missed = []
        for plan, i, matches in found:
            put = terms.apply(plan.translations[i], matches, renderings.get(plan.codes[i], {}))
            if put.missed:
                missed.append((plan, i, matches, put))
            else:
                plan.translations[i], plan.terms = put.translation, plan.terms + put.applied
        self._force_terms(missed, options)

    def _force_terms(
        self, missed: list[tuple[_Plan, int, list[Match], terms.Applied]], options: DecodingOptions
    ) -> None:
        """Sentences whose terms could not all be put in, translated again alone by a constrained search that
        must write every target (``worker.engine.constrained``). Its translation is kept when it holds every term,
        shows no symptom (``worker.documents.degeneration``) the sentence's translation did not have, and has no
        more sentences than it (a model that cannot fit a term in tends to write it after the end: ``汤姆有68个瓶子。
        水瓶…``), and flagged ``term_forced``; else the sentence keeps what was put in and is flagged
        ``term_missed``."""
        texts = [plan.sentences[i].text for plan, i, _, _ in missed]
        phrases = [list(dict.fromkeys(m.term.target for m in matches)) for _, _, matches, _ in missed]
        codes = [plan.codes[i] for plan, i, _, _ in missed]
        redone = self._engine(texts, codes, options, phrases=phrases) if missed else []
        for (plan, i, matches, placed), out in zip(missed, redone):
            forced, source = terms.apply(out.text, matches, {}), plan.sentences[i].text
            before = symptoms(source, plan.translations[i], hit_length_limit=i in plan.limited)
            after = symptoms(source, out.text, hit_length_limit="length_limit" in out.flags)
            tacked_on = len(split_target(out.text)) > len(split_target(plan.translations[i]))
            if not forced.missed and set(after) <= set(before) and not tacked_on:
                plan.translations[i], plan.terms = out.text, plan.terms + forced.applied
                plan.sentence_flags[i].add("term_forced")  # a reader may want to look: the model did not choose it
                continue
            plan.translations[i], plan.terms = placed.translation, plan.terms + placed.applied
            plan.terms_missed += placed.missed
            plan.sentence_flags[i].add("term_missed")

    def _place_markup(self, plans: list[_Plan], options: DecodingOptions) -> None:
        """Each sentence's translation written in the document's format, its marks put back; words a
        mark encloses are translated on their own (one engine call) to find them in the translation."""
        assigned = {id(plan): _assign(plan) for plan in plans}
        inner = {
            (words, plan.codes[i])
            for plan in plans
            for i, marks in assigned[id(plan)].items()
            for words in markup.needs_inner(plan.sentences[i].text, marks)
        }
        found = self._alone(inner, options)
        for plan in plans:
            for i, sentence in enumerate(plan.sentences):
                marks = assigned[id(plan)].get(i, [])
                last = i + 1 == len(plan.sentences) or plan.sentences[i + 1].line != sentence.line
                unit = plan.units[sentence.line]
                inner_found = found.get(plan.codes[i], {})
                placed = markup.place(
                    sentence.text, plan.translations[i], marks, inner_found, self.format, last, unit.escaped
                )
                plan.marked.append(placed.text)
                if placed.moved:
                    plan.sentence_flags[i].add("markup_moved")
                if unit.raw:  # its markup went to the model as text: check it
                    plan.sentence_flags[i].add("markup_unparsed")


def _assign(plan: _Plan) -> dict[int, list[Mark]]:
    """Each mark of each unit given to the sentence it lies in, in that sentence's coordinates; a mark
    over several sentences is cut in two at their boundaries (see ``_share``)."""
    by_unit: dict[int, list[int]] = {}
    for i, sentence in enumerate(plan.sentences):
        by_unit.setdefault(sentence.line, []).append(i)
    assigned: dict[int, list[Mark]] = {}
    for number, unit in enumerate(plan.units):
        members = by_unit.get(number, [])
        for mark in unit.marks if members else []:
            for i, local in _share(mark, [plan.sentences[i] for i in members], members):
                assigned.setdefault(i, []).append(local)
    return assigned


def _share(mark: Mark, sentences: list[Sentence], indices: list[int]) -> list[tuple[int, Mark]]:
    inside = [k for k, s in enumerate(sentences) if s.start < mark.end and s.end > mark.start]
    if mark.start == mark.end or not inside:  # an atom, or markup around nothing but spaces: kept whole
        k = next((k for k, s in enumerate(sentences) if mark.start < s.end), len(sentences) - 1)
        at = min(max(mark.start - sentences[k].start, 0), len(sentences[k].text))
        return [(indices[k], replace(mark, start=at, end=at))]
    first, last = sentences[inside[0]], sentences[inside[-1]]
    if len(inside) == 1:
        start, end = max(mark.start, first.start) - first.start, min(mark.end, first.end) - first.start
        return [(indices[inside[0]], replace(mark, start=start, end=end))]
    if mark.verbatim:  # code a split had to cut: whole in place of its first piece, nothing of the others
        pieces = []
        for k in inside:
            start, end = max(mark.start, sentences[k].start), min(mark.end, sentences[k].end)
            whole = mark.whole if k == inside[0] else ""
            offset = sentences[k].start
            pieces.append((indices[k], replace(mark, start=start - offset, end=end - offset, whole=whole)))
        return pieces
    # Two halves, each a mark of its sentence: from the mark's start to the first sentence's end, and from
    # the last one's start to the mark's end (the sentences between are inside it whole).
    opening = replace(mark, start=max(mark.start - first.start, 0), end=len(first.text), close="")
    closing = replace(mark, start=0, end=min(mark.end, last.end) - last.start, open="")
    return [(indices[inside[0]], opening), (indices[inside[-1]], closing)]


def _result(plan: _Plan, seconds_per_token: float, fmt: str) -> DocumentResult:
    text, alignment = render(plan.text, plan.units, plan.sentences, plan.marked, plan.translations)
    changed = structure.differences(plan.text, text, fmt)
    text, target_crlf = _endings_back(text, plan)
    sentences = [
        SentenceResult(_shifted(src, plan.crlf), _shifted(tgt, target_crlf), sorted(f))
        for (src, tgt), f in zip(alignment, plan.sentence_flags)
    ]
    flags = plan.flags.union(*plan.sentence_flags) | ({"markup_changed"} if changed else set())
    status = "partial" if flags & (SYMPTOMS | MARKUP_SYMPTOMS | LANGUAGE_SYMPTOMS | TERM_SYMPTOMS) else "ok"
    timings = {"prepare": plan.prepare_seconds, "translate": plan.tokens * seconds_per_token}
    timings["total"] = timings["prepare"] + timings["translate"]
    reused = len(plan.reused), sum(t.source_tokens for t in plan.reused)
    windows = sum(w.first not in plan.kept for w in plan.windows)
    return DocumentResult(
        plan.id, text, status, None, sentences, sorted(flags), timings, plan.tokens, windows, *reused, plan.language,
        terms=plan.terms, terms_missed=plan.terms_missed,
    )  # fmt: skip


def _crlf_lines(text: str) -> list[int]:
    """Where each ``\\r\\n`` of ``text`` ends a line, counted in the text with ``\\n`` line ends."""
    return [m.start() - k for k, m in enumerate(re.finditer("\r\n", text))]


def _endings_back(translation: str, plan: _Plan) -> tuple[str, list[int]]:
    """The translation with the source's line ends: line for line where it kept the source's lines
    (Markdown and text always do), else ``\\r\\n`` throughout when the source wrote them throughout."""
    if not plan.crlf:
        return translation, []
    ends = [m.start() for m in re.finditer("\n", translation)]
    source_ends = [m.start() for m in re.finditer("\n", plan.text)]
    if len(ends) == len(source_ends):
        crlf = set(plan.crlf)
        written = [at for at, source_at in zip(ends, source_ends) if source_at in crlf]
    else:
        written = ends if len(plan.crlf) == len(source_ends) else []
    out, cursor = [], 0
    for at in written:
        out += [translation[cursor:at], "\r"]
        cursor = at
    return "".join(out) + translation[cursor:], written


def _shifted(span: tuple[int, int], crlf: list[int]) -> tuple[int, int]:
    """A span of the text with ``\\n`` line ends as a span of the text as written (``crlf``: ``_crlf_lines``)."""
    return span[0] + bisect.bisect_left(crlf, span[0]), span[1] + bisect.bisect_left(crlf, span[1])


def _covered(sentence: Sentence, spans: list[tuple[int, int]]) -> bool:
    """Whether ``spans`` (code) cover every non-blank character of the sentence."""
    return all(
        any(a <= k < b for a, b in spans)
        for k in range(sentence.start, sentence.end)
        if not sentence.text[k - sentence.start].isspace()
    )


def _joined_inside(spans: list[tuple[int, int, bool]], code: list[tuple[int, int]]) -> list[tuple[int, int, bool]]:
    """Sentence spans joined where a boundary falls inside code (``idna.encode()``, ``.netrc``) or a mark
    (a link the segmenter cut): code is one piece, never translated in halves, and two marks cut across
    sentences would open and close around each other's sentences, nested otherwise than in the source."""
    joined: list[tuple[int, int, bool]] = []
    for start, end, cut in spans:
        if joined and any(a < joined[-1][1] and start < b for a, b in code):
            joined[-1] = (joined[-1][0], end, joined[-1][2] or cut)
        else:
            joined.append((start, end, cut))
    return joined


def _copy_untranslatable(plans: list[_Plan]) -> None:
    """Sentences of only punctuation, symbols or emoji, or only code, pass through unchanged: there is
    nothing to translate."""
    for plan in plans:
        for i, sentence in enumerate(plan.sentences):
            if "code" in plan.sentence_flags[i] or not any(ch.isalnum() for ch in sentence.text):
                plan.translations[i] = sentence.text
                plan.sentence_flags[i] = (plan.sentence_flags[i] - {"code"}) | {"copied"}


def _paragraphs(text: str, units: list[Unit], fmt: str) -> list[int]:
    """Each unit's paragraph number: a new one after a blank line, or at every unit in HTML (its blocks)."""
    starts = (fmt == "html" or bool(_BLANK_LINE.search(text, a.end, b.start)) for a, b in pairwise(units))
    return list(accumulate(starts, initial=0))


def _window_text(plan: _Plan, window: Window) -> str:
    return " ".join(s.text for s in plan.sentences[window.start : window.end])
