"""``verify``: hashes, parity with the source PyTorch model, and the quality gate.

Parity (needs the source model): for every precision, decoder logits along the reference
model's own greedy path on a mixed-length batch must sit within that precision's tolerance;
fp32 greedy and beam search must be token-identical to ``model.generate``. Quality: every
precision is scored (BLEU, chrF) on a dev set and INT8/FP16 may trail fp32 by at most
``max_bleu_drop`` BLEU. Everything lands in ``report.json``.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from export_tools.architectures import ExportError
from export_tools.fixtures import demo_corpus
from worker.engine.artifact import REPORT, Artifact, file_problems
from worker.engine.inference import pad_batch
from worker.engine.translator import Translator

# Largest |ours - torch| over logits, relative to the largest |torch logit|.
# INT8 quantizes activations too: on random test weights its logits move a lot, so its real
# judge is the BLEU gate; the bound here only catches a broken graph.
LOGIT_TOLERANCE = {"fp32": 1e-4, "fp16": 1e-1, "int8": 1.0, "int8-static": 1.0}
PARITY_BEAMS = (1, 4)
PARITY_MAX_NEW = 48  # tokens per sentence in the generate check: enough for every rule of the search to act


class VerificationError(ExportError):
    """The artifact failed a check; the report says which and by how much."""


def sample_sentences(count: int = 7, seed: int = 11) -> list[str]:
    """A mixed-length check batch: single sentences to four-sentence paragraphs."""
    rng = random.Random(seed)
    return [demo_corpus.paragraph(rng, 1 + i % 4).en for i in range(count)]


def check_hashes(root: Path) -> None:
    artifact = Artifact.load(root, verify=False)  # refuses an artifact_id that is not its content's
    problems = file_problems(root, artifact.manifest["files"])
    if problems:
        raise VerificationError("hash check failed: " + "; ".join(problems))


def _reference_path(model: Any, ids: Any, mask: Any, max_new_tokens: int) -> Any:
    import torch

    with torch.no_grad():
        return model.generate(
            input_ids=ids, attention_mask=mask, num_beams=1, do_sample=False, max_new_tokens=max_new_tokens
        )


def _relative(ours: np.ndarray, reference: np.ndarray) -> float:
    """Largest |difference| per step, relative to that step's largest |reference logit|; the worst step."""
    return float((np.abs(ours - reference).max(axis=(0, 2)) / np.abs(reference).max(axis=(0, 2))).max())


def _torch_logits(model: Any, ids: Any, mask: Any, path: Any) -> np.ndarray:
    import torch

    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=path).logits
    return out.double().numpy()


def _our_logits(translator: Translator, ids: np.ndarray, mask: np.ndarray, path: np.ndarray) -> np.ndarray | None:
    """Our decoder's logits ``(rows, steps, V)`` teacher-forced along ``path``; None if anything is NaN/inf."""
    with translator.pool.acquire() as inference:
        state = inference.encode(ids, mask)
        past = inference.empty_past(len(ids))
        steps = []
        for t in range(path.shape[1]):
            out = inference.step(path[:, t : t + 1], state, past)
            past = out.present
            if not all(np.isfinite(x).all() for x in (out.values, *past.buffers)):
                return None  # an fp16 overflow the kept-fp32 ops did not prevent
            steps.append(out.values.astype(np.float64))
    return np.stack(steps, axis=1)


def logit_parity(source: Any, translator: Translator, sources: list[list[int]], steps: int = 8) -> dict[str, Any]:
    """Relative max logit difference along torch's greedy path (teacher-forced through our decoder).

    A model whose float32 arithmetic is itself that far from exact (random weights can be badly
    conditioned) is judged against float64: ours may then be off by at most twice what torch's
    own float32 is."""
    import copy

    import torch

    ids, mask = (torch.from_numpy(a) for a in pad_batch(sources, translator.pad_id))
    path = _reference_path(source.model, ids, mask, steps)
    reference = _torch_logits(source.model, ids, mask, path)
    ours = _our_logits(translator, ids.numpy(), mask.numpy(), path.numpy())
    tolerance = LOGIT_TOLERANCE[translator.precision]
    if ours is None:
        return {"logit_max_rel_diff": float("inf"), "tolerance": tolerance, "logits_ok": False}
    entry: dict[str, Any] = {"logit_max_rel_diff": _relative(ours, reference), "tolerance": tolerance}
    entry["logits_ok"] = entry["logit_max_rel_diff"] <= tolerance
    if not entry["logits_ok"] and translator.precision == "fp32":
        exact = _torch_logits(copy.deepcopy(source.model).double(), ids, mask, path)
        entry["float64"] = {"ours": _relative(ours, exact), "torch_float32": _relative(reference, exact)}
        entry["logits_ok"] = entry["float64"]["ours"] <= 2 * entry["float64"]["torch_float32"]
    return entry


