"""The worker's tokenizer against the model's own Hugging Face tokenizer, on any text and any ids."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from export_tools.fixtures.names import LANGUAGES, LIKE
from tests.shared import Lazy
from worker.engine.artifact import MANIFEST, Artifact, seal
from worker.engine.tokenizer import Tokenizer

# Text as users send it: any script, digits, punctuation, emoji, spaces at the ends, markup, the
# strings of special tokens; no control characters (the document layer turns those into spaces).
ALPHABET = st.characters(blacklist_categories=("Cc", "Cs", "Co", "Cn"))
TEXT = st.one_of(
    st.text(ALPHABET, max_size=60),
    st.lists(st.sampled_from(["Tom", " has", " 3", "苹果", "。", "😀", " <unk>", "</s>", "  ", "é", ">>", "<<", "-"]),
             max_size=12).map("".join),
)  # fmt: skip


@pytest.fixture(scope="module")
def pairs(tiny_models: Mapping[str, Path], artifacts: Mapping[str, Path]) -> Mapping[str, tuple[Any, Tokenizer]]:
    from transformers import AutoTokenizer

    return Lazy(
        LIKE,
        lambda name: (
            AutoTokenizer.from_pretrained(tiny_models[name]),
            Tokenizer.from_artifact(Artifact.load(artifacts[name])),
        ),
    )


@pytest.mark.parametrize("name", LIKE)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXT)
def test_any_text_encodes_to_the_ids_transformers_gives(name, pairs, text: str) -> None:
    theirs, ours = pairs[name]
    assert ours.encode(text) == theirs(text).input_ids


@pytest.mark.parametrize("name", LIKE)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.one_of(TEXT, st.sampled_from([">>fra<< Tom", ">>", "</s> Tom </s>", ""])), max_size=12))
def test_token_counts_are_the_lengths_of_the_encodings(name, pairs, texts: list[str]) -> None:
    """``count`` (chunk planning at submit) takes a faster way than ``encode`` for texts without added tokens."""
    ours = pairs[name][1]
    assert ours.count(texts, batch=5) == [len(ours.encode(t)) for t in texts]


MARIAN_WITH_TAGS = [name for name in LIKE if name.startswith("opus-mt") and LANGUAGES[name][1]]


@pytest.mark.parametrize("name", MARIAN_WITH_TAGS)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXT, tag=st.sampled_from([">>fra<<", ">>rus<<", ">>xyz<<", ">>", "<<"]), space=st.sampled_from(["", " "]))
@example(text=" Tom has 3 apples.", tag=">>fra<<", space="")
def test_a_marian_target_tag_encodes_as_transformers_reads_it_before_the_text(name, pairs, text, tag, space) -> None:
    """A source that itself starts with a ``>>xxx<<`` is text after the target's tag, as in the model's
    own tokenizer: ``tokenizer(">>tgt<< " + source)``."""
    theirs, ours = pairs[name]
    target = LANGUAGES[name][1]
    source = tag + space + text
    assert ours.encode(source, ours.framing(None, target)) == theirs(f">>{target}<< {source}").input_ids


@pytest.fixture(scope="module")
def sizes(tiny_models: Mapping[str, Path]) -> Mapping[str, int]:
    """Ids each model can emit: its embedding rows (t5 has 28 past its tokenizer's end)."""
    from transformers import AutoConfig

    return Lazy(LIKE, lambda name: AutoConfig.from_pretrained(tiny_models[name]).vocab_size)


@pytest.mark.parametrize("name", LIKE)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_ids_decode_to_the_text_batch_decode_gives(name, pairs, sizes, data) -> None:
    theirs, ours = pairs[name]
    size = sizes[name]
    notable = sorted({0, 1, 2, 3, size - 1, *ours.language_ids.values()})
    ids = data.draw(st.lists(st.one_of(st.integers(0, size - 1), st.sampled_from(notable)), max_size=30))
    assert ours.decode(ids) == theirs.batch_decode([ids], skip_special_tokens=True)[0]


def test_pieces_only_the_source_side_knows_decode_as_transformers_does(pairs) -> None:
    """opus-mt-en-zh can emit English pieces its Chinese sentencepiece model lacks: their word marks
    become spaces, as MarianTokenizer's decode gives ("和 window" rather than "和▁window")."""
    theirs, ours = pairs["opus-mt-en-zh"]
    codec = ours.codec
    english = [i for p, i in codec.vocab.items() if p.startswith("\u2581") and codec.target.piece_to_id(p) == 0][:3]
    chinese = [i for p, i in codec.vocab.items() if len(p) == 1 and "\u4e00" <= p <= "\u9fff"][:2]
    ids = [chinese[0], english[0], english[1], chinese[1], english[2]]
    text = ours.decode(ids)
    assert text == theirs.batch_decode([ids], skip_special_tokens=True)[0]
    assert "\u2581" not in text and " " in text


def test_a_process_loads_a_tokenizer_once_and_new_files_at_the_same_path_anew(artifacts, tmp_path: Path) -> None:
    """An artifact rebuilt in place with other tokenizer files (here: two pieces' ids swapped) is not
    served the tokenizer loaded before."""
    folder = Path(shutil.copytree(artifacts["opus-mt-en-zh"], tmp_path / "artifact"))
    first = Tokenizer.from_artifact(Artifact.load(folder))
    assert Tokenizer.from_artifact(Artifact.load(folder)) is first
    text = "Tom has 3 apples."
    ids = first.encode(text)
    vocab_file = folder / "tokenizer" / "vocab.json"
    vocab = json.loads(vocab_file.read_text(encoding="utf-8"))
    pieces = {i: piece for piece, i in vocab.items()}
    a, b = pieces[ids[0]], pieces[ids[1]]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    vocab_file.write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    seal(folder, json.loads((folder / MANIFEST).read_text()))
    second = Tokenizer.from_artifact(Artifact.load(folder))
    assert second.encode(text)[:2] == [ids[1], ids[0]]
