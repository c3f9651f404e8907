# Worker, GPU: onnxruntime-gpu on a CUDA 12 / cuDNN 9 runtime (FP16 artifacts). One process per GPU.
#   docker build -f docker/worker-gpu.Dockerfile -t fanyi-worker-gpu .
FROM nvidia/cuda:12.6.3-cudnn-runtime-ubuntu22.04 AS base
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3.11 python3.11-venv \
 && rm -rf /var/lib/apt/lists/* \
 && python3.11 -m venv /opt/fanyi
ENV PATH=/opt/fanyi/bin:$PATH

FROM base AS build
WORKDIR /src
# Dependencies first, in a layer that depends on pyproject.toml alone: editing the sources reuses it.
# The gpu extra's onnxruntime-gpu replaces onnxruntime (both install the same onnxruntime module).
COPY pyproject.toml ./
RUN python -c "import re, tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; deps = [d for d in p['dependencies'] if re.split('[^A-Za-z0-9._-]', d)[0] != 'onnxruntime']; print(*deps, *p['optional-dependencies']['gpu'], sep=chr(10))" > requirements.txt \
 && pip install --no-cache-dir -r requirements.txt
COPY README.md ./
COPY worker worker
COPY contract contract
RUN pip install --no-cache-dir --no-deps .

FROM base
COPY --from=build /opt/fanyi /opt/fanyi
# /artifacts owned by fanyi: the first mount of an empty named volume takes this ownership (docker/compose.yaml
# mounts it read-only here; the worker only reads artifacts and writes under /tmp).
RUN useradd --create-home --uid 10001 fanyi \
 && install -d -o fanyi -g fanyi /artifacts
USER fanyi
WORKDIR /home/fanyi
# One process per GPU: FANYI_CONCURRENCY=1 sets Celery's worker_concurrency (contract.settings.worker_processes).
ENV FANYI_DEVICE=cuda \
    FANYI_THREADS=1 \
    FANYI_CONCURRENCY=1 \
    PROMETHEUS_MULTIPROC_DIR=/tmp/prometheus \
    PYTHONUNBUFFERED=1
# Healthy unless the worker recorded an environment fault in FANYI_HEALTH_FILE (worker/monitoring/health.py).
HEALTHCHECK --interval=30s --timeout=10s --start-period=2m --retries=3 CMD ["python", "-m", "worker.health"]
CMD ["celery", "-A", "worker.app", "worker", "-Q", "translate.gpu", "--loglevel", "INFO"]
