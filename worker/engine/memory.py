"""Translation memory: text the engine has translated before is not translated again.

An entry is one engine input (a window of sentences, exactly as the model sees it: a retranslated
sentence, a guard retry or the words inside markup are entries too) and its ``Translation``. Its key
holds everything that changes the output: the artifact id, the precision and execution provider that
ran it, ONNX Runtime's version and the entry ``FORMAT``, every decoding option (languages included)
and the text, with the target phrases a constrained search had to write (a glossary's terms:
``Translator``'s ``Request.key``), so a sentence forced to hold a term never answers for the same
sentence asked plainly. The document's format needs no place of its own: it changes the text the model sees,
which is in the key. Reuse is exact because on the CPU a sentence's translation does not depend on
the batch it ran in (``tests/worker/engine/test_batch_invariance.py``); options whose limit is the
batch's (``max_length_ratio``) are never remembered (``Translator``).

Nothing here is needed for correctness: a memory that loses entries, holds a damaged one, or cannot be
reached costs time only. Scopes (a job spec's ``memory``, ``job_memory``): ``off``; ``job`` (every
chunk and worker of one job, the default; freed when the job ends); ``shared`` (every job under the
spec's ``memory_prefix``, by default its output). Both live in Redis
(``worker.runtime.memory``), cleared with ``python -m jobs memory clear``; the worker CLI's ``--memory``
keeps one in the process (``LocalMemory``). This module is the interface the engine calls
(``Translator.translate_batch``); it knows nothing of jobs, scopes or Redis.
"""

from __future__ import annotations

import hashlib
import json
import logging
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import asdict

from worker.engine.search import DecodingOptions
from worker.engine.translation import Alternative, Translation

log = logging.getLogger(__name__)


FORMAT = 1  # of the entries, and of what decides a translation besides the key: raise it when search changes


def entry_keys(engine: Sequence[str], options: DecodingOptions, texts: Sequence[str]) -> list[str]:
    """Each text's key; ``engine``: artifact id, precision, provider (``Translator.identity``). ONNX
    Runtime's version is in it too: its kernels decide the last bits of every score."""
    import onnxruntime

    setting = json.dumps([FORMAT, onnxruntime.__version__, list(engine), asdict(options)], sort_keys=True).encode()
    return [hashlib.blake2b(setting + b"\0" + text.encode(), digest_size=16).hexdigest() for text in texts]


class Memory(ABC):
    """Translations by engine, options and text; a backend stores them as JSON under their key."""

    def recall(self, engine: Sequence[str], options: DecodingOptions, texts: Sequence[str]) -> list[Translation | None]:
        """Each text's stored translation (``reused``), or None."""
        return [None if raw is None else _decode(raw) for raw in self.get(entry_keys(engine, options, texts))]

    def keep(self, engine: Sequence[str], options: DecodingOptions, translations: Mapping[str, Translation]) -> None:
        """Store each text's translation."""
        if translations:
            keys = entry_keys(engine, options, list(translations))
            self.put({key: _encode(t) for key, t in zip(keys, translations.values())})

    @abstractmethod
    def get(self, keys: Sequence[str]) -> list[str | None]: ...

    @abstractmethod
    def put(self, entries: Mapping[str, str]) -> None: ...


class LocalMemory(Memory):
    """In this process: the ``capacity`` entries used last."""

    def __init__(self, capacity: int = 100_000) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, str] = OrderedDict()

    def get(self, keys: Sequence[str]) -> list[str | None]:
        found = [self._entries.get(key) for key in keys]
        for key, raw in zip(keys, found):
            if raw is not None:
                self._entries.move_to_end(key)
        return found

    def put(self, entries: Mapping[str, str]) -> None:
        self._entries.update(entries)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)


def _encode(t: Translation) -> str:
    """The hypotheses (the first is the translation), flags and source length: what ``_decode`` needs."""
    hypotheses = [[h.text, h.tokens, h.score] for h in t.hypotheses]
    return json.dumps({"h": hypotheses, "flags": t.flags, "source_tokens": t.source_tokens}, ensure_ascii=False)


def _decode(raw: str) -> Translation | None:
    """The entry's translation; None (a miss) for an entry that cannot be read."""
    try:
        entry = json.loads(raw)
        hypotheses = [Alternative(str(text), list(tokens), float(score)) for text, tokens, score in entry["h"]]
        best = hypotheses[0]
        flags, source_tokens = list(entry["flags"]), int(entry["source_tokens"])
    except (ValueError, TypeError, KeyError, IndexError) as err:
        log.warning("a translation memory entry cannot be read (%s): translating instead", err)
        return None
    return Translation(best.text, best.tokens, best.score, hypotheses, flags, source_tokens, reused=True)
