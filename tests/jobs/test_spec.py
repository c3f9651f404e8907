"""Job specs as users write them in YAML: words stay words, whatever YAML 1.1 would make of them."""

from __future__ import annotations

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
