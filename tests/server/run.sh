#!/usr/bin/env bash
# Runs the `bert8 serve` tests (pytest, tests/server/) against a bert8 binary:
#   tests/server/run.sh BUILD_DIR/bert8 [pytest args]
# The real clients come from a venv made by scripts/server-test-deps.sh (build/venv-server).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
shift
venv="$root/build/venv-server"
mkdir -p "$root/build"
# one installer at a time when two build trees test at once
flock "$root/build/.venv-server.lock" bash "$root/scripts/server-test-deps.sh" "$venv" >/dev/null
export BERT8_BIN="$bin"
cd "$root/tests/server"
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@" .
