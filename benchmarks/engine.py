"""Engine benchmark: ours against PyTorch, optimum ORT and CTranslate2 on the opus-mt-en-zh shape.

    python -m benchmarks.engine                 # all engines, 3 rounds, writes the table into BENCHMARKS.md
    python -m benchmarks.engine --engines ours-int8 ctranslate2-int8 --rounds 5 --no-write

Workload: a random Marian model with the opus-mt-en-zh shape (d_model 512, 6+6 layers, 8 heads,
ffn 2048, vocab 65001), 64 source sentences of 10-40 token ids, beam 4, exactly 32 new tokens per
output (EOS is banned until then, so every engine does the same work), 2 threads (``--threads``;
``--processes N`` runs N processes of each engine at once and adds their throughputs). Each engine
runs in its own process; the headline rows give every engine the same batches of 16 sentences.
Latency: one 15-word (20-token) sentence, beam 4, 32 new tokens, p50/p95 over repeated runs.
Peak memory is the engine process's own ``VmHWM`` (``ru_maxrss`` would carry its parent's high-water
mark through fork+exec). Rounds: every engine runs once per round, in reverse order on odd rounds;
the table gives medians and ranges over rounds, and each row's ratio to the CTranslate2 run of the
same precision and batching in the same round (paired), as the median of the per-round ratios.
Natural stop (the ``-natural`` rows): the trained demo model (Marian, d_model 192, 3+3 layers, its
real EOS), 256 two-sentence demo-domain documents, beam 4, 64 documents per call, 2 threads; ours
through the document layer (segmenting, windows, stitching, the degeneration guard), CTranslate2 on
each document's text as one input. Their throughput is documents/s.
Models and artifacts are cached under ``build/bench`` (delete it to rebuild).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

CACHE = Path("build/bench")
SENTENCES, BATCH, BEAMS, NEW_TOKENS, THREADS = 64, 16, 4, 32, 2
PROCESSES = 1  # processes of each engine run at once (``--processes``): a layout of processes x threads
BARRIER = "FANYI_BENCH_BARRIER"  # folder:count, how run_one's processes start their timed runs together
LATENCY_RUNS = 7
ENGINES = (
    "pytorch",
    "optimum-fp32",
    "optimum-int8",
    "ctranslate2-float32",
    "ctranslate2-int8",
    "ours-fp32",
    "ours-int8",
    "ours-int8-static",
)
# Each engine at its best batching: all 64 sentences handed over at once.
BEST = ("ctranslate2-int8-tokens", "ours-int8-budget", "ours-int8-static-budget")
NATURAL = ("ctranslate2-int8-natural", "ours-int8-natural", "ours-int8-static-natural")
VOCAB = 65001
DOCUMENTS, CHUNK = 256, 64
OURS = ["fp32", "int8", "int8-static"]  # the precisions of our artifacts (int8-static calibrated on demo text)


def demo_documents() -> list[tuple[str, str]]:
    """The natural-stop workload: two demo-domain sentences per document."""
    from export_tools.fixtures import demo_corpus

    rng = random.Random(0)
    return [(f"doc-{n}", demo_corpus.paragraph(rng, 2).en) for n in range(DOCUMENTS)]


def workload(seed: int = 0) -> tuple[list[list[int]], list[int]]:
    """64 sources of 10-40 ids (EOS-terminated) and one 20-token latency sentence."""
    rng = np.random.default_rng(seed)
    make = lambda n: [int(t) for t in rng.integers(100, VOCAB - 1, n - 1)] + [0]
    return [make(int(rng.integers(10, 41))) for _ in range(SENTENCES)], make(20)


def batches(sources: list[list[int]]) -> list[list[list[int]]]:
    return [sources[i : i + BATCH] for i in range(0, len(sources), BATCH)]


# ------------------------------------------------------------------------------------------------
# Preparation (torch side, cached)


def prepare() -> None:
    """The random model as a save_pretrained dir with a 65001-entry vocabulary, and its conversions; the
    demo model's artifact and CTranslate2 conversion (natural-stop rows)."""
    from export_tools.build import build
    from export_tools.cli import DEMO_CHECKPOINT
    from export_tools.fixtures.demo_corpus import calibration_set

    model_dir = CACHE / "model"
    if not (model_dir / "model.safetensors").exists():
        opus_shape_model(model_dir)
    if not (CACHE / "ours" / "int8-static").exists():
        build(str(model_dir), CACHE / "ours", OURS, force=True, calibration_set=calibration_set())
    if not (CACHE / "demo" / "int8-static").exists():
        build(str(DEMO_CHECKPOINT), CACHE / "demo", OURS, force=True, calibration_set=calibration_set())
    if not (CACHE / "ct2-demo-int8" / "model.bin").exists():
        import ctranslate2.converters

        converter = ctranslate2.converters.TransformersConverter(str(DEMO_CHECKPOINT))
        converter.convert(str(CACHE / "ct2-demo-int8"), quantization="int8", force=True)
    if not (CACHE / "ct2-float32" / "model.bin").exists():
        import ctranslate2.converters

        converter = ctranslate2.converters.TransformersConverter(str(model_dir))
        converter.convert(str(CACHE / "ct2-float32"), force=True)
        converter.convert(str(CACHE / "ct2-int8"), quantization="int8", force=True)
    if not (CACHE / "optimum-fp32" / "config.json").exists():
        _optimum_export(model_dir)


