"""Text <-> ids with sentencepiece alone, framed as the artifact's manifest describes.

The export checks this against the Hugging Face tokenizer of the source model, so the worker
needs neither ``transformers`` nor torch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sentencepiece as spm

from worker.artifact import Artifact


class Tokenizer:
    def __init__(
        self,
        source: spm.SentencePieceProcessor,
        target: spm.SentencePieceProcessor,
        vocab: dict[str, int] | None,
        framing: dict[str, Any],
    ):
        self.source, self.target, self.vocab = source, target, vocab
        self.pieces = None if vocab is None else {i: p for p, i in vocab.items()}
        self.prefix: list[int] = list(framing["source_prefix_ids"])
        self.suffix: list[int] = list(framing["source_suffix_ids"])
        self.unk_id: int = framing["unk_id"]
        self.special_ids = set(framing["special_ids"])
        self.language_ids: dict[str, int] = framing.get("language_ids", {})

    @classmethod
    def from_artifact(cls, artifact: Artifact) -> Tokenizer:
        return cls.from_files(artifact.root / "tokenizer", artifact.manifest["tokenizer"])

    @classmethod
    def from_files(cls, folder: Path, framing: dict[str, Any]) -> Tokenizer:
        source = spm.SentencePieceProcessor(model_file=str(folder / framing["source_model"]))
        target = spm.SentencePieceProcessor(model_file=str(folder / framing["target_model"]))
        vocab = json.loads((folder / framing["vocab"]).read_text()) if framing["vocab"] else None
        return cls(source, target, vocab, framing)

    def encode(self, text: str) -> list[int]:
        """Source ids with the model's framing (language token, EOS)."""
        if self.vocab is None:
            body = self.source.encode(text)
        else:
            body = [self.vocab.get(p, self.unk_id) for p in self.source.encode(text, out_type=str)]
        return [*self.prefix, *body, *self.suffix]

    def count(self, texts: Sequence[str], *, batch: int = 1024) -> list[int]:
        """Source tokens of each text, framing included (what ``encode`` would give).

        Encoded ``batch`` texts per call, so a whole corpus's ids are never held at once."""
        framing = len(self.prefix) + len(self.suffix)
        counts: list[int] = []
        for start in range(0, len(texts), batch):
            counts += [len(ids) + framing for ids in self.source.encode(list(texts[start : start + batch]))]
        return counts

    def decode(self, ids: Sequence[int]) -> str:
        kept = [i for i in ids if i not in self.special_ids]
        if self.pieces is None:
            return str(self.target.decode([i for i in kept if i < self.target.get_piece_size()]))
        return str(self.target.decode_pieces([self.pieces[i] for i in kept if i in self.pieces]))
