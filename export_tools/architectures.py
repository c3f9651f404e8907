"""Supported architectures: how to read each one's config, graphs and tokenizer layout.

Everything an artifact records about a model (special ids, positions, tokenizer framing) is
read from the model's own config, generation config and tokenizer here, never hard-coded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from export_tools import graphs


class ExportError(Exception):
    """A problem with the input model or the build; the message says what to do."""


@dataclass(frozen=True)
class Architecture:
    name: str  # our name, also the manifest's "architecture"
    model_types: tuple[str, ...]  # config.model_type values it covers
    parts: Callable[[Any], graphs.GraphParts]
    tokenizer_files: tuple[str, ...]  # copied into the artifact


ARCHITECTURES = (
    Architecture("marian", ("marian",), graphs.marian_parts, ("source.spm", "target.spm", "vocab.json")),
    Architecture("m2m100", ("m2m_100",), graphs.m2m100_parts, ("sentencepiece.bpe.model", "vocab.json")),
    Architecture("t5", ("t5", "mt5"), graphs.t5_parts, ("spiece.model",)),
)
SUPPORTED = ", ".join(f"{a.name} ({'/'.join(a.model_types)})" for a in ARCHITECTURES)


def architecture_for(model_type: str) -> Architecture:
    for arch in ARCHITECTURES:
        if model_type in arch.model_types:
            return arch
    raise ExportError(f"unsupported architecture {model_type!r}: supported are {SUPPORTED}")


def special_tokens(config: Any, generation: Any) -> dict[str, Any]:
    """The ids generation needs, from the generation config first and the model config second."""

    def pick(name: str) -> Any:
        value = getattr(generation, name, None)
        return value if value is not None else getattr(config, name, None)

    eos = pick("eos_token_id")
    tokens = {
        "decoder_start_token_id": pick("decoder_start_token_id"),
        "eos_token_id": eos[0] if isinstance(eos, list) else eos,
        "pad_token_id": pick("pad_token_id"),
        "forced_bos_token_id": pick("forced_bos_token_id"),
        "forced_eos_token_id": pick("forced_eos_token_id"),
    }
    for required in ("decoder_start_token_id", "eos_token_id", "pad_token_id"):
        if tokens[required] is None:
            raise ExportError(f"the model config has no {required}: set it in config.json or generation_config.json")
    return tokens


def max_positions(config: Any) -> int | None:
    """Longest source the model can encode; T5's relative positions have no hard limit."""
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if value else None


def tokenizer_framing(arch: Architecture, tokenizer: Any) -> dict[str, Any]:
    """How the worker turns text into ids without ``transformers``: files, prefix and suffix ids.

    The result is checked against the Hugging Face tokenizer at build time (``build.check_tokenizer``).
    """
    probe = tokenizer("a").input_ids
    body = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("a"))
    start = next(i for i in range(len(probe)) if probe[i : i + len(body)] == body)
    framing: dict[str, Any] = {
        "source_prefix_ids": probe[:start],
        "source_suffix_ids": probe[start + len(body) :],
        "unk_id": tokenizer.unk_token_id,
        "special_ids": sorted(set(tokenizer.all_special_ids)),
        "vocab_size": len(tokenizer),
    }
    if arch.name == "marian":
        framing.update(kind="vocab", source_model="source.spm", target_model="target.spm", vocab="vocab.json")
    elif arch.name == "m2m100":
        spm_file = "sentencepiece.bpe.model"
        framing.update(kind="vocab", source_model=spm_file, target_model=spm_file, vocab="vocab.json")
        framing["language_ids"] = {code.strip("_"): i for code, i in tokenizer.lang_token_to_id.items()}
    else:
        framing.update(kind="spm_ids", source_model="spiece.model", target_model="spiece.model", vocab=None)
    return framing


def read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ExportError(f"{path} is missing: is this a directory written by save_pretrained?") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ExportError(f"{path} is not valid JSON ({err}): re-download or re-save the model") from None
