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

# Dependencies first, as root into the system site-packages (read-only to the app's user), so code
# changes do not reinstall them (layer caching).
COPY --chown=user requirements.txt requirements-nodeps.txt requirements-dev.txt pyproject.toml ./
COPY --chown=user scripts/setup.sh scripts/setup.sh
RUN pip install -q -r requirements.txt && pip install -q --no-deps -r requirements-nodeps.txt

COPY --chown=user . .
USER user
# The same script as the README, run as uid 1000 so that models/ (default model, runs/) is the app's
# own. PIP_USER=1 rather than PIP="pip --user": setup.sh runs `$PIP install ...`, and pip refuses an
# option before its command. The requirements are already satisfied above, so this only adds the
# editable package (and the `bertviz-app` command) under ~/.local. --build-model trains models/default
# into the image (2 to 3 minutes on a quiet 2-core CPU, 7 at load 6: scripts/container_check.sh), so the Space never
# builds at start-up.
RUN PIP_USER=1 bash scripts/setup.sh --build-model

EXPOSE 7860
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD python -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:7860/', timeout=4); sys.exit(0)"
CMD ["python", "app.py"]
