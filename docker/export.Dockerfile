# Exporter: torch (CPU) + transformers + onnx; turns a Hugging Face model into a verified artifact.
#   docker build -f docker/export.Dockerfile --build-arg TORCH_INDEX_URL=<PyTorch's CPU wheel index> -t fanyi-export .
#   docker run -v $PWD/artifacts:/artifacts fanyi-export build Helsinki-NLP/opus-mt-en-zh --out /artifacts/opus-mt-en-zh
FROM python:3.11.11-slim-bookworm
# /artifacts owned by fanyi: Docker copies this ownership into a new named volume mounted there,
# so the build (non-root) can write its artifact.
RUN useradd --create-home --uid 10001 fanyi \
 && install -d -o fanyi -g fanyi /artifacts
WORKDIR /src
# torch from PyTorch's CPU wheel index: pip's default torch wheel is a multi-GB CUDA build. The index's
# address is given by PyTorch's install page ("CPU"); this repository never writes a registry's address.
ARG TORCH_INDEX_URL=""
ARG ALLOW_CUDA_TORCH=""
RUN if [ -z "$TORCH_INDEX_URL" ] && [ "$ALLOW_CUDA_TORCH" != "1" ]; then \
      echo "export.Dockerfile: TORCH_INDEX_URL is empty, so pip would take the default torch wheel, a multi-GB CUDA build." >&2; \
      echo "Set TORCH_INDEX_URL to PyTorch's CPU wheel index, as PyTorch's install page gives it" >&2; \
      echo "(docker build --build-arg TORCH_INDEX_URL=...; docker compose: TORCH_INDEX_URL in the environment or docker/.env)," >&2; \
      echo "or pass --build-arg ALLOW_CUDA_TORCH=1 (compose: ALLOW_CUDA_TORCH=1) to accept the multi-GB CUDA wheel." >&2; \
      exit 1; \
    fi
# Dependencies first, in a layer that depends on pyproject.toml (and the index) alone: editing the sources reuses it.
COPY pyproject.toml ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print(*p['dependencies'], *p['optional-dependencies']['export'], sep=chr(10))" > requirements.txt \
 && pip install --no-cache-dir ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} $(grep -E '^torch([<>=!~ ;[]|$)' requirements.txt) \
 && pip install --no-cache-dir -r requirements.txt
COPY README.md ./
COPY contract contract
COPY worker worker
COPY jobs jobs
COPY export_tools export_tools
RUN pip install --no-cache-dir --no-deps .
USER fanyi
WORKDIR /home/fanyi
ENTRYPOINT ["python", "-m", "export_tools"]
CMD ["--help"]
