"""export_tools build/verify on the real-like models of every family."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from export_tools.build import build
from export_tools.fixtures.names import LIKE
from export_tools.precision import op_counts
from export_tools.verify import VerificationError
from tests.export_tools.conftest import run_cli
from tests.shared import ARTIFACT_PRECISIONS
from worker.engine.inference import pad_batch
from worker.engine.translator import Translator

every_model = pytest.mark.parametrize("arch", LIKE)
one_model = pytest.mark.parametrize("arch", ["opus-mt-en-zh"])  # what is checked does not depend on the family
every_int8 = pytest.mark.parametrize(  # each test artifact's INT8 precisions
    ("arch", "precision"),
    [(arch, p) for arch in LIKE for p in ARTIFACT_PRECISIONS.get(arch, ["int8"]) if p.startswith("int8")],
)


@every_model
def test_fp32_generation_is_token_identical_to_generate(arch: str, artifacts: Mapping[str, Path]) -> None:
    report = json.loads((artifacts[arch] / "report.json").read_text())
    fp32 = report["parity"]["fp32"]
    assert fp32["logits_ok"]
    assert fp32["logit_max_rel_diff"] <= 1e-4 or fp32["float64"]["ours"] <= 2 * fp32["float64"]["torch_float32"]
    assert [g["beams"] for g in fp32["generate"]] == [1, 4]
    assert all(g["identical"] for g in fp32["generate"]), fp32["generate"]


@one_model
def test_verify_passes_on_an_intact_artifact(arch: str, artifacts: Mapping[str, Path]) -> None:
    result = run_cli("verify", str(artifacts[arch]))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["hashes"] == "ok"


@one_model
def test_flipping_one_byte_of_any_onnx_file_fails_verify_naming_it(arch: str, artifact_copy) -> None:
    root = artifact_copy(arch)
    for path in sorted(root.rglob("*.onnx")):
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
        result = run_cli("verify", str(root))
        rel = path.relative_to(root).as_posix()
        assert result.returncode != 0
        assert rel in result.stderr, result.stderr
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
    assert run_cli("verify", str(root)).returncode == 0


@one_model
def test_missing_and_unlisted_files_are_named(arch: str, artifact_copy) -> None:
    root = artifact_copy(arch)
    (root / "int8" / "weights.bin").unlink()
    (root / "stray.txt").write_text("not part of the artifact")
    result = run_cli("verify", str(root))
    assert result.returncode != 0
    assert "int8/weights.bin: missing" in result.stderr
    assert "stray.txt: not listed" in result.stderr


@every_int8
def test_int8_decoder_that_the_worker_loads_is_quantized(arch: str, precision: str, artifacts) -> None:
    manifest = json.loads((artifacts[arch] / "manifest.json").read_text())
    decoder = onnx.load(str(artifacts[arch] / manifest["precisions"][precision]["graphs"]["decoder"]))
    counts = op_counts(decoder)
    quantized = manifest["precisions"][precision]["quantization"]["decoder"]["quantized_matmul"]
    assert counts.get("MatMulIntegerToFloat", 0) == quantized > 0
    assert "MatMulInteger" not in counts and "DynamicQuantizeLinear" not in counts
    layers = manifest["model"]["decoder_layers"]
    # What stays float is activation x activation: two MatMuls in cross-attention, four in self-attention
    # (the past, read from the slot cache, and the new tokens apart).
    assert counts.get("MatMul", 0) == 6 * layers


@every_model
def test_weights_are_stored_once(arch: str, artifacts: Mapping[str, Path], tiny_models: Mapping[str, Path]) -> None:
    from transformers import AutoModelForSeq2SeqLM

    model = AutoModelForSeq2SeqLM.from_pretrained(tiny_models[arch])
    unique = {p.data_ptr(): p.numel() * 4 for p in model.parameters()}
    manifest = json.loads((artifacts[arch] / "manifest.json").read_text())
    fp32 = manifest["precisions"]["fp32"]
    assert fp32["stored_bytes"] < fp32["referenced_bytes"]
    # At most the model's own parameters (+ position tables, alignment padding), never a second copy.
    table = model.config.vocab_size * model.config.d_model * 4
    assert fp32["stored_bytes"] < sum(unique.values()) + table // 2


@every_model
def test_the_token_table_is_stored_once_and_looked_up_by_the_worker(arch: str, artifacts, tiny_models) -> None:
    """No graph looks tokens up (INT8 looks up their scales only): both take the rows as ``token_rows``.
    The manifest's ``token_table`` is the model's embedding ``(vocab, d_model)`` (fp32: exactly), and the
    tied LM head reads those very bytes."""
    from transformers import AutoModelForSeq2SeqLM

    embedding = AutoModelForSeq2SeqLM.from_pretrained(tiny_models[arch]).get_input_embeddings().weight.detach()
    root = artifacts[arch]
    for name, precision in json.loads((root / "manifest.json").read_text())["precisions"].items():
        table = precision["token_table"]
        assert table["shape"] == list(embedding.shape), name
        for graph in ("encoder", "decoder"):
            model = onnx.load(str(root / precision["graphs"][graph]), load_external_data=False).graph
            assert "token_rows" in [i.name for i in model.input], (name, graph)
            tables = [n.input[0] for n in model.node if n.op_type == "Gather" and n.input[0].startswith("arch.tokens")]
            assert all(t.endswith("_scale") for t in tables), (name, graph, tables)
        decoder = onnx.load(str(root / precision["graphs"]["decoder"]), load_external_data=False).graph
        head = [t for t in decoder.initializer if t.name.startswith("arch.tokens.table")]
        offsets = [e.value for t in head for e in t.external_data if e.key == "offset" and t.name.endswith("_rows")]
        assert offsets == [str(table["offset"])], (name, [t.name for t in head])
        if name == "fp32":
            stored = np.fromfile(root / precision["weights"], np.float32, embedding.numel(), offset=table["offset"])
            assert np.array_equal(stored.reshape(embedding.shape), embedding.numpy())


@every_model
def test_manifest_records_what_the_worker_needs(arch: str, artifacts: Mapping[str, Path], tiny_models) -> None:
    manifest = json.loads((artifacts[arch] / "manifest.json").read_text())
    config = json.loads((tiny_models[arch] / "config.json").read_text())
    special = manifest["special_tokens"]
    assert special["decoder_start_token_id"] == config["decoder_start_token_id"]
    assert special["eos_token_id"] == config["eos_token_id"]
    assert special["pad_token_id"] == config["pad_token_id"]
    assert manifest["source"]["content_sha256"]
    assert manifest["opset"] and manifest["versions"]["onnxruntime"]
    for precision in manifest["precisions"].values():
        assert {"cache_index", "cache.0.key"} <= set(precision["io"]["decoder"]["inputs"])
        assert "new.0.key" in precision["io"]["decoder"]["outputs"]
    assert all(len(entry["sha256"]) == 64 for entry in manifest["files"].values())


@every_model
def test_weights_both_graphs_read_are_listed_where_they_lie(arch: str, artifacts: Mapping[str, Path]) -> None:
    """``shared_weights`` say where each graph's tensors of those names lie in ``weights.bin`` (the worker
    maps them once for both sessions)."""
    root = artifacts[arch]
    for name, precision in json.loads((root / "manifest.json").read_text())["precisions"].items():
        assert precision["shared_weights"] or not name.startswith("int8"), name  # INT8: the token scales
        paths = precision["graphs"].items()
        graphs = {name: onnx.load(str(root / path), load_external_data=False) for name, path in paths}
        for entry in precision["shared_weights"]:
            listed = (entry["offset"], entry["length"], entry["shape"], entry["dtype"])
            for graph, names in entry["names"].items():
                tensors = {t.name: t for t in graphs[graph].graph.initializer}
                for tensor in (tensors[name] for name in names):
                    where = {e.key: e.value for e in tensor.external_data}
                    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).name
                    assert (int(where["offset"]), int(where["length"]), list(tensor.dims), dtype) == listed, graph


class FetchingLogits:
    """A decoder session that also fetches ``logits`` on every run, recording their shape."""

    def __init__(self, session: Any) -> None:
        self.session, self.shapes = session, []

    def run(self, names: list[str], feeds: dict[str, Any]) -> list[Any]:
        out = self.session.run([*names, "logits"], feeds)
        self.shapes.append(out[-1].shape)
        return out[:-1]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)


@one_model  # the cut is the shared decoder graph's; INT8 is the precision the most passes rewrite
def test_the_decoder_makes_full_logits_only_for_the_rows_asked(arch: str, artifacts: Mapping[str, Path]) -> None:
    """The search's top-k steps leave the (rows, vocab) logits out of the outputs (ONNX Runtime would
    hold them to the end of the step); a full-vocabulary step gets every row's."""
    translator = Translator(artifacts[arch], precision="int8", io_binding=False)
    with translator.pool.acquire() as inference:
        decoder = inference.decoder = FetchingLogits(inference.decoder)
        state = inference.encode(*pad_batch([translator.tokenizer.encode(s) for s in ("Hello.", "A cat sat.")], 0))
        tokens = np.full((2, 1), translator.vocab.decoder_start)
        inference.step(tokens, state, inference.empty_past(2), top_k=4)
        full = inference.step(tokens, state, inference.empty_past(2))
    vocab = full.values.shape[1]
    assert decoder.shapes == [(0, vocab), (2, vocab)]


