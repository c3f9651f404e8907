"""Text <-> ids as the model's own Hugging Face tokenizer does it, without ``transformers``.

Two backends, chosen at build time by the tokenizer the model comes with:

* ``tokenizers``: the model's fast tokenizer (``tokenizer.json``, run by the Rust ``tokenizers``
  library): T5, NLLB, mBART-50. Encoding and decoding are the library's, so they are the fast
  tokenizer's by construction.
* ``sentencepiece``: the tokenizers that have no fast twin (Marian, M2M100): sentencepiece and the
  model's ``vocab.json``, with those classes' rules for added tokens and decoding reproduced here.

What surrounds a source (language tokens, EOS, a T5 task prefix) and the token forced first in the
target are chosen per request: ``Tokenizer.framing(source_language, target_language, source_prefix)``.
The build checks both directions against the Hugging Face tokenizer (ids of sample texts, text of
random id sequences), so a tokenizer that behaves otherwise is refused there, not mistranslated here.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from worker.engine.artifact import Artifact

SOURCE_LANGUAGE = "source_language"  # the slot a source-language token fills in a framing template
SPIECE_UNDERLINE = "\u2581"
ENCODE_THREADS = 2  # sentencepiece threads of one ``lengths`` call (a submit's token counts, beside its other work)
ESCAPED_BYTES = range(0xDC80, 0xDD00)  # where Python's surrogateescape keeps bytes that were not UTF-8


class UnreadableText(ValueError):
    """Text no tokenizer can read (a lone surrogate): that text's error, never its batch's."""


def unreadable(text: str) -> str | None:
    """Why ``text`` cannot be tokenized, or None.

    A Python string may hold lone surrogates (a JSON ``\\ud800`` escape without its pair, bytes kept by
    ``errors="surrogateescape"``), which are not characters and have no UTF-8: sentencepiece fails on
    them with an internal pybind11 message and the ``tokenizers`` library with its own. They are
    reported, not replaced, as undecodable input is elsewhere (``jobs.inputs``), so the caller can fix
    the source. The reason names the position but never holds the surrogate (it could not be printed)."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        code = ord(text[err.start])
        where = f"character {err.start + 1} ({_excerpt(text, err.start)}) is U+{code:04X}"
        if code in ESCAPED_BYTES:
            return (
                f"{where}, a lone surrogate (surrogateescape's stand-in for the byte 0x{code - 0xDC00:02X}, which is "
                "not UTF-8): re-encode the input as UTF-8"
            )
        return f"{where}, a lone surrogate (half of a UTF-16 pair), not text: fix how the text was decoded or escaped"
    return None


@dataclass(frozen=True)
class Framing:
    """How one request's sources are framed: ids around the text, a text prefix, the target's first token."""

    prefix_ids: tuple[int, ...] = ()
    suffix_ids: tuple[int, ...] = ()
    text_prefix: str = ""  # T5's task prefix ("translate English to German: "), --source-prefix, a Marian ">>ukr<< "
    forced_bos: int | None = None  # the target language token generation must start with
    task: str | None = None  # the T5 task chosen by the languages ("translation_en_to_de")


class TextCodec(Protocol):
    """Body text <-> ids (no framing): one per backend."""

    def encode(self, text: str) -> list[int]: ...
    def encode_many(self, texts: list[str]) -> list[list[int]]: ...
    def lengths(self, texts: list[str]) -> list[int]: ...
    def decode(self, ids: Sequence[int]) -> str: ...
    def target_pieces(self, text: str) -> list[str]: ...
    def piece_id(self, piece: str) -> int | None: ...


def clean_up_tokenization(text: str) -> str:
    """``transformers``' clean-up of spaces before punctuation, for tokenizers that ask for it."""
    for before, after in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                          (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):  # fmt: skip
        text = text.replace(before, after)
    return text