def generation_parity(source: Any, translator: Translator, sources: list[list[int]], beams: int) -> dict[str, Any]:
    """Token-identical check of our search against ``model.generate`` for one beam size."""
    import torch

    options = translator.options(beam_size=beams, num_hypotheses=1)
    limit = min(options.max_new_tokens, PARITY_MAX_NEW)
    options = replace(options, max_new_tokens=limit, min_new_tokens=min(options.min_new_tokens, limit))
    ours = [r.hypotheses[0].tokens for r in translator.generate_ids(sources, options)]
    eos = translator.vocab.eos
    ids, mask = (torch.from_numpy(a) for a in pad_batch(sources, translator.pad_id))
    with torch.no_grad():
        out = source.model.generate(
            input_ids=ids,
            attention_mask=mask,
            num_beams=beams,
            do_sample=False,
            max_new_tokens=options.max_new_tokens,
            num_return_sequences=1,
        )
    theirs = []
    for row in out.tolist():
        tokens = row[1:]
        theirs.append(tokens[: tokens.index(eos) + 1] if eos in tokens else tokens)
    mismatches = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    return {"beams": beams, "sentences": len(sources), "identical": not mismatches, "mismatched_rows": mismatches}


def parity(source: Any, root: Path) -> dict[str, Any]:
    artifact = Artifact.load(root)
    tokenizer_sources = [source.tokenizer(s).input_ids for s in sample_sentences()]
    report: dict[str, Any] = {}
    for name in artifact.precisions:
        translator = Translator(artifact, precision=name, threads=1, io_binding=False)  # steps inspected as arrays
        entry = logit_parity(source, translator, tokenizer_sources)
        if name == "fp32":
            entry["generate"] = [generation_parity(source, translator, tokenizer_sources, b) for b in PARITY_BEAMS]
        report[name] = entry
    return report


# ------------------------------------------------------------------------------------------------
# Quality gate


@dataclass(frozen=True)
class DevExample:
    source: str
    reference: str | None


def read_dev_set(path: Path) -> list[DevExample]:
    """JSONL (``{"source": ..., "reference": ...}``) or TSV (source<TAB>reference, reference optional)."""
    if not path.exists():
        raise ExportError(f"dev set {path} not found")
    examples = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        if path.suffix in (".jsonl", ".json"):
            try:
                row = json.loads(line)
                examples.append(DevExample(str(row["source"]), row.get("reference")))
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ExportError(f'{path}:{number}: expected a JSON object with a "source" field') from None
        else:
            cells = line.split("\t")
            examples.append(DevExample(cells[0], cells[1] if len(cells) > 1 and cells[1] else None))
    if not examples:
        raise ExportError(f"dev set {path} is empty")
    return examples


def score(hypotheses: list[str], references: list[str]) -> dict[str, float]:
    import sacrebleu

    bleu = sacrebleu.corpus_bleu(hypotheses, [references], tokenize="zh")
    chrf = sacrebleu.corpus_chrf(hypotheses, [references])
    return {"bleu": round(bleu.score, 2), "chrf": round(chrf.score, 2)}


