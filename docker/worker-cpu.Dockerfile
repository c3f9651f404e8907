# Worker, CPU: onnxruntime (INT8 artifacts), no torch. Build from the repository root:
#   docker build -f docker/worker-cpu.Dockerfile -t fanyi-worker-cpu .
FROM python:3.11.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY worker worker
COPY jobs jobs
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11.11-slim-bookworm
COPY --from=build /install /usr/local
RUN useradd --create-home --uid 10001 fanyi
USER fanyi
WORKDIR /home/fanyi
ENV FANYI_DEVICE=cpu \
    FANYI_THREADS=1 \
    PYTHONUNBUFFERED=1
# One process per core, one ONNX Runtime thread each (docs/operations.md: sizing).
CMD ["celery", "-A", "worker.app", "worker", "-Q", "translate.cpu", "--loglevel", "INFO"]
