#!/bin/sh
# Runs the event-writer benchmark (bench/bench_summary.c): the average cost of a buffered scalar
# over 100,000 calls, with PASS/FAIL against the issue's 1 us floor, and a 1M-element histogram.
# Builds nothing.
#
# Usage: bench/run_summary.sh [BUILD_DIR] [--quick]
#   BUILD_DIR  the build directory holding bench/bench_summary (default: build, at the repo root)
#   --quick    one round instead of five
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build="$(dirname "$here")/build"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    build=$1
    shift
fi
exe="$build/bench/bench_summary"
if [ ! -x "$exe" ]; then
    echo "run_summary.sh: $exe not found; build first: cmake -S . -B build && cmake --build build -j2" >&2
    exit 2
fi
"$exe" "$@"