def opus_shape_model(model_dir: Path) -> Path:
    """opus-mt-en-zh at its real size (d_model 512, 6+6 layers, 8 heads, ffn 2048, 65001 ids), its
    tokenizer and generation config from the real-like fixture, Hugging Face's own init (seed 0)."""
    import shutil

    import torch
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    from export_tools.fixtures.like import build_like

    like = build_like("opus-mt-en-zh", model_dir.parent / f"{model_dir.name}-like", force=True)
    model_dir.mkdir(parents=True, exist_ok=True)
    for name in ("source.spm", "target.spm", "vocab.json", "tokenizer_config.json"):
        shutil.copy(like / name, model_dir / name)
    config = MarianConfig.from_pretrained(like)
    config.update(dict(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                       decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048))  # fmt: skip
    torch.manual_seed(0)
    model = MarianMTModel(config)
    model.generation_config = GenerationConfig.from_pretrained(like)
    model.save_pretrained(model_dir)
    shutil.rmtree(like)
    return model_dir


def _optimum_export(model_dir: Path) -> None:
    from optimum.onnxruntime import ORTModelForSeq2SeqLM, ORTQuantizer
    from optimum.onnxruntime.configuration import AutoQuantizationConfig

    ORTModelForSeq2SeqLM.from_pretrained(model_dir, export=True).save_pretrained(CACHE / "optimum-fp32")
    qconfig = AutoQuantizationConfig.avx2(is_static=False, per_channel=False)
    for name in ("encoder_model", "decoder_model", "decoder_with_past_model"):
        path = CACHE / "optimum-fp32" / f"{name}.onnx"
        if path.exists():
            ORTQuantizer.from_pretrained(CACHE / "optimum-fp32", file_name=path.name).quantize(
                save_dir=CACHE / "optimum-int8", quantization_config=qconfig
            )
    for extra in (CACHE / "optimum-fp32").glob("*.json"):
        (CACHE / "optimum-int8" / extra.name).write_bytes(extra.read_bytes())


# ------------------------------------------------------------------------------------------------
# Engines: each returns a function translating one batch of id lists (32 new tokens each)


def _torch_engine(model_cls: Callable, path: Path, **kwargs: Any) -> Callable[[list[list[int]]], None]:
    import torch

    torch.set_num_threads(THREADS)
    model = model_cls(path, **kwargs)
    pad = VOCAB - 1

    def run(batch: list[list[int]]) -> None:
        longest = max(map(len, batch))
        ids = torch.tensor([s + [pad] * (longest - len(s)) for s in batch])
        mask = (ids != pad).long()
        with torch.no_grad():
            model.generate(
                input_ids=ids,
                attention_mask=mask,
                num_beams=BEAMS,
                do_sample=False,
                min_new_tokens=NEW_TOKENS,
                max_new_tokens=NEW_TOKENS,
            )

    return run


