#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time (FUZZ_SECONDS, 20 by
# default) from its seed corpus in fuzz/corpus/<target>/. Exits non-zero on the first crash.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-20}"
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DNABLA_FUZZ=ON -DNABLA_BUILD_TESTS=OFF \
  -DNABLA_BUILD_BENCH=OFF -DNABLA_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)"
shopt -s nullglob
targets=(fuzz/*_fuzz.c)
if [ ${#targets[@]} -eq 0 ]; then echo "no fuzz targets"; exit 0; fi
for src in "${targets[@]}"; do
  name="$(basename "$src" .c)"
  corpus="fuzz/corpus/$name"
  work="$(mktemp -d)"
  [ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
  echo "== $name: ${seconds}s"
  ASAN_OPTIONS=detect_leaks=1 "build-fuzz/fuzz/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 "$work" 2>&1 | tail -n 4
  rm -rf "$work"
done
echo "fuzzing passed"
