#!/usr/bin/env bash
# Installs the C library from build/ into a prefix, then builds examples/classify_stdin.c against
# the installed package twice (CMake find_package, pkg-config) and runs both on a model.
#   scripts/example-test.sh [BUILD_DIR]   (default build, configured and built by scripts/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
prefix="$PWD/$build/prefix"
rm -rf "$prefix" "$build/example-cmake" "$build/example-pc"
cmake --build "$build" -j"$(nproc)" --target bert8 bert8_shared >/dev/null
cmake --install "$build" --prefix "$prefix" >/dev/null

# Only bert8_* symbols leave the shared library, and its SONAME carries the major version.
so=$(readlink -f "$prefix/lib/libbert8.so")
others=$(nm -D --defined-only "$so" | awk '$2 != "A" {print $3}' | grep -v '^bert8_' || true)
[ -z "$others" ] || { echo "libbert8.so exports non-API symbols: $others"; exit 1; }
soname=$(readelf -d "$so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
major=$(sed -n 's/^#define BERT8_VERSION_MAJOR \([0-9]*\)$/\1/p' include/bert8.h)
[ "$soname" = "libbert8.so.$major" ] || { echo "unexpected SONAME $soname"; exit 1; }
for f in include/bert8.h include/bert8_pipeline.h lib/libbert8.a lib/pkgconfig/bert8.pc \
         lib/cmake/bert8/bert8Config.cmake lib/cmake/bert8/bert8ConfigVersion.cmake; do
  [ -e "$prefix/$f" ] || { echo "missing $prefix/$f"; exit 1; }
done

input=$'a thoroughly enjoyable film with a warm heart\nthe plot is dull and the acting is worse'
check() { # PROGRAM: runs it on the SST-2 model, expects one line per sentence
  out=$(printf '%s\n' "$input" | "$1" models/sst2-bert-mini)
  echo "$out"
  [ "$(printf '%s\n' "$out" | wc -l)" = 2 ] || { echo "$1: expected 2 lines"; exit 1; }
}

cmake -S examples -B "$build/example-cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$build/example-cmake" >/dev/null
check "$build/example-cmake/classify_stdin"

mkdir -p "$build/example-pc"
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --modversion bert8 >/dev/null
# shellcheck disable=SC2046  # pkg-config prints several flags
cc -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror examples/classify_stdin.c \
   $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs bert8) \
   -Wl,-rpath,"$prefix/lib" -o "$build/example-pc/classify_stdin"
check "$build/example-pc/classify_stdin"

# The static library through pkg-config --static links as well.
# shellcheck disable=SC2046
cc -std=c11 -D_POSIX_C_SOURCE=200809L examples/classify_stdin.c \
   $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --static --libs bert8 | sed 's/-lbert8/-l:libbert8.a/') \
   -o "$build/example-pc/classify_stdin_static"
check "$build/example-pc/classify_stdin_static"
echo "example: installed package OK (CMake, pkg-config, static)"
