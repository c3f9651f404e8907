"""Prepare (CPU, with torch) and run (GPU, worker only) the CUDA checks of ``scripts/gpu_check.sh``.

``prepare`` writes tiny fp32+fp16 artifacts of every architecture and the demo artifact under
``--out``, with ``expected.json``: the CPU fp32 greedy and beam-4 outputs of each. ``run`` loads the
artifacts on CUDA (IO binding, KV cache on the device) and reports: fp32 token agreement with the
CPU (must be identical), fp16 agreement and finiteness, and demo fp16 throughput on the GPU.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

SENTENCES = 7
# Real-like models with the smaller vocabularies: with the demo, what is carried to the GPU machine stays
# under the 64 MiB it takes (NLLB's and mBART's 250k-entry tables alone would not).
MODELS = ("opus-mt-en-zh", "t5-small")


def prepare(out: Path) -> None:
    from export_tools.build import build
    from export_tools.cli import DEMO_CHECKPOINT
    from export_tools.fixtures.like import build_like

    out.mkdir(parents=True, exist_ok=True)
    for name in MODELS:
        src = build_like(name, out / "src" / name, force=True)
        build(str(src), out / name, ["fp32", "fp16"], force=True)
    build(str(DEMO_CHECKPOINT), out / "demo", ["fp32", "fp16"], force=True)
    expected = {}
    for name in (*MODELS, "demo"):
        expected[name] = {str(beams): outputs(out / name, "cpu", "fp32", beams) for beams in (1, 4)}
    (out / "expected.json").write_text(json.dumps(expected))
    shutil.rmtree(out / "src")  # the torch models stay here: the GPU machine needs only the artifacts


def outputs(artifact: Path, device: str, precision: str, beams: int) -> list[list[int]]:
    import random

    from export_tools.fixtures.demo_corpus import paragraph
    from export_tools.fixtures.names import LANGUAGES
    from worker.engine.translator import Translator

    rng = random.Random(11)
    texts = [paragraph(rng, 1 + i % 4).en for i in range(SENTENCES)]
    translator = Translator(artifact, device=device, precision=precision, threads=2)
    source, target = LANGUAGES.get(artifact.name, (None, None))
    options = translator.options(beam_size=beams, max_new_tokens=32, source_language=source, target_language=target)
    return [t.tokens for t in translator.translate_batch(texts, options)]


def run(out: Path) -> int:
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        print("no CUDAExecutionProvider in this onnxruntime: nothing to check on the GPU")
        return 1
    expected = json.loads((out / "expected.json").read_text())
    failures = 0
    for name, by_beam in expected.items():
        for beams, want in by_beam.items():
            got = outputs(out / name, "cuda", "fp32", int(beams))
            half = outputs(out / name, "cuda", "fp16", int(beams))
            same = sum(a == b for a, b in zip(got, want))
            close = sum(a == b for a, b in zip(half, want))
            print(f"{name} beam {beams}: cuda fp32 identical {same}/{len(want)}, fp16 identical {close}/{len(want)}")
            failures += same != len(want)
    print(json.dumps(throughput(out / "demo")))
    return 1 if failures else 0


def throughput(artifact: Path) -> dict[str, float]:
    from export_tools.fixtures.demo_corpus import pairs
    from worker.engine.translator import Translator

    texts = [p.en for p in pairs(5, 512)]
    translator = Translator(artifact, device="cuda", precision="fp16", max_tokens=32768)
    translator.translate_batch(texts[:8])
    started = time.perf_counter()
    results = translator.translate_batch(texts, translator.options(beam_size=4))
    elapsed = time.perf_counter() - started
    return {
        "demo_fp16_sentences_per_s": len(texts) / elapsed,
        "target_tokens_per_s": sum(len(r.tokens) for r in results) / elapsed,
    }


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m scripts.gpu_check", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("command", choices=["prepare", "run"])
    p.add_argument("--out", default="build/gpu-check")
    args = p.parse_args()
    if args.command == "prepare":
        prepare(Path(args.out))
    else:
        sys.exit(run(Path(args.out)))


if __name__ == "__main__":
    main()
