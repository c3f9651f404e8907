"""``Translator``: an artifact's tokenizer, session pool and search behind ``translate_batch``."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from worker.engine.artifact import Artifact
from worker.engine.batching import Batch, plan_batches
from worker.engine.constrained import ConstrainedBeamDecoder, Phrases
from worker.engine.inference import SOURCE_MULTIPLE, pad_batch
from worker.engine.languages import ModelLanguages
from worker.engine.memory import Memory
from worker.engine.search import DecodingOptions, SearchResult, Vocabulary, for_batch, generate
from worker.engine.sessions import SessionPool
from worker.engine.tokenizer import Framing, Tokenizer, unreadable
from worker.engine.translation import Alternative, Translation

MAX_TOKENS = 4096  # token budget of one batch (source + beams * target tokens) for a model of opus-mt's size
BUDGET_WIDTH = 6 * 512  # opus-mt's decoder layers x d_model, for which MAX_TOKENS was measured best
MAX_BUDGET_SCALE = 3  # beyond 3x the demo model's memory grew and its speed did not (BENCHMARKS.md)


def default_budget(model: Mapping[str, int]) -> int:
    """A batch's token budget for a model of ``model``'s shape (the manifest's ``model``): a batch's memory is
    its tokens times the decoder's width (layers x d_model, the cache it writes), so a smaller model takes
    more tokens for the same memory, and a call of many short documents fewer decoder steps: the demo model
    (3 x 192) 12,288 tokens, 1.29x the documents/s of 4,096 in paired rounds (BENCHMARKS.md)."""
    width = model.get("decoder_layers", 0) * model.get("d_model", 0)
    scale = min(MAX_BUDGET_SCALE, BUDGET_WIDTH / width) if width else 1
    return int(MAX_TOKENS * max(1, scale))


@dataclass(frozen=True)
class Request:
    """One sentence to translate, and the target phrases its translation must contain."""

    text: str
    phrases: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """What the translation memory keys it by: the text, or with phrases a JSON object of both."""
        return (
            json.dumps({"text": self.text, "phrases": self.phrases}, ensure_ascii=False) if self.phrases else self.text
        )


class Translator:
    """Translate sentences with one artifact.

    ``device``, ``precision``, ``threads``, ``sessions`` and ``io_binding`` set up its ``SessionPool``
    (``worker/engine/sessions.py``); ``max_tokens`` is the token budget of one batch (``default_budget``).
    A caller that drives the steps itself (verification) holds a session pair for as long as it uses it:
    ``with translator.pool.acquire() as inference: ...``; no batch runs on that pair meanwhile.
    """

    def __init__(
        self,
        artifact: str | Path | Artifact,
        *,
        device: str = "cpu",
        precision: str | None = None,
        threads: int = 1,
        sessions: int = 1,
        max_tokens: int | None = None,
        io_binding: bool = True,
    ) -> None:
        self.artifact = artifact if isinstance(artifact, Artifact) else Artifact.load(artifact)
        self.pool = SessionPool(
            self.artifact, precision, device=device, size=sessions, threads=threads, io_binding=io_binding
        )
        self.max_tokens = max_tokens or default_budget(self.artifact.manifest.get("model", {}))
        self.on_batch: Callable[[Batch], None] | None = None  # sees each planned batch (the worker's metrics)
        self.tokenizer = Tokenizer.from_artifact(self.artifact)
        special = self.artifact.manifest["special_tokens"]
        self.vocab = Vocabulary.from_special_tokens(special)
        self.pad_id: int = special["pad_token_id"]
        self.max_positions: int | None = self.artifact.manifest.get("max_positions")
        self.generation_config = self.artifact.generation_config()

    @property
    def precision(self) -> str:
        return self.pool.precision

    @functools.cached_property
    def languages(self) -> ModelLanguages:
        """The languages the model reads and writes (``worker.engine.languages``)."""
        return ModelLanguages.of(self.tokenizer, self.artifact.manifest.get("pair"))

    def options(self, **overrides: object) -> DecodingOptions:
        """The model's own generation settings with ``overrides`` applied.

        When the languages select a T5 task, its settings (``task_specific_params``: beams, length)
        come between the two, as the Hugging Face translation pipeline applies them."""
        config = self.generation_config
        if self.tokenizer.tasks and (overrides.get("source_language") or overrides.get("target_language")):
            framing = self.tokenizer.framing(
                overrides.get("source_language"),  # type: ignore[arg-type]
                overrides.get("target_language"),  # type: ignore[arg-type]
                overrides.get("source_prefix"),  # type: ignore[arg-type]
            )
            config = config | self.tokenizer.task_generation(framing)
        return DecodingOptions.from_generation_config(config, **overrides)

    def framing(self, options: DecodingOptions, *, require_target: bool = True) -> Framing:
        """The request's source framing and forced target token; unknown languages are a ValueError."""
        return self.tokenizer.framing(
            options.source_language, options.target_language, options.source_prefix, require_target=require_target
        )

    @functools.cached_property
    def identity(self) -> tuple[str, str, str]:
        """What besides the text and the options decides a translation: artifact, precision, and the
        provider the sessions really run on (a CUDA request without CUDA runs on the CPU)."""
        with self.pool.acquire() as inference:
            provider: str = inference.decoder.get_providers()[0]
        return self.artifact.artifact_id, self.precision, provider

    def translate_batch(
        self,
        sentences: Sequence[str],
        options: DecodingOptions | None = None,
        memory: Memory | None = None,
        phrases: Sequence[Sequence[str]] | None = None,
    ) -> list[Translation]:
        """Translations in input order; empty or blank sentences give empty ones without a model call, and
        a sentence no tokenizer can read (a lone surrogate) an empty one with its ``error``: one bad
        sentence is its own failure, not the batch's.

        ``phrases``: per sentence, target text its translation must contain (a glossary's terms); a sentence with
        some is searched by ``worker.engine.constrained`` with at least one beam more than it has phrases, every
        other one as without. With a ``memory``, each distinct request is translated once (later copies and
        remembered ones come back ``reused``), unless ``max_length_ratio`` makes a sentence's length limit its
        batch's."""
        for s in sentences:
            if not isinstance(s, str):
                raise TypeError(f"translate_batch takes strings, got {type(s).__name__}: {s!r:.80}")
        options = options or self.options()
        framing = self.framing(options)  # bad languages fail before any work
        problems = [unreadable(s) for s in sentences]
        wanted = [tuple(p) for p in phrases] if phrases is not None else [()] * len(sentences)
        readable = [Request(s, must) for s, must, problem in zip(sentences, wanted, problems) if problem is None]
        if memory is None or options.max_length_ratio is not None:
            done = iter(self._translate(readable, options, framing))
        else:
            done = iter(self._remembered(readable, options, framing, memory))
        return [next(done) if problem is None else Translation("", [], 0.0, error=problem) for problem in problems]

    def _translate(self, requests: Sequence[Request], options: DecodingOptions, framing: Framing) -> list[Translation]:
        out = [Translation("", [], 0.0) for _ in requests]
        todo = [i for i, r in enumerate(requests) if r.text.strip()]
        fitted = [self._fit(self.tokenizer.encode(requests[i].text, framing)) for i in todo]
        phrases = [tuple(ways for p in requests[i].phrases if (ways := self.tokenizer.phrase(p))) for i in todo]
        results = self.search([source for source, _ in fitted], options, framing, phrases)
        self.artifact.check_unchanged()  # nothing read from an artifact changed meanwhile is kept
        for i, result, (source, truncated) in zip(todo, results, fitted):
            out[i] = self._translation(result, truncated, len(source))
        return out

    def _remembered(
        self, requests: Sequence[Request], options: DecodingOptions, framing: Framing, memory: Memory
    ) -> list[Translation]:
        by_key = {r.key: r for r in requests if r.text.strip()}
        distinct = list(by_key)
        known = {k: t for k, t in zip(distinct, memory.recall(self.identity, options, distinct)) if t is not None}
        missing = [k for k in distinct if k not in known]
        fresh = dict(zip(missing, self._translate([by_key[k] for k in missing], options, framing)))
        memory.keep(self.identity, options, fresh)
        out = []
        for r in requests:
            if not r.text.strip():
                out.append(Translation("", [], 0.0))
            elif r.key in fresh:
                out.append(fresh.pop(r.key))  # the one the engine made; later copies of it are reused
                known[r.key] = replace(out[-1], reused=True)
            else:
                out.append(known[r.key])
        return out

    def search(
        self,
        sources: Sequence[list[int]],
        options: DecodingOptions,
        framing: Framing | None = None,
        phrases: Sequence[Phrases] | None = None,
    ) -> list[SearchResult]:
        """Token-budget batches over the session pool; results in the order of ``sources``. ``framing``:
        the request's, as ``generate_ids`` takes it; ``phrases``: per source, the target ids a constrained
        search must write (none: generate's search), sources with as many phrases batched together."""
        phrases = phrases or [()] * len(sources)
        groups: dict[int, list[int]] = {}
        for i, must in enumerate(phrases):
            groups.setdefault(len(must), []).append(i)
        work: list[tuple[list[int], DecodingOptions]] = []
        for count, members in groups.items():
            searched = replace(options, beam_size=max(options.beam_size, count + 1)) if count else options
            batches = plan_batches(
                [len(sources[i]) for i in members],
                max_tokens=self.max_tokens,
                beams=searched.beam_size,
                target_estimate=lambda n: min(options.max_new_tokens, 2 * n),
            )
            if self.on_batch is not None:
                for batch in batches:
                    self.on_batch(batch)
            work += [([members[k] for k in batch.indices], searched) for batch in batches]
        results: list[SearchResult] = [SearchResult() for _ in sources]

        def run(item: tuple[list[int], DecodingOptions]) -> list[SearchResult]:
            indices, searched = item
            must = [phrases[i] for i in indices]
            return self.generate_ids([sources[i] for i in indices], searched, framing, must if any(must) else None)

        with ThreadPoolExecutor(max_workers=self.pool.size) as workers:
            for (indices, _), found in zip(work, workers.map(run, work)):
                for i, result in zip(indices, found):
                    results[i] = result
        return results

    def generate_ids(
        self,
        sources: Sequence[Sequence[int]],
        options: DecodingOptions,
        framing: Framing | None = None,
        phrases: Sequence[Phrases] | None = None,
    ) -> list[SearchResult]:
        """One search over already-tokenised (and framed) sources, as one batch, with the length limits
        resolved for it (``for_batch``). The target language of ``framing`` (by default, the one ``options``
        name or the model's) is forced first, as ``generate`` does with the same ids; with ``phrases`` (one
        per source), a constrained search writes them (``worker.engine.constrained``)."""
        forced_bos = (framing if framing is not None else self.framing(options, require_target=False)).forced_bos
        longest = max(map(len, sources))
        options = for_batch(options, longest_source=longest, max_positions=self.max_positions)
        ids, mask = pad_batch(sources, self.pad_id, multiple=SOURCE_MULTIPLE, limit=self.max_positions)
        decoder = ConstrainedBeamDecoder(phrases, options, self.vocab) if phrases else None
        with self.pool.acquire() as inference:
            return generate(inference, inference.encode(ids, mask), options, self.vocab, forced_bos, decoder)

    def _fit(self, source: list[int]) -> tuple[list[int], bool]:
        """Cut a source longer than the model's positions (keeping its closing token) and say so."""
        if self.max_positions is None or len(source) <= self.max_positions:
            return source, False
        return source[: self.max_positions - 1] + source[-1:], True

    def _translation(self, result: SearchResult, truncated: bool, source_tokens: int) -> Translation:
        alternatives = [Alternative(self.tokenizer.decode(h.tokens), h.tokens, h.score) for h in result.hypotheses]
        best = alternatives[0]
        flags = (["truncated_input"] if truncated else []) + (["length_limit"] if result.hit_length_limit else [])
        return Translation(best.text, best.tokens, best.score, alternatives, flags, source_tokens)
