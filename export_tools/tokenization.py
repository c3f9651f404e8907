"""What the worker needs of a model's tokenizer, read from the tokenizer itself, and the proof it holds.

``describe`` writes nothing new: it reads the Hugging Face tokenizer the model comes with (the one
``AutoTokenizer`` gives, fast where the model has one) and returns the manifest's ``tokenizer``
section: which codec the worker runs, the ids around a source (with the slot a source-language
token fills, found by switching ``src_lang`` and watching what moves, so NLLB's legacy placement
is read, not assumed), the model's languages and their roles, T5's task prefixes, added and special
tokens, and the tokenizer's own ``clean_up_tokenization_spaces``.

``check`` then holds the worker's ``Tokenizer`` to the Hugging Face one on both directions: the ids
of tricky sample texts in several languages, and the text of random id sequences over the whole
model vocabulary (special ids, language tokens, pieces only the source side knows, ids past the
tokenizer's end). A model whose tokenizer behaves otherwise is refused at build time.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from export_tools.architectures import ExportError
from worker.engine.tokenizer import SOURCE_LANGUAGE, Tokenizer

TASK = re.compile(r"^translation_(?P<source>\w+?)_to_(?P<target>\w+)$")
# Texts the encoders must agree on beyond the demo sentences: unknown characters, emoji, digits,
# CJK, ASCII punctuation, spaces at both ends, markup, special-token strings in the text.
TRICKY_TEXTS = (
    "  Tom has 3 apples.  ",
    "Price: $4.50 (about ¥32) -- ok?! [yes] {no} <b>bold</b> & 'quoted' \"too\"",
    "汤姆有3个苹果。 Ünïcödé façade naïve résumé",
    "Emoji 😀👍🏽 and symbols ©®™ § ¶ † ‡ • … ‰ ′ ″",
    "URL https://example.com/a?b=1&c=2#top e-mail: a.b@example.org v1.2.3 file_name.txt",
    "Numbers 1,234,567.89 and 0.001 and 2025-03-05 at 09:30",
    "Tabs\tand  double  spaces and\u00a0no-break space",
    "Ελληνικά Русский العربية עברית हिन्दी 한국어 日本語",
    "</s> <unk> <pad> in the text",
    "a",
)


def _language_codes(tokenizer: Any) -> dict[str, int]:
    """Language code -> token id, as each family's tokenizer lists its languages."""
    if hasattr(tokenizer, "supported_language_codes"):  # Marian: >>cmn_Hans<< tokens in the vocabulary
        return {t[2:-2]: int(tokenizer.convert_tokens_to_ids(t)) for t in tokenizer.supported_language_codes}
    if hasattr(tokenizer, "lang_code_to_token"):  # M2M100: "fr" -> "__fr__"
        return {c: int(tokenizer.convert_tokens_to_ids(t)) for c, t in tokenizer.lang_code_to_token.items()}
    if hasattr(tokenizer, "lang_code_to_id"):  # mBART-50
        return {c: int(i) for c, i in tokenizer.lang_code_to_id.items()}
    if hasattr(tokenizer, "src_lang"):  # NLLB: its languages are its additional special tokens
        return {c: int(tokenizer.convert_tokens_to_ids(c)) for c in tokenizer.additional_special_tokens}
    return {}


def _framing(tokenizer: Any, probe: str = "a") -> tuple[list[int], list[int]]:
    body = tokenizer(probe, add_special_tokens=False).input_ids
    full = tokenizer(probe).input_ids
    start = next((i for i in range(len(full)) if full[i : i + len(body)] == body), None)
    if start is None:
        raise ExportError(f"cannot find the text's ids {body} inside the framed ids {full}: tokenizer not supported")
    return full[:start], full[start + len(body) :]


def _source_template(tokenizer: Any, codes: dict[str, int]) -> tuple[list[int | str], list[int | str]]:
    """Prefix and suffix ids, with ``SOURCE_LANGUAGE`` where the source-language token goes."""
    if not (codes and hasattr(tokenizer, "src_lang")):
        prefix, suffix = _framing(tokenizer)
        return list(prefix), list(suffix)
    original = tokenizer.src_lang
    templates = []
    try:
        for code in sorted(codes)[:2]:
            tokenizer.src_lang = code
            prefix, suffix = _framing(tokenizer)
            slot = lambda ids, c=code: [SOURCE_LANGUAGE if i == codes[c] else i for i in ids]
            templates.append((slot(prefix), slot(suffix)))
    finally:
        tokenizer.src_lang = original
    if templates[0] != templates[1] or SOURCE_LANGUAGE not in templates[0][0] + templates[0][1]:
        raise ExportError(f"the source-language token does not sit in one fixed place ({templates}): not supported")
    return templates[0]


