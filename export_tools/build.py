"""``build``: Hugging Face model -> verified artifact directory, written atomically.

Stages (each announced on stderr): load the model, describe and check its tokenizer, export fp32 graphs,
derive INT8/FP16, store each precision with shared weights, write the manifest, verify (hashes,
parity, quality gate), and only then rename the temporary directory to ``--out``.
"""

from __future__ import annotations

import datetime
import errno
import hashlib
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from contract.storage import UMASK
from export_tools import architectures, calibration, precision, tokenization
from export_tools.architectures import Architecture, ExportError
from export_tools.export import OPSET, export_fp32, layer_shape, select_graph
from export_tools.request import check_request
from export_tools.weights import save_shared, token_rows_as_input
from worker.engine.artifact import ARTIFACT_FORMAT, seal, sha256_file


def say(message: str) -> None:
    print(f"[export] {message}", file=sys.stderr, flush=True)


@dataclass
class Source:
    """A loaded model with what the artifact records about where it came from."""

    model: Any
    tokenizer: Any
    generation: Any
    arch: Architecture
    identity: dict[str, Any]
    pair: dict[str, str] | None = None  # the fixed languages it reads and writes, when its name or --pair says


_OPUS_MT = re.compile(r"opus-mt-(?:tc-(?:big|base)-)?([a-z]{2,3})-([a-z]{2,3})(?:$|[^a-z])")


def named_pair(*names: str) -> dict[str, str] | None:
    """The languages an ``opus-mt-<source>-<target>`` name says (``Helsinki-NLP/opus-mt-en-zh``: en, zh)."""
    for name in names:
        match = _OPUS_MT.search(name.lower())
        if match:
            return {"source": match[1], "target": match[2]}
    return None


