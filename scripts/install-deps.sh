#!/usr/bin/env bash
# Installs the Debian 12 packages bert8 builds and tests with (needs root or sudo).
set -euo pipefail
PKGS="build-essential cmake pkg-config libcjson-dev libdnnl-dev libutf8proc-dev libprotobuf-c-dev protobuf-c-compiler libmicrohttpd-dev"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
