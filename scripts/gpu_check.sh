#!/usr/bin/env bash
# GPU check for the engine: CUDA parity and a small benchmark, in well under 5 minutes on one GPU.
#
# Prepare here (CPU machine):  python -m scripts.gpu_check prepare --out build/gpu-check
#   builds fp32/fp16 artifacts of two real-like models and the demo and records CPU fp32 reference outputs.
# Run there (GPU machine):     bash scripts/gpu_check.sh build/gpu-check
#   with build/gpu-check carried along; needs onnxruntime with the CUDA provider, numpy, sentencepiece, tokenizers.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/gpu-check}
python3 -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
PYTHONUNBUFFERED=1 timeout 280 python3 -m scripts.gpu_check run --out "$dir"
