"""The build reads each tokenizer's conventions from the tokenizer itself, and refuses one it cannot reproduce."""

from __future__ import annotations

from pathlib import Path

import pytest

from export_tools import tokenization
from export_tools.architectures import ExportError
from export_tools.verify import sample_sentences
from worker.engine.tokenizer import Tokenizer


def _described(tokenizer, model_dir: Path, folder: Path) -> dict:
    from transformers import AutoConfig, GenerationConfig

    tokenization.save_files(tokenizer, folder)
    config, generation = AutoConfig.from_pretrained(model_dir), GenerationConfig.from_pretrained(model_dir)
    return tokenization.describe(tokenizer, config, generation)


def test_nllb_in_legacy_mode_puts_the_source_language_last(tiny_models, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    model_dir = tiny_models["nllb-200-distilled-600M"]
    tokenizer = AutoTokenizer.from_pretrained(model_dir, legacy_behaviour=True)
    spec = _described(tokenizer, model_dir, tmp_path)
    assert spec["source_prefix"] == [] and spec["source_suffix"] == [2, "source_language"]
    tokenization.check(tokenizer, spec, tmp_path, sample_sentences(), 256206)  # ids and text as transformers'


def test_a_tokenizer_the_worker_would_decode_otherwise_is_refused(tiny_models, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    model_dir = tiny_models["opus-mt-en-zh"]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    spec = _described(tokenizer, model_dir, tmp_path) | {"decode_style": "m2m100"}  # no word marks -> spaces
    # The decoding check alone: with the m2m100 style the worker also reads no leading >>lang<< tag, so the
    # whole check would stop earlier, at the ids of a multilingual target.
    ours = Tokenizer.from_files(tmp_path, spec)
    with pytest.raises(ExportError, match="the worker decodes .* but MarianTokenizer as"):
        tokenization._check_decoding(tokenizer, ours, 65001)