def quality(
    root: Path,
    dev: list[DevExample],
    max_bleu_drop: float,
    languages: dict[str, str | None] | None = None,
    batch_size: int = 32,
) -> dict[str, Any]:
    """Every precision scored on the dev set; ``languages`` (``source_language``, ``target_language``)
    for models that read or write several."""
    artifact = Artifact.load(root)
    sources = [d.source for d in dev]
    outputs: dict[str, list[str]] = {}
    for name in artifact.precisions:
        translator = Translator(artifact, precision=name, threads=2)
        options = translator.options(**(languages or {}))
        outputs[name] = [
            t.text
            for i in range(0, len(sources), batch_size)
            for t in translator.translate_batch(sources[i : i + batch_size], options)
        ]
    has_refs = all(d.reference is not None for d in dev)
    references = [str(d.reference) for d in dev] if has_refs else outputs["fp32"]
    report: dict[str, Any] = {
        "examples": len(dev),
        "against": "references" if has_refs else "fp32 outputs",
        "max_bleu_drop": max_bleu_drop,
        "scores": {},
    }
    for name, hyps in outputs.items():
        entry = score(hyps, references)
        if has_refs:
            entry["exact_match"] = round(sum(h == r for h, r in zip(hyps, references)) / len(dev), 4)
        report["scores"][name] = entry
    base = report["scores"]["fp32"]["bleu"]
    for name, entry in report["scores"].items():
        if name != "fp32":
            entry["bleu_drop"] = round(base - entry["bleu"], 2)
            entry["accepted"] = entry["bleu_drop"] <= max_bleu_drop
    return report


def finite_outputs(root: Path, steps: int = 16) -> dict[str, bool]:
    """Every precision's logits and caches stay finite along its own greedy path (the fp16 overflow check)."""
    artifact = Artifact.load(root)
    found = {}
    for name in artifact.precisions:
        translator = Translator(artifact, precision=name, threads=1, io_binding=False)
        ids, mask = pad_batch([translator.tokenizer.encode(s) for s in sample_sentences()], translator.pad_id)
        with translator.pool.acquire() as inference:
            state = inference.encode(ids, mask)
            past = inference.empty_past(len(ids))
            tokens = np.full((len(ids), 1), translator.vocab.decoder_start)
            ok = all(np.isfinite(c).all() for c in state.cross)
            for _ in range(steps):
                out = inference.step(tokens, state, past)
                logits, past = out.values, out.present
                ok = ok and bool(np.isfinite(logits).all()) and all(bool(np.isfinite(p).all()) for p in past.buffers)
                tokens = logits.argmax(axis=1)[:, None]
        found[name] = ok
    return found


def run(
    root: Path,
    source: Any = None,
    dev: list[DevExample] | None = None,
    max_bleu_drop: float = 0.5,
    languages: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    """All checks; writes ``report.json`` and raises ``VerificationError`` naming what failed."""
    check_hashes(root)
    report: dict[str, Any] = {"hashes": "ok", "finite_outputs": finite_outputs(root)}
    if source is not None:
        report["parity"] = parity(source, root)
    if dev is not None:
        report["quality"] = quality(root, dev, max_bleu_drop, languages)
    (root / REPORT).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    failures = _failures(report)
    if failures:
        raise VerificationError("; ".join(failures) + f" (details in {root / REPORT})")
    return report


def _failures(report: dict[str, Any]) -> list[str]:
    failures = [
        f"{name} outputs NaN or inf on the check set" for name, ok in report["finite_outputs"].items() if not ok
    ]
    for name, entry in report.get("parity", {}).items():
        if not entry["logits_ok"]:
            failures.append(
                f"{name} logits differ from torch by {entry['logit_max_rel_diff']:.2e} "
                f"(tolerance {entry['tolerance']:.0e}"
                + (
                    f"; from float64 by {entry['float64']['ours']:.2e}, torch float32 by "
                    f"{entry['float64']['torch_float32']:.2e})"
                    if "float64" in entry
                    else ")"
                )
            )
        for g in entry.get("generate", []):
            if not g["identical"]:
                failures.append(f"{name} beam {g['beams']} differs from generate in rows {g['mismatched_rows']}")
    for name, entry in report.get("quality", {}).get("scores", {}).items():
        if entry.get("accepted") is False:
            failures.append(
                f"{name} BLEU is {entry['bleu_drop']} below fp32 (allowed {report['quality']['max_bleu_drop']})"
            )
    return failures