def load_source(src: str, revision: str | None = None) -> Source:
    """A local ``save_pretrained`` directory, or a hub id (needs network access to the hub)."""
    pinned = revision or "main"
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer, GenerationConfig

    local = Path(src)
    if local.exists():
        arch = architectures.local_architecture(local)
        identity: dict[str, Any] = {"id": str(local.resolve()), "content_sha256": _content_hash(local)}
    else:
        arch = architectures.architecture_for(AutoConfig.from_pretrained(src, revision=pinned).model_type)
        identity = {"id": src, "revision": revision}
    try:
        model = AutoModelForSeq2SeqLM.from_pretrained(src, revision=pinned, attn_implementation="eager")
        tokenizer = AutoTokenizer.from_pretrained(src, revision=pinned)  # what a user gets: fast where there is one
        generation = GenerationConfig.from_pretrained(src, revision=pinned)
    except (OSError, ValueError, RuntimeError, AssertionError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ExportError(f"cannot load {src}: {first} (re-save or re-download the model)") from None
    if identity.get("revision") is None and not local.exists():
        identity["revision"] = getattr(model.config, "_commit_hash", None)
    names = (src, str(getattr(model.config, "_name_or_path", "")), str(getattr(tokenizer, "name_or_path", "")))
    return Source(model.eval(), tokenizer, generation, arch, identity, named_pair(*names))


def _content_hash(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.iterdir() if p.is_file()):
        digest.update(path.name.encode())
        digest.update(bytes.fromhex(sha256_file(path)))
    return digest.hexdigest()


def _special_tokens(source: Source) -> dict[str, Any]:
    tokens = architectures.special_tokens(source.model.config, source.generation)
    bad = getattr(source.generation, "bad_words_ids", None) or []
    tokens["suppressed_ids"] = sorted({ids[0] for ids in bad if len(ids) == 1})
    return tokens


def _graph_io(model: onnx.ModelProto) -> dict[str, list[str]]:
    return {"inputs": [i.name for i in model.graph.input], "outputs": [o.name for o in model.graph.output]}


def _versions() -> dict[str, str]:
    import onnxruntime
    import torch
    import transformers

    return {
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
    }


@dataclass
class Calibrated:
    """Activation ranges for static INT8 and what the manifest records about how they were found."""

    ranges: dict[str, tuple[float, float]]
    record: dict[str, Any]


def calibrate(source: Source, fp32: dict[str, onnx.ModelProto], sentences: Sequence[str]) -> Calibrated:
    say(f"calibrating static INT8 on {len(sentences)} sentences")
    ids = [source.tokenizer(s).input_ids for s in sentences]
    ranges = calibration.observe(fp32, ids, _special_tokens(source), source.generation.to_diff_dict())
    record = {"sentences": len(sentences), "sha256": calibration.fingerprint(sentences), "tensors": len(ranges)}
    return Calibrated(ranges, record)


def write_precisions(
    fp32: dict[str, onnx.ModelProto], wanted: Sequence[str], root: Path, calibrated: Calibrated | None = None
) -> dict[str, Any]:
    """Each precision's graphs under ``root/<precision>/`` with one shared weights file, the token table
    looked up by the worker (``token_rows_as_input``)."""
    out: dict[str, Any] = {}
    for name in wanted:
        say(f"writing {name} graphs")
        extra: dict[str, Any] = {}
        if name == "fp32":
            models = {k: onnx.ModelProto.FromString(v.SerializeToString()) for k, v in fp32.items()}
        elif name == "int8":
            models = {k: precision.to_int8(v) for k, v in fp32.items()}
        elif name == "int8-static":
            assert calibrated is not None, "int8-static needs calibrated ranges"
            models = {k: precision.to_int8_static(v, calibrated.ranges) for k, v in fp32.items()}
            extra["calibration"] = calibrated.record
        else:
            models = {
                "encoder": precision.to_fp16(fp32["encoder"], []),
                "decoder": precision.to_fp16(fp32["decoder"], precision.FP32_DECODER_IO),
            }
        token_table = token_rows_as_input(models)
        models["select"] = select_graph(models["decoder"])
        io = {k: _graph_io(m) for k, m in models.items()}
        ops = {k: precision.quantization_summary(m) for k, m in models.items()}
        sizes = save_shared(models, root / name, token_table)
        out[name] = {
            "graphs": {k: f"{name}/{k}.onnx" for k in models},
            "weights": f"{name}/weights.bin",
            "io": io,
            "quantization": ops if name.startswith("int8") else None,
            "stored_bytes": sizes["stored_bytes"],
            "referenced_bytes": sizes["referenced_bytes"],
            "shared_weights": sizes["shared"],
            "token_table": sizes["token_table"],
            **extra,
        }
    return out


def _model_shape(model: Any) -> dict[str, int]:
    layers, heads, head_dim = layer_shape(model)
    c = model.config
    return {
        "decoder_layers": layers,
        "heads": heads,
        "head_dim": head_dim,
        "d_model": c.d_model,
        "vocab_size": c.vocab_size,
    }


def assemble(
    source: Source,
    precisions: Sequence[str],
    root: Path,
    samples: Sequence[str],
    calibration_set: Sequence[str] = (),
) -> dict[str, Any]:
    """Write every artifact file into ``root`` and return the manifest (also written)."""
    tokenizer_dir = root / "tokenizer"
    tokenization.save_files(source.tokenizer, tokenizer_dir)
    say(f"checking the worker's tokenizer against {type(source.tokenizer).__name__}")
    tokenizer = tokenization.describe(source.tokenizer, source.model.config, source.generation)
    tokenization.check(source.tokenizer, tokenizer, tokenizer_dir, samples, source.model.config.vocab_size)
    source.generation.to_json_file(root / "generation_config.json")

    with tempfile.TemporaryDirectory(dir=root.parent) as scratch:
        say(f"exporting {source.arch.name} encoder and decoder (fp32)")
        fp32 = export_fp32(source.model, source.arch, Path(scratch))
        calibrated = calibrate(source, fp32, calibration_set) if "int8-static" in precisions else None
        graphs = write_precisions(fp32, precisions, root, calibrated)

    manifest = {
        "format": ARTIFACT_FORMAT,
        "source": source.identity,
        "architecture": source.arch.name,
        "model_type": source.model.config.model_type,
        **({"pair": source.pair} if source.pair else {}),  # worker.engine.languages
        "model": _model_shape(source.model),
        "max_positions": architectures.max_positions(source.model.config),
        "special_tokens": _special_tokens(source),
        "tokenizer": tokenizer,
        "precisions": graphs,
        "opset": OPSET,
        "versions": _versions(),
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    return seal(root, manifest)


def build(
    src: str,
    out: Path,
    precisions: Sequence[str],
    *,
    force: bool = False,
    revision: str | None = None,
    verify: Any = None,
    calibration_set: Sequence[str] = (),
    pair: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Build into a temporary sibling of ``out`` and rename on success; nothing is left on failure.

    ``verify(source, tmp_dir) -> report`` runs before the rename; it raises to refuse the artifact.
    ``calibration_set``: source sentences that int8-static's activation ranges are calibrated on.
    ``pair``: the languages a model that reads and writes one fixed language does (``{"source": "en",
    "target": "zh"}``), where its name does not say them.
    """
    check_request(src, out, precisions, calibration_set, force=force)
    say(f"loading {src}")
    source = load_source(src, revision)
    source.pair = pair or source.pair
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        from export_tools.verify import sample_sentences

        manifest = assemble(source, precisions, tmp, sample_sentences(), calibration_set)
        if verify is not None:
            verify(source, tmp)
        if out.exists():
            shutil.rmtree(out)
        tmp.chmod(0o777 & ~UMASK)  # mkdtemp makes it private (0700): workers may run as other users
        tmp.rename(out)
        say(f"artifact {manifest['artifact_id']} written to {out}")
        return manifest
    except OSError as err:
        if err.errno == errno.ENOSPC:
            raise ExportError(
                f"no space left on the device while writing {out}: free space or pick another --out"
            ) from None
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