class FastCodec:
    """A ``tokenizer.json`` through the ``tokenizers`` library."""

    def __init__(self, path: Path, *, clean_up: bool):
        from tokenizers import Tokenizer as RustTokenizer

        self.rust = RustTokenizer.from_file(str(path))
        self.clean_up = clean_up

    def encode(self, text: str) -> list[int]:
        return list(self.rust.encode(text, add_special_tokens=False).ids)

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        return [list(e.ids) for e in self.rust.encode_batch(texts, add_special_tokens=False)]

    def lengths(self, texts: list[str]) -> list[int]:
        return [len(e) for e in self.rust.encode_batch(texts, add_special_tokens=False)]

    def target_pieces(self, text: str) -> list[str]:
        return list(self.rust.encode(text, add_special_tokens=False).tokens)

    def piece_id(self, piece: str) -> int | None:
        found = self.rust.token_to_id(piece)
        return None if found is None else int(found)

    def decode(self, ids: Sequence[int]) -> str:
        text = str(self.rust.decode(list(ids), skip_special_tokens=True))
        return clean_up_tokenization(text) if self.clean_up else text


class PieceCodec:
    """sentencepiece + ``vocab.json`` as ``MarianTokenizer`` and ``M2M100Tokenizer`` use them.

    Encoding splits out added tokens (``</s>``, language tokens) the way the slow tokenizers do, then
    runs the source model on each stretch between them; Marian also reads a leading ``>>lang<<``.
    Decoding skips special ids and joins the pieces with the target model, in each class's manner."""

    def __init__(self, folder: Path, spec: dict[str, Any]):
        import sentencepiece as spm

        self.style: str = spec["decode_style"]  # "marian" | "m2m100"
        self.source = spm.SentencePieceProcessor(model_file=str(folder / spec["source_model"]))
        self.target = spm.SentencePieceProcessor(model_file=str(folder / spec["target_model"]))
        self.vocab: dict[str, int] = json.loads((folder / spec["vocab"]).read_text(encoding="utf-8"))
        self.added: dict[int, dict[str, Any]] = {int(i): t for i, t in spec["added_tokens"].items()}
        beyond = {int(i): t for i, t in spec.get("tokens_beyond_vocab", {}).items()}
        self.pieces = {i: p for p, i in self.vocab.items()} | beyond | {i: t["content"] for i, t in self.added.items()}
        self.unk_id, self.unk_token = int(spec["unk_id"]), str(spec["unk_token"])
        self.special_ids = set(spec["special_ids"])
        self.special_tokens = set(spec["special_tokens"])
        self.words = {t["content"] for t in self.added.values() if not t["special"]}  # decoded as words of their own
        self.clean_up = bool(spec["clean_up_tokenization_spaces"])
        contents = sorted({t["content"] for t in self.added.values()}, key=len, reverse=True)
        self._splitter = re.compile("(" + "|".join(map(re.escape, contents)) + ")") if contents else None
        self._added_by_content = {t["content"]: t for t in self.added.values()}

    # -- encoding ------------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for stretch, added in self._stretches(text):
            if added:
                ids.append(self.vocab.get(stretch, self._added_id(stretch)))
            else:
                ids += self._encode_stretch(stretch)
        return ids

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def lengths(self, texts: list[str]) -> list[int]:
        """How many ids each text encodes to: texts with no added token (nearly all) in one sentencepiece call,
        on its threads, the others one by one."""
        if not self._has_added("\0".join(texts)):  # no token holds a NUL: one look at the whole batch
            return [len(ids) for ids in self.source.encode(texts, num_threads=ENCODE_THREADS)]
        plain = [not self._has_added(t) for t in texts]
        counted = iter(self.source.encode([t for t, p in zip(texts, plain) if p], num_threads=ENCODE_THREADS))
        return [len(next(counted)) if p else len(self.encode(t)) for t, p in zip(texts, plain)]

    def _has_added(self, text: str) -> bool:
        """Whether ``text`` holds an added token or a Marian target tag (at its start, or after a NUL)."""
        marian_language = self.style == "marian" and (text.startswith(">>") or "\0>>" in text)
        return marian_language or (self._splitter is not None and self._splitter.search(text) is not None)

    def _added_id(self, content: str) -> int:
        return next(i for i, t in self.added.items() if t["content"] == content)

    def _stretches(self, text: str) -> list[tuple[str, bool]]:
        """``text`` cut at added tokens, each token eating the spaces beside it that its lstrip/rstrip say."""
        if self._splitter is None:
            return [(text, False)] if text else []
        parts = self._splitter.split(text)
        for i in range(1, len(parts), 2):
            token = self._added_by_content[parts[i]]
            if token["rstrip"] and i + 1 < len(parts) and parts[i + 1]:
                parts[i + 1] = parts[i + 1].lstrip()
            if token["lstrip"] and parts[i - 1]:
                parts[i - 1] = parts[i - 1].rstrip()
        return [(part, i % 2 == 1) for i, part in enumerate(parts) if part]

    def _encode_stretch(self, text: str) -> list[int]:
        code: list[int] = []
        if self.style == "marian" and text.startswith(">>") and (end := text.find("<<")) != -1:
            code, text = [self.vocab.get(text[: end + 2], self.unk_id)], text[end + 2 :]
        return code + [self.vocab.get(p, self.unk_id) for p in self.source.encode(text, out_type=str)]

    def target_pieces(self, text: str) -> list[str]:
        """``text`` as the target model cuts it (what the tokenizer's ``text_target=`` gives)."""
        return list(self.target.encode(text, out_type=str))

    def piece_id(self, piece: str) -> int | None:
        return self.vocab.get(piece)

    # -- decoding ------------------------------------------------------------------------------

    def decode(self, ids: Sequence[int]) -> str:
        """``batch_decode(..., skip_special_tokens=True)`` of the slow tokenizer: special ids are skipped,
        and so are ids whose token is a special one (an id it cannot name is ``<unk>``)."""
        tokens = [self.pieces.get(i, self.unk_token) for i in ids if i not in self.special_ids]
        texts: list[str] = []
        current: list[str] = []
        for token in (t for t in tokens if t not in self.special_tokens):
            if token not in self.words:
                current.append(token)
                continue
            if current and (joined := self._join(current)):
                texts.append(joined)
            texts.append(token)
            current = []
        if current:
            texts.append(self._join(current))
        text = " ".join(texts)
        return clean_up_tokenization(text) if self.clean_up else text

    def _join(self, pieces: list[str]) -> str:
        """The class's ``convert_tokens_to_string`` (no special token reaches it): the target model joins
        the pieces; Marian then turns the word marks of pieces that model does not know into spaces."""
        text = str(self.target.decode_pieces(pieces))
        return (text.replace(SPIECE_UNDERLINE, " ") if self.style == "marian" else text).strip()


