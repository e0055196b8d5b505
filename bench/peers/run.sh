#!/usr/bin/env bash
# bert8 and its peers (ONNX Runtime, OpenVINO, PyTorch/torchao), measured side by side.
#
#   bash bench/peers/run.sh [--models bert-base,distilbert-base,xlmr-base] [--batches 1,8,32]
#                           [--rounds 3] [--threads 2] [--quick] [--bert8 PATH] [--peaks FILE] ...
#
# Makes the venv bench/peers/work/venv (pinned requirements.txt; torch==2.13.0 CPU), builds the
# random checkpoints, prepares every peer's model, runs each system in a fresh process per round
# and writes bench/peers/results/peers-TAG.{json,md,png}. Every option of bench.py is accepted:
# `bash bench/peers/run.sh --help` lists them.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
WORK="${PEERS_WORK:-$HERE/work}"
VENV="$WORK/venv"
PY_BASE="${PYTHON:-python3}"
CMDLINE="bash bench/peers/run.sh $*"

mkdir -p "$WORK" "$HERE/results"
stamp="$VENV/.requirements.sha256"
want="$(sha256sum "$HERE/requirements.txt" | cut -d' ' -f1)"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "== venv $VENV (pip install -r bench/peers/requirements.txt; takes a few minutes)"
  [ -x "$VENV/bin/python" ] || "$PY_BASE" -m venv "$VENV"
  # torch first and pinned, so that nothing later can pull an unpinned (CUDA) torch
  "$VENV/bin/pip" install --disable-pip-version-check -q "torch==2.13.0"
  : > "$WORK/install-failures.txt"
  if ! "$VENV/bin/pip" install --disable-pip-version-check -q -r "$HERE/requirements.txt"; then
    # one package at a time, so that a peer that does not install is reported, not fatal
    echo "== pip could not install the whole set; installing one package at a time"
    grep -vE '^\s*(#|$)' "$HERE/requirements.txt" | while read -r req; do
      if ! out="$("$VENV/bin/pip" install --disable-pip-version-check -q "torch==2.13.0" "$req" 2>&1)"; then
        echo "$req: $(echo "$out" | grep -v '^\s*$' | tail -1)" | tee -a "$WORK/install-failures.txt"
      fi
    done
  fi
  echo "$want" > "$stamp"
fi

# bert8: the binary of this repo unless --bert8 PATH is given
bert8="$REPO/build/bert8"
for ((i = 1; i <= $#; i++)); do
  if [ "${!i}" = "--bert8" ]; then j=$((i + 1)); bert8="${!j}"; fi
done
if [ ! -x "$bert8" ]; then
  echo "note: no bert8 binary at $bert8; bert8 rows will say so (build: bash scripts/install-deps.sh &&" \
       "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j)" >&2
fi

cd "$REPO"
exec "$VENV/bin/python" "$HERE/bench.py" --bert8 "$bert8" --command-line "$CMDLINE" "$@"