def engine(name: str) -> Callable[[list[list[int]]], None]:
    if name == "pytorch":
        from transformers import MarianMTModel

        return _torch_engine(lambda p: MarianMTModel.from_pretrained(p).eval(), CACHE / "model")
    if name.startswith("optimum"):
        import onnxruntime as ort
        from optimum.onnxruntime import ORTModelForSeq2SeqLM

        options = ort.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        folder = CACHE / name
        suffix = "_quantized" if name.endswith("int8") else ""
        files = {f"{k}_file_name": f"{k}_model{suffix}.onnx" for k in ("encoder", "decoder", "decoder_with_past")}
        return _torch_engine(
            lambda p: ORTModelForSeq2SeqLM.from_pretrained(p, session_options=options, **files), folder
        )
    if name.startswith("ctranslate2"):
        import ctranslate2

        translator = ctranslate2.Translator(
            str(CACHE / name.replace("ctranslate2", "ct2").removesuffix("-tokens")),
            device="cpu",
            intra_threads=THREADS,
            inter_threads=1,
        )
        by_tokens = name.endswith("-tokens")
        vocab = json.loads((CACHE / "model" / "vocab.json").read_text())
        pieces = {i: p for p, i in vocab.items()}

        def run_ct2(batch: list[list[int]]) -> None:
            tokens = [[pieces[i] for i in s] for s in batch]
            translator.translate_batch(
                tokens,
                beam_size=BEAMS,
                max_batch_size=2048 if by_tokens else len(batch),
                batch_type="tokens" if by_tokens else "examples",
                min_decoding_length=NEW_TOKENS,
                max_decoding_length=NEW_TOKENS,
            )

        return run_ct2
    from worker.engine.translator import Translator

    precision = name.removeprefix("ours-").removesuffix("-budget")
    translator = Translator(CACHE / "ours", precision=precision, threads=THREADS)
    options = translator.options(beam_size=BEAMS, min_new_tokens=NEW_TOKENS, max_new_tokens=NEW_TOKENS)
    by_budget = name.endswith("-budget")

    def run_ours(batch: list[list[int]]) -> None:
        if by_budget:  # length-sorted batches under the token budget
            translator.search(batch, options)
        else:
            translator.generate_ids(batch, options)

    return run_ours


def natural_engine(name: str) -> Callable[[list[tuple[str, str]]], None]:
    """Translates one call's documents with the demo model, stopping at its EOS."""
    from worker.engine.translator import Translator

    precision = name.removeprefix("ours-").removesuffix("-natural") if name.startswith("ours") else "fp32"
    ours = Translator(CACHE / "demo", precision=precision, threads=THREADS)  # CTranslate2: its tokenizer only
    if name.startswith("ours"):
        from worker.documents.translator import DocumentTranslator

        documents, options = DocumentTranslator(ours), ours.options(beam_size=BEAMS)

        def run_ours(chunk: list[tuple[str, str]]) -> None:
            documents.translate(chunk, options)

        return run_ours
    import ctranslate2

    from export_tools.cli import DEMO_CHECKPOINT

    translator = ctranslate2.Translator(str(CACHE / "ct2-demo-int8"), device="cpu", intra_threads=THREADS)
    pieces = {i: p for p, i in json.loads((DEMO_CHECKPOINT / "vocab.json").read_text()).items()}
    eos = ours.vocab.eos

    def run_ct2(chunk: list[tuple[str, str]]) -> None:
        tokens = [[pieces[i] for i in ours.tokenizer.encode(text)] + [pieces[eos]] for _, text in chunk]
        translator.translate_batch(tokens, beam_size=BEAMS, max_batch_size=len(chunk))

    return run_ct2


def measure_natural(name: str) -> dict[str, float | str]:
    documents = demo_documents()
    run = natural_engine(name)
    run(documents[:CHUNK])  # warm-up
    start_together()
    started = time.perf_counter()
    for i in range(0, DOCUMENTS, CHUNK):
        run(documents[i : i + CHUNK])
    return {
        "engine": name,
        "documents_per_s": DOCUMENTS / (time.perf_counter() - started),
        "peak_rss_mib": peak_rss_mib(),
    }