@one_model
def test_existing_output_is_refused_without_force(arch: str, artifacts: Mapping[str, Path], tiny_models) -> None:
    result = run_cli("build", str(tiny_models[arch]), "--out", str(artifacts[arch]), "--skip-parity")
    assert result.returncode == 1
    assert "already exists" in result.stderr and "--force" in result.stderr


@one_model
def test_a_failed_build_leaves_nothing_behind(arch: str, tiny_models, tmp_path: Path) -> None:
    def refuse(source, root):
        raise VerificationError("refused on purpose")

    with pytest.raises(VerificationError):
        build(str(tiny_models[arch]), tmp_path / "out", ["fp32"], verify=refuse)
    assert list(tmp_path.iterdir()) == []


@every_model
def test_every_precision_stays_finite_on_the_check_set(arch: str, artifacts: Mapping[str, Path]) -> None:
    report = json.loads((artifacts[arch] / "report.json").read_text())
    assert report["finite_outputs"] and all(report["finite_outputs"].values())


# What the real models have, as the manifest must record it (ids from the hub files and transformers' tests).
REAL_TOKENS = {
    "opus-mt-en-zh": {"kind": "sentencepiece", "codes": {"cmn_Hans": 5, "cmn_Hant": 21}, "special": [0, 1, 65000]},
    "opus-mt-tc-big-en-zle": {"kind": "sentencepiece", "codes": {"rus": 3}, "special": [1, 25539, 61576]},
    "t5-small": {"kind": "tokenizers", "codes": {}, "special": [0, 1, 2, 32000, 32099]},
    "m2m100_418M": {"kind": "sentencepiece", "codes": {"en": 128022, "fr": 128028, "zh": 128102}, "special": [0, 3]},
    "nllb-200-distilled-600M": {
        "kind": "tokenizers",
        "codes": {"eng_Latn": 256047, "fra_Latn": 256057, "zho_Hans": 256200},
        "special": [0, 3, 256203],
    },
    "mbart-large-50-many-to-many-mmt": {
        "kind": "tokenizers",
        "codes": {"en_XX": 250004, "fr_XX": 250008, "zh_CN": 250025},
        "special": [0, 3, 250053],
    },
}


