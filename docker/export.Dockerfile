# Exporter: torch (CPU) + transformers + onnx; turns a Hugging Face model into a verified artifact.
#   docker build -f docker/export.Dockerfile -t fanyi-export .
#   docker run -v $PWD/artifacts:/artifacts fanyi-export build Helsinki-NLP/opus-mt-en-zh --out /artifacts/opus-mt-en-zh
FROM python:3.11.11-slim-bookworm
RUN useradd --create-home --uid 10001 fanyi
WORKDIR /src
COPY pyproject.toml README.md ./
COPY worker worker
COPY jobs jobs
COPY export_tools export_tools
# torch first. Pass --build-arg TORCH_INDEX_URL=<PyTorch's CPU wheel index> for the small CPU build;
# without it pip takes the default wheel, a multi-GB CUDA build.
ARG TORCH_INDEX_URL=""
RUN pip install --no-cache-dir ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} torch==2.13.0 \
 && pip install --no-cache-dir '.[export]'
USER fanyi
WORKDIR /home/fanyi
ENTRYPOINT ["python", "-m", "export_tools"]
CMD ["--help"]
