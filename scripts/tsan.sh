#!/usr/bin/env bash
# ThreadSanitizer run of the tests that share one model or tokenizer between threads: a clang-14
# build with -DBERT8_SANITIZE=thread in build-tsan/, then ctest's "threads" label (test_threads:
# 4 pthreads on one FP32 and two INT8 models; test_pool: the thread pool of the kernels;
# test_seq_parallel: sequence groups run side by side), test_tokenizer (one tokenizer, 4 threads) and
# test_pipeline (4 threads sharing one pipeline and its session pool).
#   scripts/tsan.sh            both OpenMP set-ups below
#   scripts/tsan.sh pool1      only the first; scripts/tsan.sh archer: only the second
# OpenMP: GNU libgomp (which oneDNN links) is not instrumented, so TSan cannot see its
# synchronisation and would report its workers' hand-offs as races, or miss races in them.
#  1. pool1: OMP_NUM_THREADS=1. No OpenMP worker threads exist; all concurrency is between the
#     test's pthreads, each with its own session, which is the sharing bert8.h promises.
#  2. archer: every OpenMP user in the process (bert8's code built by clang, and oneDNN) is
#     pointed at LLVM's libomp through a libgomp.so.1 -> libomp.so.5 link on LD_LIBRARY_PATH,
#     with LLVM's Archer tool (OMP_TOOL_LIBRARIES=libarcher.so), which tells TSan about
#     OpenMP's barriers and hand-offs; OMP_NUM_THREADS=2, so the parallel loops really split.
# oneDNN itself is not instrumented in either mode (TSAN_OPTIONS ignore_noninstrumented_modules):
# a misuse of oneDNN objects across threads does not show up as a TSan report, which is why
# test_threads also compares every thread's outputs with a single-threaded run.
set -euo pipefail
cd "$(dirname "$0")/.."
modes=${1:-pool1 archer}
bash scripts/install-deps.sh
missing=""
for p in clang-14 libclang-rt-14-dev libomp-14-dev; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
B=build-tsan
CC=clang-14 CXX=clang++-14 cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DBERT8_SANITIZE=thread -DBERT8_WERROR=ON >/dev/null
cmake --build "$B" -j"$(nproc)" --target test_threads test_pool test_seq_parallel test_tokenizer test_pipeline
llvm=$(dirname "$(readlink -f "$(command -v clang-14)")")/../lib
mkdir -p "$B/omp-shim"
ln -sf "$llvm/libomp.so.5" "$B/omp-shim/libgomp.so.1"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ignore_noninstrumented_modules=1"
cd "$B"
for mode in $modes; do
  echo "== ThreadSanitizer, OpenMP mode $mode"
  case "$mode" in
    pool1) env OMP_NUM_THREADS=1 ctest --output-on-failure -L threads -R '^test_' ;;
    archer) env OMP_NUM_THREADS=2 LD_LIBRARY_PATH="$PWD/omp-shim" \
      OMP_TOOL_LIBRARIES="$llvm/libarcher.so" ctest --output-on-failure -L threads -R '^test_' ;;
    *) echo "unknown mode $mode" >&2; exit 2 ;;
  esac
  case "$mode" in
    pool1) env OMP_NUM_THREADS=1 ctest --output-on-failure -R "^(test_tokenizer|test_pipeline)$" ;;
    archer) env OMP_NUM_THREADS=2 LD_LIBRARY_PATH="$PWD/omp-shim" \
      OMP_TOOL_LIBRARIES="$llvm/libarcher.so" ctest --output-on-failure -R "^(test_tokenizer|test_pipeline)$" ;;
  esac
done