@every_model
def test_the_manifest_records_the_tokenizer_as_the_real_model_has_it(arch: str, artifacts: Mapping[str, Path]) -> None:
    tokenizer = json.loads((artifacts[arch] / "manifest.json").read_text())["tokenizer"]
    real = REAL_TOKENS[arch]
    assert tokenizer["kind"] == real["kind"]
    codes = (tokenizer["languages"] or {}).get("codes", {})
    assert {c: codes.get(c) for c in real["codes"]} == real["codes"]
    assert set(real["special"]) <= set(tokenizer["special_ids"])


def test_framing_is_read_from_each_tokenizer(artifacts: Mapping[str, Path]) -> None:
    read = lambda arch: json.loads((artifacts[arch] / "manifest.json").read_text())["tokenizer"]
    nllb, m2m, mbart = read("nllb-200-distilled-600M"), read("m2m100_418M"), read("mbart-large-50-many-to-many-mmt")
    for many in (nllb, m2m, mbart):  # source-language token first, EOS last (NLLB since legacy_behaviour=False)
        assert many["source_prefix"] == ["source_language"] and many["source_suffix"] == [2]
        assert many["languages"]["target"] == "forced_bos"
    assert (nllb["languages"]["default_source"], m2m["languages"]["default_source"]) == ("eng_Latn", "en")
    assert read("opus-mt-tc-big-en-zle")["source_suffix"] == [25539]  # tc-big: EOS is not 0
    t5 = read("t5-small")
    assert {(t["source"], t["target"]): t["prefix"] for t in t5["tasks"]}[
        ("en", "de")
    ] == "translate English to German: "
    assert t5["source_suffix"] == [1] and t5["languages"] is None
