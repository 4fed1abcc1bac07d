#!/bin/sh
# Runs the core benchmarks, nabla (bench_core) and PyTorch (bench_core_torch.py), and prints both
# figures with the nabla/PyTorch ratio and PASS/FAIL against each floor (bench/report_core.py).
# Builds nothing.
#
# Usage: bench/run_core.sh [BUILD_DIR] [--quick] [a] [b] [c]
#   BUILD_DIR  the build directory holding bench/bench_core (default: build, at the repo root;
#              one literally named a, b or c must be given as ./a etc.)
#   --quick    short loops, one round (a smoke test; the figures are not to be trusted)
#   a b c      only these sections (default: all)
#   ROUNDS=n   (environment) alternate n nabla and n PyTorch runs (default 5); each figure is the
#              median over the rounds of each run's median, so a burst of load from elsewhere on
#              a shared machine does not fall on one side only.
# Exits 0 even when a floor is missed; non-zero only when a benchmark could not run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build="$root/build"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ] && [ "$1" != a ] && [ "$1" != b ] && [ "$1" != c ]; then
    build=$1
    shift
fi
rounds=${ROUNDS:-5}
for arg in "$@"; do [ "$arg" = --quick ] && rounds=1; done
python=${PYTHON:-/usr/bin/python3}
exe="$build/bench/bench_core"
if [ ! -x "$exe" ]; then
    echo "run_core.sh: $exe not found; build first: cmake -S . -B build && cmake --build build -j2" >&2
    exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

i=1
while [ "$i" -le "$rounds" ]; do
    echo "== round $i/$rounds: nabla: $exe $*" >&2
    # The (c) reference, cblas_sgemm called directly, runs on OpenBLAS's OpenMP team, whose idle
    # threads spin for a while after each call; nabla has no OpenMP threads (its pool's workers
    # sleep), so in the interleaved loops that spinning would land on nabla's turns. Passive
    # waiting keeps the two sides' threads from each other (the reference's own figures moved by
    # less than the noise with it). OMP_WAIT_POLICY=active in the environment restores it.
    OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}" "$exe" "$@" > "$tmp/nabla.$i"
    echo "== round $i/$rounds: PyTorch: $python $here/bench_core_torch.py $*" >&2
    "$python" "$here/bench_core_torch.py" "$@" > "$tmp/torch.$i"
    i=$((i + 1))
done
echo
"$python" "$here/report_core.py" --rounds "$rounds" "$tmp"/nabla.* -- "$tmp"/torch.*