def measure(name: str) -> dict[str, float | str]:
    if name in NATURAL:
        return measure_natural(name)
    sources, latency_sentence = workload()
    run = engine(name)
    run(batches(sources)[0][:2])  # warm-up: allocations, lazy session creation
    start_together()
    started = time.perf_counter()
    for batch in [sources] if name in BEST else batches(sources):
        run(batch)
    elapsed = time.perf_counter() - started
    latencies = []
    for _ in range(LATENCY_RUNS):
        t = time.perf_counter()
        run([latency_sentence])
        latencies.append(time.perf_counter() - t)
    latencies.sort()
    return {
        "engine": name,
        "sentences_per_s": SENTENCES / elapsed,
        "tokens_per_s": SENTENCES * NEW_TOKENS / elapsed,
        "peak_rss_mib": peak_rss_mib(),
        "latency_p50_ms": 1000 * statistics.median(latencies),
        "latency_p95_ms": 1000 * latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))],
    }


def peak_rss_mib() -> float:
    """This process's own high-water resident set (``VmHWM``), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status: this benchmark reads peak memory the Linux way")


# ------------------------------------------------------------------------------------------------
# Rounds and the table

Row = dict[str, Any]
RIVAL = {
    "ours-int8": "ctranslate2-int8",
    "ours-int8-static": "ctranslate2-int8",
    "ours-fp32": "ctranslate2-float32",
    "ours-int8-budget": "ctranslate2-int8-tokens",
    "ours-int8-static-budget": "ctranslate2-int8-tokens",
    "ours-int8-natural": "ctranslate2-int8-natural",
    "ours-int8-static-natural": "ctranslate2-int8-natural",
}


def rival(name: str) -> str:
    """The CTranslate2 run a row is paired with: same precision and batching (int8 for the others)."""
    return RIVAL.get(name, "ctranslate2-int8-natural" if name in NATURAL else "ctranslate2-int8")


def run_one(name: str) -> Row | None:
    """One engine in ``PROCESSES`` fresh processes at once (their throughputs added, the largest peak
    memory, the first one's latency); None (with its error shown) when one failed."""
    with tempfile.TemporaryDirectory() as barrier:
        command = [sys.executable, "-m", "benchmarks.engine", "--one", name, "--threads", str(THREADS)]
        env = {**os.environ, BARRIER: f"{barrier}:{PROCESSES}"}
        errors = [tempfile.TemporaryFile("w+") for _ in range(PROCESSES)]  # a full pipe would stall the barrier
        running = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=error, text=True, env=env)
                   for error in errors]  # fmt: skip
        rows: list[Row] = []
        for process, error in zip(running, errors):
            out, _ = process.communicate()
            if process.returncode != 0:
                error.seek(0)
                print(error.read()[-2000:], file=sys.stderr)
                return None
            rows.append(json.loads(out.strip().splitlines()[-1]))
    row = dict(rows[0])
    row[rate(name)] = sum(float(r[rate(name)]) for r in rows)
    row["peak_rss_mib"] = max(float(r["peak_rss_mib"]) for r in rows)
    return row


def start_together() -> None:
    """In a measured process: wait until every process of the engine's run is warm (``run_one``)."""
    folder, count = os.environ.get(BARRIER, ":1").rsplit(":", 1)
    if int(count) < 2:
        return
    Path(folder, str(os.getpid())).touch()
    deadline = time.monotonic() + 600
    while len(list(Path(folder).iterdir())) < int(count):
        if time.monotonic() > deadline:
            raise SystemExit("the other processes of this engine's run never got warm: see their errors")
        time.sleep(0.01)


