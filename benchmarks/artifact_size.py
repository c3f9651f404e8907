"""Artifact size for a random model with the opus-mt-en-zh shape.

    python -m benchmarks.artifact_size

d_model 512, 6+6 layers, 8 heads, ffn 2048, vocab 65001, shared embeddings (the shape of
Helsinki-NLP/opus-mt-en-zh), random weights: the model of ``benchmarks.engine``. Prints the bytes each
precision stores against the parameters the model really has; optimum's exporter writes 890 MiB
of fp32 files for this shape (encoder 200 + decoder 351 + decoder-with-past 339 MiB).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

OPTIMUM_FP32_MIB = 890


def main() -> None:
    from transformers import MarianMTModel

    from benchmarks.engine import opus_shape_model
    from export_tools.build import build

    with tempfile.TemporaryDirectory() as tmp:
        src = opus_shape_model(Path(tmp) / "model")
        model = MarianMTModel.from_pretrained(src)
        params = sum(p.numel() for p in {p.data_ptr(): p for p in model.parameters()}.values())
        manifest = build(str(src), Path(tmp) / "artifact", ["fp32", "int8"])
        mib = 1 << 20
        rows = {
            "parameters": params,
            "parameter_mib_fp32": round(params * 4 / mib, 1),
            **{f"{p}_stored_mib": round(manifest["precisions"][p]["stored_bytes"] / mib, 1) for p in ("fp32", "int8")},
            **{
                f"{p}_graphs_referenced_mib": round(manifest["precisions"][p]["referenced_bytes"] / mib, 1)
                for p in ("fp32", "int8")
            },
        }
        total_int8 = sum(e["size"] for k, e in manifest["files"].items() if k.startswith("int8/")) / mib
        rows["int8_files_mib"] = round(total_int8, 1)
        rows["int8_vs_optimum_fp32"] = round(total_int8 / OPTIMUM_FP32_MIB, 3)
        rows["int8_quantization"] = manifest["precisions"]["int8"]["quantization"]
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
