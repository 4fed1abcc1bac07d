#!/usr/bin/env bash
# Quickstart, step 2: build and run every test, in Release (with the CUDA backend compiled and
# linked when nvcc is found; its GPU tests report skipped without a GPU) and under ASan + UBSan
# (without CUDA); then the build without optional dependencies and the aarch64 build under qemu-user (scripts/test_configs.sh);
# then fuzz the file parsers for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --cross
jobs="$(nproc)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs")
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DNABLA_SANITIZE=ON -DNABLA_BUILD_BENCH=OFF -DNABLA_CUDA=OFF >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j"$jobs")
scripts/test_configs.sh
# the file parsers under libFuzzer for a bounded time (FUZZ_SECONDS each, 30 by default)
FUZZ_SECONDS="${FUZZ_SECONDS:-30}" scripts/fuzz.sh