class Tokenizer:
    """The artifact's tokenizer: framing per request around one of the two codecs."""

    def __init__(self, codec: TextCodec, spec: dict[str, Any]):
        self.codec = codec
        self.prefix: list[int | str] = list(spec["source_prefix"])
        self.suffix: list[int | str] = list(spec["source_suffix"])
        languages = spec.get("languages") or {}
        self.language_ids: dict[str, int] = dict(languages.get("codes", {}))
        self.source_role: str | None = languages.get("source")  # "token" or None
        self.target_role: str | None = languages.get("target")  # "forced_bos", "source_token" or None
        self.default_source: str | None = languages.get("default_source")
        self.default_target: str | None = languages.get("default_target")
        self.tasks: list[dict[str, Any]] = list(spec.get("tasks", []))
        self.forced_bos: int | None = spec.get("forced_bos_id")  # a fixed first target token (no languages)
        self.default = self.framing(require_target=False)

    @classmethod
    def from_artifact(cls, artifact: Artifact) -> Tokenizer:
        """The artifact's tokenizer; loaded once per process for the same files (a 256k vocabulary takes
        0.3 s, and every precision's translator needs one). A tokenizer is never changed once made."""
        files = artifact.manifest["files"]
        recorded = tuple(sorted((name, files[name]["sha256"]) for name in files if name.startswith("tokenizer/")))
        return _tokenizer(artifact.root.resolve() / "tokenizer", json.dumps(artifact.manifest["tokenizer"]), recorded)

    @classmethod
    def from_files(cls, folder: Path, spec: dict[str, Any]) -> Tokenizer:
        codec: TextCodec
        if spec["kind"] == "tokenizers":
            codec = FastCodec(folder / spec["tokenizer_file"], clean_up=bool(spec["clean_up_tokenization_spaces"]))
        else:
            codec = PieceCodec(folder, spec)
        return cls(codec, spec)

    # -- framing -------------------------------------------------------------------------------

    def framing(
        self,
        source_language: str | None = None,
        target_language: str | None = None,
        source_prefix: str | None = None,
        *,
        require_target: bool = True,
    ) -> Framing:
        """The framing of a request; a language this model does not know is a ValueError naming those it does.

        A model that writes many target languages and has no default needs one named (``require_target``):
        left to itself it writes whichever language its first token happens to be."""
        task = self._task(source_language, target_language) if self.tasks and source_prefix is None else None
        if source_language is not None and self.source_role is None and not self.tasks:
            raise ValueError("this model reads one fixed source language: drop the source language")
        source = self._code(source_language or self.default_source, "source") if self.source_role else None
        target = target_language or (self.default_target if self.target_role == "forced_bos" else None)
        if target_language is not None and self.target_role is None and not self.tasks:
            raise ValueError("this model translates into one fixed language: drop the target language")
        target_id = self._code(target, "target") if target is not None and self.target_role else None
        if require_target and self.target_role == "forced_bos" and target_id is None:
            raise ValueError(
                f"this model writes {len(self.language_ids)} languages and has no default: name a target language "
                f"(one of {', '.join(sorted(self.language_ids))})"
            )
        prefix = [source if slot == SOURCE_LANGUAGE else slot for slot in self.prefix]
        suffix = [source if slot == SOURCE_LANGUAGE else slot for slot in self.suffix]
        text_prefix = source_prefix if source_prefix is not None else (task["prefix"] if task else "")
        if self.target_role == "source_token" and target is not None and target_id is not None:
            # A multilingual Marian's target tag is text, as its users write it (``">>ukr<< " + text``), not an id
            # put before the text's ids: read without its tag, a text that starts with ``>>xxx<<`` itself would
            # have that read as a language tag, where after the tag it is text (pieces of " >>xxx<<").
            text_prefix = f">>{target}<< {text_prefix}"
        return Framing(
            tuple(int(i) for i in prefix if i is not None),
            tuple(int(i) for i in suffix if i is not None),
            text_prefix,
            target_id if self.target_role == "forced_bos" else self.forced_bos,
            task["name"] if task else None,
        )

    def _code(self, code: str | None, side: str) -> int | None:
        if code is None:
            return None
        if code not in self.language_ids:
            raise ValueError(
                f"{side} language {code!r} is not one of this model's {len(self.language_ids)} languages: "
                f"{', '.join(sorted(self.language_ids))}"
            )
        return self.language_ids[code]

    def _task(self, source: str | None, target: str | None) -> dict[str, Any] | None:
        """The T5 task whose languages match (``translation_en_to_de`` for en -> de)."""
        if source is None and target is None:
            return None
        found = [t for t in self.tasks if source in (None, t["source"]) and target in (None, t["target"])]
        if len(found) != 1:
            pairs = ", ".join(f"{t['source']} -> {t['target']}" for t in self.tasks)
            what = "matches" if not found else "is ambiguous between"
            raise ValueError(
                f"no single task of this model {what} source {source!r} and target {target!r}: it has {pairs} "
                "(or pass a source prefix of your own)"
            )
        return found[0]

    def task_generation(self, framing: Framing) -> dict[str, Any]:
        """Generation settings of the T5 task the framing chose (what the HF translation pipeline applies)."""
        return next((dict(t.get("generation", {})) for t in self.tasks if t["name"] == framing.task), {})

    # -- text <-> ids --------------------------------------------------------------------------

    def encode(self, text: str, framing: Framing | None = None) -> list[int]:
        """Source ids with the framing (default: the model's own languages); ``UnreadableText`` for text
        with a lone surrogate."""
        _check(text)
        framing = framing or self.default
        return [*framing.prefix_ids, *self.codec.encode(framing.text_prefix + text), *framing.suffix_ids]

    def phrase(self, text: str) -> tuple[tuple[int, ...], ...]:
        """The ways the target ids of ``text`` may be written inside a translation (a glossary term a constrained
        search must write): with the codec's word mark (a word of a spaced script, or any at the start of a
        translation) and without it (a Chinese or Japanese word inside a sentence, a word after a bracket). A piece
        the vocabulary lacks is written as its characters; none for text with no piece, or with one the vocabulary
        cannot write even so (it would decode as ``<unk>``)."""
        pieces = self.codec.target_pieces(text)
        ways = [pieces]
        if pieces and pieces[0].startswith(SPIECE_UNDERLINE):
            bare = pieces[0][len(SPIECE_UNDERLINE) :]
            ways.append([bare, *pieces[1:]] if bare else pieces[1:])
        found = [ids for way in ways if way and (ids := self._written(way))]
        return tuple(dict.fromkeys(found))

    def _written(self, pieces: list[str]) -> tuple[int, ...]:
        """The ids of ``pieces``, one the vocabulary lacks as its characters; empty if one cannot be written."""
        ids: list[int] = []
        for piece in pieces:
            whole = self.codec.piece_id(piece)
            each = [self.codec.piece_id(c) for c in piece] if whole is None else [whole]
            if None in each:
                return ()
            ids += [i for i in each if i is not None]
        return tuple(ids)

    def count(self, texts: Sequence[str], *, batch: int = 1024) -> list[int]:
        """Source tokens of each text with the default framing, encoded ``batch`` texts per call
        (a whole corpus's ids are never held at once). ``UnreadableText`` if one has a lone surrogate."""
        framing = self.default
        extra = len(framing.prefix_ids) + len(framing.suffix_ids)
        counts: list[int] = []
        try:
            "".join(texts).encode("utf-8")  # one look: only a text with a lone surrogate fails
        except UnicodeEncodeError:
            for text in texts:
                _check(text)
        for start in range(0, len(texts), batch):
            chunk = [framing.text_prefix + t for t in texts[start : start + batch]]
            counts += [n + extra for n in self.codec.lengths(chunk)]
        return counts

    def decode(self, ids: Sequence[int]) -> str:
        """What ``tokenizer.batch_decode(ids, skip_special_tokens=True)`` gives."""
        return self.codec.decode(ids)


def _excerpt(text: str, at: int, width: int = 12) -> str:
    """The text around position ``at``, surrogates written as ``\\udXXX`` escapes: where to look, printably."""
    around = text[max(0, at - width) : at + width + 1].replace("\n", "\\n")
    return 'near "' + around.encode("utf-8", errors="backslashreplace").decode("utf-8") + '"'


def _check(text: str) -> None:
    if (reason := unreadable(text)) is not None:
        raise UnreadableText(reason)


@functools.lru_cache(maxsize=8)
def _tokenizer(folder: Path, spec: str, recorded: tuple[tuple[str, str], ...]) -> Tokenizer:
    """``recorded`` (the files' hashes in the manifest) is part of the key: new files are a new tokenizer."""
    return Tokenizer.from_files(folder, json.loads(spec))
