#!/usr/bin/env bash
# Installs dependencies, builds with warnings as errors and runs the test suite.
#   scripts/test.sh             Release build in build/
#   scripts/test.sh --sanitize  AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# Dependencies run one way through the source tree (see docs/architecture.md).
python3 scripts/check_layers.py
if [ "${1:-}" = "--sanitize" ]; then
  dir=build-asan; flags="-DCMAKE_BUILD_TYPE=Debug -DBERT8_SANITIZE=ON"
  # oneDNN's and libgomp's process-lifetime caches are not leaks of ours.
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0"
  export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
else
  dir=build; flags="-DCMAKE_BUILD_TYPE=Release"
fi
cmake -S . -B "$dir" $flags -DBERT8_WERROR=ON >/dev/null
cmake --build "$dir" -j"$(nproc)"
# The optimized kernels' hot loops hold no register copies or spills (docs/benchmarks.md, Ice Lake).
if [ "$dir" = build ]; then python3 scripts/check_kernel_loops.py "$dir"; fi
cd "$dir" && ctest --output-on-failure -j"$(nproc)"
