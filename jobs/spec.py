"""Spec files: a job spec (``contract.spec``) read from YAML or JSON, local paths made absolute relative
to the file's folder."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from contract.spec import JobSpec, SpecError

MAX_SPEC_BYTES = 1_000_000  # a spec is a page of settings, never data


def load_spec(path: str | Path) -> JobSpec:
    """Read and validate a YAML or JSON spec file."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as err:
        raise SpecError(f"cannot read the spec {path}: {err.strerror}") from None
    if size > MAX_SPEC_BYTES:
        raise SpecError(f"{path} is {size:,} bytes; a spec is at most {MAX_SPEC_BYTES:,}: list inputs by glob")
    text = path.read_text(encoding="utf-8")
    try:
        raw = json.loads(text) if path.suffix == ".json" else _yaml(text)
    except ValueError as err:
        raise SpecError(f"{path} is not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {err}") from None
    return JobSpec.from_dict(raw, source=str(path)).resolved(path.parent)


def _yaml(text: str) -> Any:
    """YAML as its 1.2 core schema reads booleans: only ``true`` and ``false``. YAML 1.1 (PyYAML's default)
    turns ``off``, ``on``, ``yes``, ``no``, ``y`` and ``n`` into booleans, so ``memory: off`` or
    ``target_language: no`` (Norwegian) would arrive as ``False``: here they stay the words written."""
    import yaml

    try:
        return yaml.load(text, Loader=_spec_loader())  # a SafeLoader with one resolver changed
    except yaml.YAMLError as err:
        raise ValueError(str(err)) from None


def _spec_loader() -> type:
    import yaml

    bool_tag = "tag:yaml.org,2002:bool"

    class SpecLoader(yaml.SafeLoader):
        yaml_implicit_resolvers = {
            first: [(tag, regexp) for tag, regexp in resolvers if tag != bool_tag]
            for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
        }

    SpecLoader.add_implicit_resolver(bool_tag, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
    return SpecLoader