def _languages(tokenizer: Any, codes: dict[str, int], generation: Any) -> dict[str, Any] | None:
    if not codes:
        return None
    by_id = {i: c for c, i in codes.items()}
    if hasattr(tokenizer, "supported_language_codes"):
        return {
            "codes": codes,
            "source": None,
            "target": "source_token",
            "default_source": None,
            "default_target": None,
        }
    forced = getattr(generation, "forced_bos_token_id", None)
    return {
        "codes": codes,
        "source": "token",
        "target": "forced_bos",
        "default_source": tokenizer.src_lang,
        "default_target": by_id.get(forced) if forced is not None else None,
    }


def _tasks(config: Any) -> list[dict[str, Any]]:
    """T5's translation tasks: ``task_specific_params['translation_en_to_de']`` -> prefix and generation settings."""
    tasks = []
    for name, params in sorted((getattr(config, "task_specific_params", None) or {}).items()):
        match = TASK.match(name)
        if match and isinstance(params, dict):
            generation = {k: v for k, v in params.items() if k != "prefix"}
            tasks.append(
                {"name": name, **match.groupdict(), "prefix": params.get("prefix", ""), "generation": generation}
            )
    return tasks


def _codec(tokenizer: Any) -> dict[str, Any]:
    """Which backend runs this tokenizer in the worker, and the files it reads."""
    if tokenizer.is_fast:
        return {"kind": "tokenizers", "tokenizer_file": "tokenizer.json"}
    kind = type(tokenizer).__name__
    if kind == "MarianTokenizer":
        if tokenizer.separate_vocabs:
            raise ExportError("Marian models with separate source and target vocabularies are not supported yet")
        files = {"source_model": "source.spm", "target_model": "target.spm", "vocab": "vocab.json"}
        return {"kind": "sentencepiece", "decode_style": "marian", **files}
    if kind == "M2M100Tokenizer":
        files = {"source_model": "sentencepiece.bpe.model", "target_model": "sentencepiece.bpe.model"}
        return {"kind": "sentencepiece", "decode_style": "m2m100", **files, "vocab": "vocab.json"}
    raise ExportError(f"tokenizer {kind} is not supported: Marian, M2M100 and fast (tokenizer.json) tokenizers are")


def _beyond_vocab(tokenizer: Any, model_vocab: int) -> dict[str, str]:
    """Tokens a slow tokenizer names for ids past its vocab.json (M2M100's ``__fr__``): decoding needs them."""
    if tokenizer.is_fast:
        return {}
    known = set(tokenizer.encoder.values()) | set(tokenizer.added_tokens_decoder)
    names = {i: tokenizer.convert_ids_to_tokens(i) for i in range(model_vocab) if i not in known}
    return {str(i): t for i, t in names.items() if t != tokenizer.unk_token}


def describe(tokenizer: Any, config: Any, generation: Any) -> dict[str, Any]:
    """The manifest's ``tokenizer`` section for a Hugging Face tokenizer."""
    codes = _language_codes(tokenizer)
    prefix, suffix = _source_template(tokenizer, codes)
    added = {
        str(i): {"content": t.content, "special": t.special, "lstrip": t.lstrip, "rstrip": t.rstrip}
        for i, t in sorted(tokenizer.added_tokens_decoder.items())
    }
    languages = _languages(tokenizer, codes, generation)
    forced = getattr(generation, "forced_bos_token_id", None)
    return {
        **_codec(tokenizer),
        "source_prefix": prefix,
        "source_suffix": suffix,
        "languages": languages,
        "forced_bos_id": forced if languages is None or languages["target"] != "forced_bos" else None,
        "tasks": _tasks(config),
        "unk_id": tokenizer.unk_token_id,
        "unk_token": str(tokenizer.unk_token),
        "special_ids": sorted(set(tokenizer.all_special_ids)),
        "special_tokens": sorted(set(tokenizer.all_special_tokens)),
        "added_tokens": added,
        "tokens_beyond_vocab": _beyond_vocab(tokenizer, config.vocab_size),
        "clean_up_tokenization_spaces": bool(tokenizer.clean_up_tokenization_spaces),
        "vocab_size": len(tokenizer),
    }


