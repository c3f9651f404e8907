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
COPY pyproject.toml README.md ./
COPY worker worker
COPY jobs jobs
RUN pip install --no-cache-dir '.[gpu]' && pip uninstall -y onnxruntime && pip install --no-cache-dir --force-reinstall --no-deps 'onnxruntime-gpu>=1.20'

FROM base
COPY --from=build /opt/fanyi /opt/fanyi
RUN useradd --create-home --uid 10001 fanyi
USER fanyi
WORKDIR /home/fanyi
ENV FANYI_DEVICE=cuda \
    FANYI_THREADS=1 \
    PYTHONUNBUFFERED=1
CMD ["celery", "-A", "worker.app", "worker", "-Q", "translate.gpu", "--concurrency", "1", "--loglevel", "INFO"]
