"""``Translator``: an artifact's sessions, tokenizer and search behind ``translate_batch``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from worker.artifact import Artifact
from worker.engine.inference import Inference, pad_batch
from worker.engine.search import DecodingOptions, Hypothesis, SearchResult, Vocabulary, generate
from worker.engine.sessions import make_session
from worker.tokenizer import Tokenizer


@dataclass
class Translation:
    text: str
    tokens: list[int]
    score: float
    hypotheses: list[Hypothesis] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)  # "truncated_input", "length_limit"


class Translator:
    def __init__(
        self, artifact: str | Path | Artifact, *, device: str = "cpu", precision: str | None = None, threads: int = 1
    ):
        self.artifact = artifact if isinstance(artifact, Artifact) else Artifact.load(artifact)
        self.precision = precision or ("int8" if device == "cpu" and "int8" in self.artifact.precisions else "fp32")
        self.inference = Inference(
            make_session(self.artifact.graph(self.precision, "encoder"), device=device, threads=threads),
            make_session(self.artifact.graph(self.precision, "decoder"), device=device, threads=threads),
        )
        self.tokenizer = Tokenizer.from_artifact(self.artifact)
        special = self.artifact.manifest["special_tokens"]
        self.vocab = Vocabulary(
            decoder_start=special["decoder_start_token_id"],
            eos=special["eos_token_id"],
            suppressed=tuple(special.get("suppressed_ids", [])),
            forced_bos=special.get("forced_bos_token_id"),
            forced_eos=special.get("forced_eos_token_id"),
        )
        self.pad_id: int = special["pad_token_id"]
        self.max_positions: int | None = self.artifact.manifest.get("max_positions")
        self.generation_config = self.artifact.generation_config()

    def options(self, **overrides: object) -> DecodingOptions:
        """The model's own generation settings with ``overrides`` applied."""
        return DecodingOptions.from_generation_config(self.generation_config, **overrides)

    def generate_ids(self, sources: Sequence[Sequence[int]], options: DecodingOptions) -> list[SearchResult]:
        """Search over already-tokenised sources (right-padded into one batch)."""
        ids, mask = pad_batch(sources, self.pad_id)
        state = self.inference.encode(ids, mask)
        return generate(self.inference, state, options, self.vocab, self._forced_bos(options))

    def _forced_bos(self, options: DecodingOptions) -> int | None:
        if options.target_language is None:
            return None
        languages = self.tokenizer.language_ids
        if options.target_language not in languages:
            raise ValueError(
                f"target language {options.target_language!r} is not in this model's languages "
                f"({', '.join(sorted(languages)) or 'none: it translates one fixed pair'})"
            )
        return languages[options.target_language]

    def translate_batch(self, sentences: Sequence[str], options: DecodingOptions | None = None) -> list[Translation]:
        for s in sentences:
            if not isinstance(s, str):
                raise TypeError(f"translate_batch takes strings, got {type(s).__name__}: {s!r:.80}")
        options = options or self.options()
        out: list[Translation | None] = [Translation("", [], 0.0) if not s.strip() else None for s in sentences]
        todo = [i for i, t in enumerate(out) if t is None]
        if todo:
            encoded = [self.tokenizer.encode(sentences[i]) for i in todo]
            for i, source, result in zip(todo, encoded, self.generate_ids(encoded, options)):
                out[i] = self._translation(source, result)
        return [t for t in out if t is not None]

    def _translation(self, source: list[int], result: SearchResult) -> Translation:
        best = result.hypotheses[0]
        flags = ["length_limit"] if result.hit_length_limit else []
        if self.max_positions and len(source) > self.max_positions:
            flags.append("truncated_input")
        return Translation(self.tokenizer.decode(best.tokens), best.tokens, best.score, result.hypotheses, flags)