def save_files(tokenizer: Any, folder: Path) -> None:
    """The tokenizer as ``save_pretrained`` writes it (so ``AutoTokenizer`` loads the artifact's copy too),
    plus ``tokenizer.json`` for a fast one."""
    tokenizer.save_pretrained(folder)
    if tokenizer.is_fast:
        tokenizer.backend_tokenizer.save(str(folder / "tokenizer.json"))


# ------------------------------------------------------------------------------------------------
# The proof


def _reference_ids(tokenizer: Any, ours: Tokenizer, text: str, source: str | None, target: str | None) -> list[int]:
    """What a user of ``transformers`` feeds the model for this text and these languages."""
    framing = ours.framing(source, target, require_target=False)
    if ours.source_role == "token" and source is not None:
        tokenizer.src_lang = source
    if ours.target_role == "source_token" and target is not None:
        text = f">>{target}<< {text}"
    return list(tokenizer(framing.text_prefix + text if ours.tasks else text).input_ids)


def _language_pairs(ours: Tokenizer) -> list[tuple[str | None, str | None]]:
    pairs: list[tuple[str | None, str | None]] = [(None, None)]
    codes = sorted(ours.language_ids)
    if ours.source_role == "token":
        pairs += [(codes[0], codes[-1]), (codes[len(codes) // 2], codes[1])]
    elif ours.target_role == "source_token":
        pairs += [(None, codes[0]), (None, codes[-1])]
    pairs += [(t["source"], t["target"]) for t in ours.tasks]
    return pairs


def check(tokenizer: Any, spec: dict[str, Any], folder: Path, samples: Sequence[str], model_vocab: int) -> None:
    """The worker's tokenizer gives the Hugging Face tokenizer's ids and text, or the build stops here."""
    if spec["vocab_size"] > model_vocab:
        raise ExportError(
            f"the tokenizer has {spec['vocab_size']} tokens but the model only {model_vocab}: "
            "this tokenizer belongs to another model; save the model's own tokenizer beside it"
        )
    ours = Tokenizer.from_files(folder, spec)
    original = getattr(tokenizer, "src_lang", None)
    try:
        for source, target in _language_pairs(ours):
            for text in [*samples, *TRICKY_TEXTS]:
                expected = _reference_ids(tokenizer, ours, text, source, target)
                got = ours.encode(text, ours.framing(source, target, require_target=False))
                if max(expected) >= model_vocab:
                    raise ExportError(
                        f"the tokenizer produces id {max(expected)} but the model's vocabulary has {model_vocab} "
                        "entries: this tokenizer belongs to another model; save the model's own tokenizer beside it"
                    )
                if got != expected:
                    raise ExportError(
                        f"the worker tokenizer disagrees with {type(tokenizer).__name__} on {text!r} "
                        f"(languages {source}, {target}): {got} vs {expected}; this tokenizer is not supported yet"
                    )
    finally:
        if original is not None:
            tokenizer.src_lang = original
    _check_decoding(tokenizer, ours, model_vocab)


def decoding_probes(ours: Tokenizer, model_vocab: int, count: int = 400, seed: int = 5) -> list[list[int]]:
    """Id sequences that cover what a model can emit: any id, specials and languages among ordinary pieces."""
    rng = random.Random(seed)
    notable = sorted({*ours.language_ids.values(), *range(min(8, model_vocab)), model_vocab - 1})
    probes = []
    for _ in range(count):
        length = rng.randint(0, 24)
        probes.append(
            [rng.choice(notable) if rng.random() < 0.15 else rng.randrange(model_vocab) for _ in range(length)]
        )
    return probes


def _check_decoding(tokenizer: Any, ours: Tokenizer, model_vocab: int) -> None:
    probes = decoding_probes(ours, model_vocab)
    expected = tokenizer.batch_decode(probes, skip_special_tokens=True)
    for ids, text in zip(probes, expected):
        got = ours.decode(ids)
        if got != text:
            raise ExportError(
                f"the worker decodes {ids} as {got!r} but {type(tokenizer).__name__} as {text!r}: "
                "this tokenizer is not supported yet"
            )
