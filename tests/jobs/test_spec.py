"""Job specs as users write them in YAML: words stay words, whatever YAML 1.1 would make of them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from contract.spec import SCHEMA, SpecError
from jobs.spec import load_spec

BODY = "name: words\ninputs: [in.jsonl]\noutput: out\nartifact: art\n"


def enums(schema: dict, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], list[str]]:
    found = {}
    for key, sub in schema.get("properties", {}).items():
        if "enum" in sub:
            found[path + (key,)] = sub["enum"]
        found.update(enums(sub, path + (key,)))
    return found


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(BODY + text)
    return path


def test_memory_off_as_the_readme_writes_it_is_accepted(tmp_path) -> None:
    assert load_spec(write(tmp_path, "memory: off\n")).memory == "off"


@pytest.mark.parametrize("field,value", [(p, v) for p, values in enums(SCHEMA).items() for v in values])
def test_every_enum_value_written_bare_in_yaml_is_read_as_written(tmp_path, field, value) -> None:
    text = f"{field[0]}: {value}\n" if len(field) == 1 else f"{field[0]}:\n  {field[1]}: {value}\n"
    spec = load_spec(write(tmp_path, text))
    read = getattr(spec, field[0]) if len(field) == 1 else getattr(spec.options, field[1])
    assert read == value


@pytest.mark.parametrize("word", ["on", "off", "yes", "no", "y", "n", "On", "OFF", "Yes", "NO"])
def test_yaml_11_boolean_words_stay_words(tmp_path, word) -> None:
    spec = load_spec(write(tmp_path, f"id_column: {word}\noptions: {{target_language: {word}}}\n"))
    assert spec.id_column == word and spec.options.target_language == word  # `no` is Norwegian
    if word != "off":  # refused as the word it is, not as False
        with pytest.raises(SpecError, match=f"memory: '{word}' is not one of"):
            load_spec(write(tmp_path, f"memory: {word}\n"))


def test_an_empty_or_null_enum_says_so_and_names_the_file(tmp_path) -> None:
    for text in ("memory: null\n", "memory:\n", "device: ~\n"):
        with pytest.raises(SpecError, match=r"spec\.yaml: (memory|device): empty \(null\); is not one of .*leave"):
            load_spec(write(tmp_path, text))


def test_targets_and_their_artifacts_as_a_spec_names_them(tmp_path) -> None:
    pairs = load_spec(write(tmp_path, "artifacts: {en-zh: zh-model, '*-de': m2m100}\n"))
    assert pairs.targets == ["zh", "de"] and pairs.artifact_for("zh") == str(tmp_path / "zh-model")
    assert pairs.artifact_for("de") == str(tmp_path / "m2m100") and pairs.paths == [
        str(tmp_path / "zh-model"),
        str(tmp_path / "m2m100"),
    ]
    default = load_spec(write(tmp_path, "target_languages: [ja, zh]\nartifacts: {en-zh: zh-model}\n"))
    assert [default.artifact_for(t) for t in default.targets] == [str(tmp_path / "art"), str(tmp_path / "zh-model")]
    assert load_spec(write(tmp_path, "options: {target_language: ko}\n")).targets == ["ko"]
    assert load_spec(write(tmp_path, "language_column: lang\n")).options.source_language == "auto"


@pytest.mark.parametrize(
    "text,message",
    [
        ("artifacts: {en-zh: a, fr-zh: b}\n", "en-zh and fr-zh both translate into zh: name one artifact per target"),
        ("artifacts: {english-zh: a}\n", "'english-zh' is not a language pair: write SOURCE-TARGET"),
        (
            "artifacts: {en-zh: a}\noptions: {source_language: fr}\n",
            "en-zh reads en, but options.source_language is fr",
        ),
        ("target_languages: [zh]\noptions: {target_language: zh}\n", "target_languages or options.target_language"),
        ("language_column: lang\noptions: {source_language: en}\n", "leave options.source_language out"),
        ("target_languages: [zh, zh]\n", "has non-unique elements"),
    ],
)
def test_a_spec_whose_targets_and_artifacts_disagree_is_refused(tmp_path, text, message) -> None:
    with pytest.raises(SpecError, match=re.escape(message)):
        load_spec(write(tmp_path, text))


def test_a_target_without_an_artifact_is_refused_naming_the_pair(tmp_path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("name: x\ninputs: [in.jsonl]\noutput: out\nartifacts: {en-zh: a}\ntarget_languages: [zh, ja]\n")
    with pytest.raises(SpecError, match=r"no artifact translates into ja: add \*-ja: PATH under artifacts"):
        load_spec(path)
    path.write_text("name: x\ninputs: [in.jsonl]\noutput: out\n")
    with pytest.raises(SpecError, match="name the artifact"):
        load_spec(path)
