#!/usr/bin/env bash
# bert8 and its peers (ONNX Runtime, OpenVINO, PyTorch/torchao, llama.cpp, CTranslate2, fastembed),
# measured side by side.
#
#   bash bench/peers/run.sh [--models bert-base,distilbert-base,xlmr-base,/path/to/checkpoint] [--batches 1x16,1,8,32]
#                           [--rounds 3] [--threads 2] [--quick] [--bert8 PATH] [--peaks FILE] ...
#
# Makes the venv bench/peers/work/venv (pinned requirements.txt; torch==2.13.0 CPU), builds the
# random checkpoints, prepares every peer's model, runs each system in a fresh process per round
# and writes bench/peers/results/peers-TAG.{json.gz,md,png}. Every option of bench.py is accepted:
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

# The peers with their own venvs (llama.cpp, fastembed): a package that does not install is a
# line of install-failures.txt, and its rows say so.
side_venv() {  # NAME REQUIREMENTS
  local v="$WORK/venv-$1" req="$HERE/$2" st want_s
  st="$v/.requirements.sha256"; want_s="$(sha256sum "$req" | cut -d' ' -f1)"
  [ -x "$v/bin/python" ] && [ "$(cat "$st" 2>/dev/null)" = "$want_s" ] && return 0
  echo "== venv $v (pip install -r bench/peers/$2)"
  [ -x "$v/bin/python" ] || "$PY_BASE" -m venv "$v"
  sed -i "/(venv-$1)/d" "$WORK/install-failures.txt" 2>/dev/null || true
  if out="$("$v/bin/pip" install --disable-pip-version-check -q -r "$req" 2>&1)"; then
    echo "$want_s" > "$st"
  else
    echo "$(grep -vE '^\s*(#|$)' "$req" | head -1) (venv-$1): $(echo "$out" | grep -v '^\s*$' | tail -1)" \
      | tee -a "$WORK/install-failures.txt"
    rm -rf "$v"
  fi
}
# The side venvs only for the families --systems names (all of them without --systems): the
# llama.cpp build alone takes 20-30 minutes.
systems=""
for ((i = 1; i <= $#; i++)); do
  case "${!i}" in
    --systems) j=$((i + 1)); systems="${!j:-}" ;;
    --systems=*) systems="${!i#--systems=}" ;;
  esac
done
wants() {  # FAMILY: does --systems name one of its systems (FAMILY-...)?
  [ -z "$systems" ] || [[ ",$systems," == *",$1-"* ]]
}
# llama.cpp: a native build for this CPU, without examples, tests or the multimodal library
if wants llamacpp; then
  CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
    CMAKE_ARGS="-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAVA_BUILD=OFF -DGGML_NATIVE=ON -DLLAMA_CURL=OFF" \
    side_venv llamacpp requirements-llamacpp.txt
fi
if wants fastembed; then side_venv fastembed requirements-fastembed.txt; fi
# llama.cpp's converter, from the same sdist
src="$WORK/src/llama.cpp"
if wants llamacpp && [ ! -f "$src/convert_hf_to_gguf.py" ]; then
  lcp="$(grep -E '^llama-cpp-python==' "$HERE/requirements-llamacpp.txt")"
  if "$VENV/bin/pip" download --disable-pip-version-check -q --no-deps --no-binary :all: "$lcp" -d "$WORK/src" \
      >/dev/null 2>&1; then
    tgz="$(ls "$WORK"/src/llama_cpp_python-*.tar.gz | head -1)"
    top="$(basename "$tgz" .tar.gz)"
    mkdir -p "$src"
    tar -xzf "$tgz" -C "$WORK/src" "$top/vendor/llama.cpp/convert_hf_to_gguf.py" "$top/vendor/llama.cpp/gguf-py" \
      "$top/vendor/llama.cpp/conversion" && cp -r "$WORK/src/$top/vendor/llama.cpp/." "$src/"
  else
    echo "note: could not download the $lcp sdist; the GGUF conversions will fail" >&2
  fi
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
