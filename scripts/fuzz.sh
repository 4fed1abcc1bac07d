#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time (FUZZ_SECONDS, 20 by
# default) from its seed corpus in fuzz/corpus/<target>/. Each target's whole log is kept in
# build-fuzz/logs/<target>.log; the run fails when any log holds a sanitizer report or libFuzzer
# left a crash, timeout, leak or oom artifact, so a UB report cannot scroll past unseen.
# FUZZ_TARGETS="npy_fuzz csv_fuzz" limits the run to those targets.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-20}"
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DNABLA_FUZZ=ON -DNABLA_CUDA=OFF -DNABLA_BUILD_TESTS=OFF \
  -DNABLA_BUILD_BENCH=OFF -DNABLA_BUILD_EXAMPLES=OFF >/dev/null
shopt -s nullglob
if [ -n "${FUZZ_TARGETS:-}" ]; then
  targets=()
  for t in $FUZZ_TARGETS; do targets+=("fuzz/$t.c"); done
else
  targets=(fuzz/*_fuzz.c)
fi
if [ ${#targets[@]} -eq 0 ]; then echo "no fuzz targets"; exit 0; fi
# only the fuzz targets (and the library under them): the tools need not build to fuzz a parser
names=()
for src in "${targets[@]}"; do names+=("$(basename "$src" .c)"); done
cmake --build build-fuzz -j"$(nproc)" --target "${names[@]}"
logs=build-fuzz/logs
mkdir -p "$logs"
# What counts as a finding: UBSan's "runtime error:", any ASan/LSan report, a sanitizer SUMMARY,
# and libFuzzer's own "==ERROR", deadly-signal, timeout and out-of-memory lines.
pattern='runtime error:|ERROR: AddressSanitizer|ERROR: LeakSanitizer|SUMMARY: |==ERROR|ERROR: libFuzzer|deadly signal|ALARM: working on the last Unit|out-of-memory \(|Test unit written to'
failed=()
summary=()
for src in "${targets[@]}"; do
  name="$(basename "$src" .c)"
  corpus="fuzz/corpus/$name"
  work="$(mktemp -d)"
  artifacts="$(mktemp -d)"
  [ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
  log="$logs/$name.log"
  echo "== $name: ${seconds}s (log: $log)"
  rc=0
  ASAN_OPTIONS="detect_leaks=1:halt_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
    "build-fuzz/fuzz/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$work" >"$log" 2>&1 || rc=$?
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  summary+=("$name: ${execs:-?} executions in ${seconds}s")
  found="$(grep -E -m 20 -n "$pattern" "$log" || true)"
  kept=("$artifacts"/*)
  if [ "$rc" -ne 0 ] || [ -n "$found" ] || [ ${#kept[@]} -gt 0 ]; then
    echo "!! $name FAILED (exit $rc)"
    [ -n "$found" ] && echo "$found"
    # the report itself: from the first finding line, enough to read the stack
    first="$(grep -E -m 1 -n "$pattern" "$log" | cut -d: -f1 || true)"
    if [ -n "$first" ]; then sed -n "$((first > 3 ? first - 3 : 1)),$((first + 40))p" "$log"; else tail -n 40 "$log"; fi
    if [ ${#kept[@]} -gt 0 ]; then
      mkdir -p build-fuzz/artifacts
      cp "${kept[@]}" build-fuzz/artifacts/
      echo "artifacts kept in build-fuzz/artifacts/: $(cd "$artifacts" && ls | tr '\n' ' ')"
    fi
    failed+=("$name")
  else
    echo "   ${execs:-?} executions, clean"
  fi
  rm -rf "$work" "$artifacts"
done
echo "== executions per target"
printf '   %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzzing FAILED: ${failed[*]} (logs in $logs/)"
  exit 1
fi
echo "fuzzing passed"
