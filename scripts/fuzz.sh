#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/) with clang-14, ASan and UBSan in build-fuzz/ and runs
# them (docs/reliability.md has the results and the limits).
#   scripts/fuzz.sh build                     build only
#   scripts/fuzz.sh ci [SECONDS]              replay every committed corpus, then fuzz each
#                                             harness for SECONDS (default 10): for CI
#   scripts/fuzz.sh long [RUNS] [HARNESS...]  fuzz each harness (default: all) for RUNS
#                                             executions (default 1000000), one at a time,
#                                             under nice -n 19; logs and final statistics in
#                                             build-fuzz/logs/, new inputs in build-fuzz/corpus/
#   scripts/fuzz.sh replay FILE...            run a harness on saved inputs: the harness is
#                                             taken from HARNESS=name (e.g. HARNESS=spm)
# Crashes are written to build-fuzz/artifacts/<harness>-crash-*; a fixed one belongs in
# fuzz/regressions/<harness>/, which the normal test suite replays.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-ci}
shift || true
ALL="safetensors st_header st_index config st_folder tok_config vocab_txt tokenizer_json spm quant encode text_io jsonl server_http"
B=build-fuzz

install_clang() {
  local missing=""
  for p in clang-14 libclang-rt-14-dev libomp-14-dev; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
  done
  if [ -n "$missing" ]; then
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends $missing
  fi
}

build() {
  bash scripts/install-deps.sh
  install_clang
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DBERT8_SANITIZE=ON -DBERT8_FUZZ=ON -DBERT8_WERROR=ON >/dev/null
  cmake --build "$B" -j"$(nproc)" --target fuzz_all
  mkdir -p "$B/logs" "$B/artifacts"
  make_extra_seeds
  # scratch folders (bert8-fuzz-<pid>) of earlier runs that crashed; a running harness's own
  # folder is kept whatever its age (several fuzz.sh runs may share the machine)
  for d in /dev/shm/bert8-fuzz-* /tmp/bert8-fuzz-*; do
    [ -d "$d" ] || continue
    pid=${d##*-}
    [ -d "/proc/$pid" ] || rm -rf "$d"
  done
}

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

dict_of() {
  case "$1" in
    safetensors | st_header) echo fuzz/dict/safetensors.dict ;;
    tokenizer_json | tok_config) echo fuzz/dict/tokenizer.dict ;;
    *) [ -f "fuzz/dict/$1.dict" ] && echo "fuzz/dict/$1.dict" ;;
  esac
}
max_len_of() {
  case "$1" in
    spm) echo 400000 ;;
    tokenizer_json | vocab_txt) echo 65536 ;;
    encode | quant | text_io | jsonl) echo 4096 ;;
    *) echo 16384 ;;
  esac
}
# Extra seeds taken from ../shared (the golden folders' files): written to build-fuzz/extra/ by
# fuzz/make_seeds.py --shared-only, used as seeds, never copied into the repository.
make_extra_seeds() {
  local shared=${BERT8_SHARED:-../shared}
  rm -rf "$B/extra"
  mkdir -p "$B/extra"
  if [ -d "$shared/golden/models" ]; then
    python3 fuzz/make_seeds.py --shared-only "$B/extra" "$shared" >/dev/null
    if [ -f "$shared/golden/models/xlmr_e2e/sentencepiece.bpe.model" ]; then
      mkdir -p "$B/extra/spm"
      { cat "$shared/golden/models/xlmr_e2e/sentencepiece.bpe.model"; printf '\n#####\nHello  world, caf\xc3\xa9!'; } >"$B/extra/spm/golden_xlmr"
    fi
  fi
}
extra_seeds() {
  mkdir -p "$B/extra/$1"
  echo "$B/extra/$1"
}
flags_of() {
  local h=$1 dict
  dict=$(dict_of "$h" || true)
  echo "-max_len=$(max_len_of "$h") -rss_limit_mb=3072 -timeout=30 -print_final_stats=1" \
    "-artifact_prefix=$B/artifacts/$h-" ${dict:+-dict=$dict}
}

case "$mode" in
  build) build ;;
  ci)
    secs=${1:-10}
    build
    for h in $ALL; do
      echo "== $h: replay of fuzz/corpus/$h and fuzz/regressions/$h, then ${secs}s of fuzzing"
      regs=""
      [ -d "fuzz/regressions/$h" ] && regs="fuzz/regressions/$h"
      "$B/fuzz/fuzz_$h" -runs=0 $(flags_of "$h") "fuzz/corpus/$h" $regs >"$B/logs/ci-replay-$h.log" \
        2>&1 || { tail -40 "$B/logs/ci-replay-$h.log"; exit 1; }
      work=$(mktemp -d)
      "$B/fuzz/fuzz_$h" -max_total_time="$secs" $(flags_of "$h") "$work" "fuzz/corpus/$h" \
        "$(extra_seeds "$h")" >"$B/logs/ci-$h.log" 2>&1 || { tail -40 "$B/logs/ci-$h.log"; rm -rf "$work"; exit 1; }
      grep -E "^Done|stat::number_of_executed_units|DONE" "$B/logs/ci-$h.log" | tr '\n' ' '
      echo
      rm -rf "$work"
    done
    # the INT8 folder of the dynamic scheme, whose Linears carry fp32 outlier channels
    echo "== quant (dynamic folder): replay, then ${secs}s of fuzzing"
    work=$(mktemp -d)
    FUZZ_QUANT_DYNAMIC=1 "$B/fuzz/fuzz_quant" -max_total_time="$secs" $(flags_of quant) "$work" fuzz/corpus/quant \
      >"$B/logs/ci-quant-dynamic.log" 2>&1 || { tail -40 "$B/logs/ci-quant-dynamic.log"; rm -rf "$work"; exit 1; }
    grep -E "^Done|stat::number_of_executed_units|DONE" "$B/logs/ci-quant-dynamic.log" | tr '\n' ' '
    echo
    rm -rf "$work"
    ;;
  long)
    runs=${1:-1000000}
    shift || true
    list=${*:-$ALL}
    build
    for h in $list; do
      mkdir -p "$B/corpus/$h"
      log="$B/logs/long-$h.log"
      echo "== $h: $runs executions, log in $log"
      start=$(date +%s)
      nice -n 19 "$B/fuzz/fuzz_$h" -runs="$runs" $(flags_of "$h") "$B/corpus/$h" "fuzz/corpus/$h" \
        "$(extra_seeds "$h")" >"$log" 2>&1 || { echo "   FAILED: see $log"; tail -30 "$log"; }
      end=$(date +%s)
      echo "   $(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1) ($((end - start)) s)"
      grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$log" | sed 's/^/   /'
    done
    ;;
  replay)
    h=${HARNESS:?set HARNESS=name}
    "$B/fuzz/fuzz_$h" -runs=0 $(flags_of "$h") "$@"
    ;;
  *) echo "usage: $0 build | ci [SECONDS] | long [RUNS] [HARNESS...] | replay FILE..." >&2; exit 2 ;;
esac
