#!/usr/bin/env bash
# Installs what the server tests and the load test need: Debian's curl and wrk, and a Python
# venv (build/venv-server, or $1) with the real TEI clients (huggingface_hub, openai), numpy, pytest and
# requests. Idempotent: a venv that already imports them is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-build/venv-server}"
missing=""
for p in curl wrk python3-venv; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
if ! "$venv/bin/python" -c "import huggingface_hub, numpy, openai, pytest, requests" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q huggingface_hub numpy openai pytest requests
fi