def run_rounds(engines: list[str], rounds: int) -> list[dict[str, Row]]:
    out = []
    for number in range(rounds):
        order = engines if number % 2 == 0 else engines[::-1]
        found: dict[str, Row] = {}
        for name in order:
            print(f"[bench] round {number + 1}/{rounds}: {name}", file=sys.stderr, flush=True)
            row = run_one(name)
            if row is not None:
                found[name] = row
                unit = "documents/s" if name in NATURAL else "target tokens/s"
                print(f"[bench]   {row[rate(name)]:.0f} {unit}", file=sys.stderr, flush=True)
        out.append(found)
    return out


def _spread(values: list[float], digits: int = 0) -> str:
    """Median, and the range when there is more than one value."""
    fmt = lambda v: f"{v:.{digits}f}"
    middle = fmt(statistics.median(values))
    return middle if len(values) < 2 else f"{middle} ({fmt(min(values))}-{fmt(max(values))})"


KEYS = ("peak_rss_mib", "latency_p50_ms", "latency_p95_ms")


def rate(name: str) -> str:
    """What a row's throughput is counted in: documents for the natural-stop rows, target tokens otherwise."""
    return "documents_per_s" if name in NATURAL else "tokens_per_s"


def table(engines: list[str], rounds: list[dict[str, Row]]) -> str:
    lines = [
        "| engine | target tokens/s (-natural: documents/s) | paired ratio | to | peak RSS MiB | latency p50 ms "
        "| p95 ms |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    for name in engines:
        runs = [r[name] for r in rounds if name in r]
        if not runs:
            continue
        both = [r for r in rounds if {name, rival(name)} <= set(r)]
        paired = [r[name][rate(name)] / r[rival(name)][rate(name)] for r in both]
        ratio = _spread(paired, 2) if paired and name != rival(name) else ""
        cells = [_spread([run[rate(name)] for run in runs], 1 if name in NATURAL else 0)]
        cells += [_spread([run[key] for run in runs]) if key in runs[0] else "" for key in KEYS]
        lines.append(f"| {name} | {cells[0]} | {ratio} | {rival(name) if ratio else ''} | {' | '.join(cells[1:])} |")
    return "\n".join(lines)


def main() -> None:
    global THREADS, PROCESSES
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.engine", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    every = [*ENGINES, *BEST, *NATURAL]
    p.add_argument("--engines", nargs="+", default=every, choices=every)
    p.add_argument("--rounds", type=int, default=3, help="times every engine runs, alternating (default: 3)")
    p.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md alone")
    p.add_argument("--threads", type=int, default=THREADS, help=f"each engine's intra-op threads (default: {THREADS})")
    p.add_argument("--processes", type=int, default=PROCESSES,
                   help="processes of each engine at once, throughputs added (default: 1): --processes 2 "
                   "--threads 1 against --threads 2 compares layouts of two cores")  # fmt: skip
    p.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one engine in this process
    args = p.parse_args()
    if args.threads < 1 or args.processes < 1:
        p.error("--threads and --processes must be at least 1")
    THREADS, PROCESSES = args.threads, args.processes
    if args.one:
        print(json.dumps(measure(args.one)))
        return
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    print("[bench] preparing models (cached in build/bench)", file=sys.stderr, flush=True)
    prepare()
    rounds = run_rounds(args.engines, args.rounds)
    (CACHE / "rounds.json").write_text(json.dumps(rounds, indent=1))  # the raw runs, should the table be redone
    text = table(args.engines, rounds)
    text += f"\n\n{args.rounds} rounds; medians, with the range over rounds in brackets."
    print(text)
    if not args.no_write:
        _write(text)


def _write(text: str) -> None:
    path = Path("BENCHMARKS.md")
    start, end = "<!-- engine:start -->", "<!-- engine:end -->"
    body = path.read_text() if path.exists() else "# Benchmarks\n"
    block = (
        f"{start}\n`python -m benchmarks.engine` on {platform.processor() or platform.machine()}, "
        f"{PROCESSES} x {THREADS} threads, {time.strftime('%Y-%m-%d')}:\n\n{text}\n{end}"
    )
    if start in body:
        body = body[: body.index(start)] + block + body[body.index(end) + len(end) :]
    else:
        body += f"\n## Engine\n\n{block}\n"
    path.write_text(body)


if __name__ == "__main__":
    main()
