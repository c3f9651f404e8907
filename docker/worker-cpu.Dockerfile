# CPU images: onnxruntime (INT8 artifacts), no torch. Build from the repository root:
#   docker build -f docker/worker-cpu.Dockerfile -t fanyi-worker-cpu .                    the worker: worker/ + contract/
#   docker build -f docker/worker-cpu.Dockerfile --target producer -t fanyi-producer .   + jobs/: submit, status, beat,
#                                                                                          the jobs API (jobs serve)
# The worker never imports jobs/ (the producer side), so its image does not carry it.
FROM python:3.11.11-slim-bookworm AS build
WORKDIR /src
# Dependencies first, in a layer that depends on pyproject.toml alone: editing the sources reuses it.
COPY pyproject.toml ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print(*p['dependencies'], sep=chr(10))" > requirements.txt \
 && pip install --no-cache-dir --prefix=/install -r requirements.txt
COPY README.md ./
COPY worker worker
COPY contract contract
RUN pip install --no-cache-dir --prefix=/install --no-deps .

FROM build AS build-producer
# The jobs API server's own dependencies (pyproject's `server` extra: `python -m jobs serve`), before its sources.
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print(*p['optional-dependencies']['server'], sep=chr(10))" > requirements.txt \
 && pip install --no-cache-dir --prefix=/install -r requirements.txt
COPY jobs jobs
RUN pip install --no-cache-dir --prefix=/install --no-deps .

FROM python:3.11.11-slim-bookworm AS runtime
# /artifacts owned by fanyi: the first mount of an empty named volume takes this ownership (docker/compose.yaml
# mounts it read-only; both images only read artifacts and write under /tmp).
RUN useradd --create-home --uid 10001 fanyi \
 && install -d -o fanyi -g fanyi /artifacts
USER fanyi
WORKDIR /home/fanyi
ENV FANYI_DEVICE=cpu \
    FANYI_THREADS=1 \
    PYTHONUNBUFFERED=1

FROM runtime AS producer
COPY --from=build-producer /install /usr/local
CMD ["python", "-m", "jobs", "--help"]

FROM runtime AS worker
COPY --from=build /install /usr/local
# Prefork processes count into this folder for FANYI_METRICS_PORT; set before the process starts, as
# prometheus_client needs (worker/monitoring/metrics.py). Under /tmp: the one writable place (an emptyDir on Kubernetes).
ENV PROMETHEUS_MULTIPROC_DIR=/tmp/prometheus
# Healthy unless the worker recorded an environment fault in FANYI_HEALTH_FILE (worker/monitoring/health.py).
HEALTHCHECK --interval=30s --timeout=10s --start-period=2m --retries=3 CMD ["python", "-m", "worker.health"]
# No --concurrency here, which would override the sizing: processes = FANYI_CONCURRENCY if set, else the
# cores this container may use (cgroup cpu.max quota, affinity) / FANYI_THREADS (contract.settings.worker_processes;
# docs/operations.md: sizing).
CMD ["celery", "-A", "worker.app", "worker", "-Q", "translate.cpu", "--loglevel", "INFO"]
