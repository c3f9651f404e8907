"""A job's options: how its documents are translated. Defined once, here: the spec's JSON schema
(``contract.spec``), the flags of ``python -m worker translate`` and the worker's defaults all come from
``JobOptions``, so a new option is one field below (and the code that uses it).

Each field is an ``option``: its default, one line of help, and its bounds or choices. Options marked
``decoding`` go to the engine's search (``Translator.options``); the others shape documents
(``DocumentTranslator``)."""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

FORMATS = ("text", "markdown", "html")
AUTO = "auto"  # source_language: each document's own, found by language identification


def option(
    default: Any,
    help: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    choices: Sequence[str] | None = None,
    min_length: int | None = None,
    flag: str | None = None,
    decoding: bool = False,
) -> Any:
    """A field of ``JobOptions``; ``flag``: its command-line name when not ``--`` and the field's name."""
    enum = list(choices) if choices else None
    bounds = {"minimum": minimum, "maximum": maximum, "enum": enum, "minLength": min_length}
    metadata = {"help": help, "bounds": {k: v for k, v in bounds.items() if v is not None}, "flag": flag}
    return dataclasses.field(default=default, metadata={**metadata, "decoding": decoding})


@dataclass(frozen=True)
class JobOptions:
    beam_size: int | None = option(
        None, "beam size (default: the model's generation config; 1 = greedy)", minimum=1, maximum=16, flag="--beam",
        decoding=True,
    )  # fmt: skip
    max_new_tokens: int | None = option(None, "length limit per translation", minimum=1, maximum=4096, decoding=True)
    source_language: str | None = option(
        None, "source language code for many-to-many models (m2m100 'fr', nllb 'fra_Latn', mbart-50 'fr_XX'); "
        "with target_language it also picks a T5 task ('en' -> 'de'); 'auto': each document's own language, "
        "found in its text (one the model cannot read is skipped, one already in the target copied)",
        min_length=1, decoding=True,
    )  # fmt: skip
    target_language: str | None = option(
        None, "target language code: forced first token (m2m100/nllb/mbart-50), the >>cmn_Hans<< token of a "
        "multilingual Marian, or a T5 task's target; an unknown code is refused naming the model's codes",
        min_length=1, decoding=True,
    )  # fmt: skip
    source_prefix: str | None = option(
        None, "text put before every source, replacing a T5 task's prefix", decoding=True
    )
    fallback_language: str | None = option(
        None, "with source_language auto: the language of a document too short or too unclear to tell (default: "
        "the one the model reads by default)", min_length=1,
    )  # fmt: skip
    overlap: int = option(1, "context sentences before each window", minimum=0, maximum=8)
    budget: int = option(
        64, "source tokens per window (capped by the model's positions); the demo model was trained on up to 4 "
        "sentences", minimum=8, maximum=1024,
    )  # fmt: skip
    format: str = option(
        "text", "documents' markup: text (none: lines are layout), markdown or html (markup kept in place, code "
        "never translated)", choices=FORMATS,
    )  # fmt: skip

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The JSON schema of a spec's ``options``."""
        properties = {f.name: {**_json_type(f), **f.metadata["bounds"]} for f in fields(cls)}
        return {"type": "object", "additionalProperties": False, "properties": properties}

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> JobOptions:
        """The options a spec or a manifest gives (checked against ``schema`` first); the rest default."""
        return cls(**raw)

    def to_dict(self) -> dict[str, Any]:
        """The options that are set (None is "the model's own")."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    def decoding(self) -> dict[str, Any]:
        """The options of the engine's search that are set: ``Translator.options(**this)`` (``auto`` is not an
        option of the engine's: each document's language is)."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.metadata["decoding"] and getattr(self, f.name) not in (None, AUTO)
        }

    @property
    def routed(self) -> bool:
        """Whether documents are routed by the language found in each (``source_language: auto``)."""
        return self.source_language == AUTO

    @property
    def fixed_source_language(self) -> str | None:
        """The source language the job names for all its documents (None: the model's own, or ``auto``)."""
        return None if self.routed else self.source_language

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser, *, documents: Sequence[str] = ()) -> None:
        """One flag per option (``--max-new-tokens``), its default and help from here; ``documents``: the
        options that apply to documents only, said so in their help."""
        for f in fields(cls):
            note = " (--documents)" if f.name in documents else ""
            parser.add_argument(
                f.metadata["flag"] or f"--{f.name.replace('_', '-')}", dest=f.name, type=_parse(f), default=f.default,
                choices=f.metadata["bounds"].get("enum"), help=f"{f.metadata['help']}{note}",
            )  # fmt: skip

    @classmethod
    def from_arguments(cls, args: argparse.Namespace) -> JobOptions:
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})


def _base_type(f: dataclasses.Field[Any]) -> type:
    """``int`` or ``str``: the field's type without ``| None``."""
    hint = typing.get_type_hints(JobOptions)[f.name]
    if isinstance(hint, types.UnionType):
        hint = next(t for t in typing.get_args(hint) if t is not type(None))
    return typing.cast(type, hint)


def _parse(f: dataclasses.Field[Any]) -> Callable[[str], Any]:
    """A flag's value as the schema bounds it: argparse says what is wrong with one out of bounds."""
    bounds = f.metadata["bounds"]

    def parse(text: str) -> Any:
        if _base_type(f) is str:
            if len(text) < bounds.get("minLength", 0):
                raise argparse.ArgumentTypeError("give a value")
            return text
        value = int(text)  # argparse calls a ValueError "invalid parse value"
        low, high = bounds.get("minimum", value), bounds.get("maximum", value)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not within {low}..{high}")
        return value

    parse.__name__ = "integer" if _base_type(f) is int else "text"  # argparse names it in "invalid integer value"
    return parse


def _json_type(f: dataclasses.Field[Any]) -> dict[str, Any]:
    if f.metadata["bounds"].get("enum"):
        return {}  # the choices say it
    return {"type": "integer" if _base_type(f) is int else "string"}
