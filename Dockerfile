# Paperclip: slim Python, non-root, config, database and the exported embedding model on a volume.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    PAPERCLIP_CONFIG=/etc/paperclip/proxy.yaml \
    PAPERCLIP_DATA_DIR=/data \
    PAPERCLIP_LOG_FORMAT=json \
    XDG_CACHE_HOME=/data/cache

WORKDIR /app
# The CPU build of torch first, from PyTorch's CPU wheel index: on a plain index torch==2.13.0
# is the CUDA build and pulls several GB of nvidia-* wheels. `pip install .` below keeps it,
# since the local version 2.13.0+cpu satisfies pyproject's torch==2.13.0 (PEP 440).
ARG TORCH_VERSION=2.13.0
RUN pip install "torch==${TORCH_VERSION}" --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md proxy.yaml ./
COPY proxy ./proxy
COPY prompts ./prompts
# proxy/_prompts and proxy/config/proxy.yaml are links to ../prompts and ../../proxy.yaml:
# replace them by the files before building the wheel.
RUN rm -f proxy/_prompts proxy/config/proxy.yaml && cp -r prompts proxy/_prompts && cp proxy.yaml proxy/config/proxy.yaml \
    && pip install . && pip install '.[postgres]' && rm -rf /app/proxy /app/prompts /app/proxy.yaml
# The image must carry no CUDA: fail the build if a dependency brought any back.
RUN python -c "import torch; assert torch.version.cuda is None, torch.version.cuda" \
    && ! pip list 2>/dev/null | grep -i '^nvidia-' \
    && paperclip --version

COPY proxy.yaml /etc/paperclip/proxy.yaml
RUN useradd --create-home --uid 10001 paperclip && mkdir -p /data/cache && chown -R paperclip /data
USER paperclip
VOLUME ["/data"]
EXPOSE 8787

HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8787/healthz', timeout=4)" || exit 1

# Mount your own proxy.yaml over /etc/paperclip/proxy.yaml (or set PAPERCLIP_CONFIG=/data/proxy.yaml).
CMD ["sh", "-c", "exec paperclip serve --config \"$PAPERCLIP_CONFIG\" --host 0.0.0.0 --port 8787"]
