# Hugging Face Docker Space (or any Docker host): serves the app on port 7860.
FROM python:3.11-slim

# BERTVIZ_HOST=0.0.0.0 on purpose: inside a container the app must listen on every interface to be
# reachable through the published port (outside Docker it defaults to 127.0.0.1). Local folder
# loading stays off here, since the app is public, and public mode keeps each visitor's runs and
# uploads their own, within limits (docs/deploy.md).
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 MALLOC_ARENA_MAX=2 \
    TOKENIZERS_PARALLELISM=false HF_HUB_DISABLE_TELEMETRY=1 GRADIO_ANALYTICS_ENABLED=False \
    BERTVIZ_HOST=0.0.0.0 BERTVIZ_PORT=7860 BERTVIZ_ALLOW_LOCAL_PATHS=0 BERTVIZ_PUBLIC=1

# Spaces run the container as uid 1000.
RUN useradd -m -u 1000 user
ENV HOME=/home/user PATH=/home/user/.local/bin:$PATH
WORKDIR /home/user/app

# torch first, on its own: which build of torch==2.13.0 (requirements.txt's pin) the image gets.
#   TORCH=cpu  (the default: a Space's free CPU hardware) torch's CPU-only wheel, 2.13.0+cpu. The pin's
#              "+cpu" exists only on torch's own index, so the wheel comes from there; its dependencies
#              come from PyPI. PyPI's torch==2.13.0 for Linux x86_64 is the CUDA build, which adds GBs of
#              nvidia-* libraries that a CPU machine never uses.
#   TORCH=cuda (a GPU Space) PyPI's torch==2.13.0 with its CUDA libraries (torch.__version__ says
#              2.13.0+cu130); "===" matches the version exactly, so a local CPU wheel (2.13.0+cpu)
#              cannot stand in for it. On a Space: a variable TORCH=cuda (variables are passed as build
#              args); elsewhere: docker build --build-arg TORCH=cuda . (sizes in docs/deploy.md).
# TORCH_CPU_INDEX: where the CPU-only wheel is published; empty = pip's own sources only (a mirror or
# a local folder of wheels that holds 2.13.0+cpu; scripts/container_check.sh passes it empty).
# requirements.txt then finds torch==2.13.0 satisfied and installs nothing more for it.
ARG TORCH=cpu
ARG TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
RUN case "$TORCH" in \
      cpu)  pip install -q ${TORCH_CPU_INDEX:+--extra-index-url "$TORCH_CPU_INDEX"} "torch==2.13.0+cpu" ;; \
      cuda) pip install -q "torch===2.13.0" ;; \
      *)    echo "TORCH must be cpu (torch's CPU-only wheel) or cuda (PyPI's CUDA build), not '$TORCH'" >&2; exit 2 ;; \
    esac \
 && python -c "import sys, torch; c = torch.version.cuda; print('torch', torch.__version__, 'CUDA', c); \
sys.exit(None if (c is None) == (sys.argv[1] == 'cpu') else 'this torch is not the ' + sys.argv[1] + ' build')" "$TORCH"

# The other dependencies, as root into the system site-packages (read-only to the app's user), so
# code changes do not reinstall them (layer caching).
COPY --chown=user requirements.txt requirements-nodeps.txt requirements-tagger.txt requirements-dev.txt pyproject.toml ./
COPY --chown=user scripts/setup.sh scripts/setup.sh
RUN pip install -q -r requirements.txt -r requirements-tagger.txt && pip install -q --no-deps -r requirements-nodeps.txt

COPY --chown=user . .
USER user
# The same script as the README, run as uid 1000 so that models/ (default model, runs/) is the app's
# own. PIP_USER=1 rather than PIP="pip --user": setup.sh runs `$PIP install ...`, and pip refuses an
# option before its command. The requirements are already satisfied above, so this only adds the
# editable package (and the `bertviz-app` command) under ~/.local. --build-model trains models/default
# (2 to 3 minutes on a quiet 2-core CPU, 7 at load 6: scripts/container_check.sh) and then models/default-tagger
# (about 5.5 minutes quiet, docs/tagging.md) into the image, so the Space never builds at start-up.
RUN PIP_USER=1 bash scripts/setup.sh --build-model

EXPOSE 7860
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD python -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:7860/', timeout=4); sys.exit(0)"
CMD ["python", "app.py"]
