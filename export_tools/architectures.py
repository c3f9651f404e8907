"""Supported architectures: how to read each one's config, graphs and tokenizer layout.

Everything an artifact records about a model (special ids, positions) is read from the model's own
config and generation config here, never hard-coded; its tokenizer is read in ``tokenization``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from export_tools.graphs import GraphParts


class ExportError(Exception):
    """A problem with the input model or the build; the message says what to do."""


@dataclass(frozen=True)
class Architecture:
    name: str  # our name, also the manifest's "architecture"
    model_types: tuple[str, ...]  # config.model_type values it covers
    parts_of: str  # the function of ``graphs`` that takes this family's modules apart

    def parts(self, model: Any) -> GraphParts:
        from export_tools import graphs  # torch: imported where a model is exported, not to verify one

        parts: Callable[[Any], GraphParts] = getattr(graphs, self.parts_of)
        return parts(model)


ARCHITECTURES = (
    Architecture("marian", ("marian",), "marian_parts"),
    Architecture("m2m100", ("m2m_100",), "m2m100_parts"),  # M2M100 and NLLB
    Architecture("mbart", ("mbart",), "mbart_parts"),  # mBART-50 (many-to-many)
    Architecture("t5", ("t5", "mt5"), "t5_parts"),
)
SUPPORTED = ", ".join(f"{a.name} ({'/'.join(a.model_types)})" for a in ARCHITECTURES)


def architecture_for(model_type: str) -> Architecture:
    for arch in ARCHITECTURES:
        if model_type in arch.model_types:
            return arch
    raise ExportError(f"unsupported architecture {model_type!r}: supported are {SUPPORTED}")


WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def local_architecture(directory: Path) -> Architecture:
    """A ``save_pretrained`` directory's architecture, once what a build needs from it is there: config,
    weights and generation config. Reads no weights (and imports no torch), so a bad directory is refused
    in a moment."""
    if not directory.is_dir():
        raise ExportError(f"{directory} is a file: pass the directory written by save_pretrained")
    arch = architecture_for(str(read_json(directory / "config.json").get("model_type")))
    if not any((directory / f).exists() for f in WEIGHT_FILES):
        raise ExportError(f"{directory} has no {' or '.join(WEIGHT_FILES)}: the weights are missing, re-save the model")
    if not (directory / "generation_config.json").exists():
        raise ExportError(
            f"{directory} has no generation_config.json: write one with "
            "GenerationConfig.from_model_config(config).save_pretrained(DIR) after checking its settings"
        )
    return arch


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
    """Positions the model has: the longest source it can encode and the most tokens its decoder can
    generate (the decoder start takes position 0). T5's relative positions have no hard limit."""
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if value else None


def read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ExportError(f"{path} is missing: is this a directory written by save_pretrained?") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ExportError(f"{path} is not valid JSON ({err}): re-download or re-save the model") from None
