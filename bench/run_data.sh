#!/bin/sh
# Runs the input-pipeline benchmarks, nabla (bench_data) and PyTorch (bench_data_torch.py), prints
# both figures side by side with the nabla/PyTorch ratio, and PASS/FAIL against the issue's floors:
# (a) loading all 70,000 Fashion-MNIST images is faster than PyTorch + NumPy; (b) with 2 workers the
# loop waits for data less than 10% of its step time. Builds nothing.
# Usage: bench/run_data.sh [BUILD_DIR] [--quick]   (BUILD_DIR defaults to build)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build="$(dirname "$here")/build"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then build=$1; shift; fi
python=${PYTHON:-/usr/bin/python3}
exe="$build/bench/bench_data"
[ -x "$exe" ] || { echo "run_data.sh: $exe not found; build first" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
"$exe" "$@" > "$tmp/nabla"
"$python" "$here/bench_data_torch.py" "$@" > "$tmp/torch"
"$python" - "$tmp/nabla" "$tmp/torch" <<'PY'
import sys
def read(p):
    return {k: float(v) for k, v in (line.split() for line in open(p) if line.strip())}
a, b = read(sys.argv[1]), read(sys.argv[2])
print(f"{'figure':36s} {'nabla':>10s} {'PyTorch':>10s} {'ratio':>7s}")
for k in a:
    r = a[k] / b[k] if b.get(k) else float('nan')
    print(f"{k:36s} {a[k]:10.4f} {b.get(k, float('nan')):10.4f} {r:7.3f}")
ok_a = a["a_load_s"] < b["a_load_s"] and a["a_load_iterate_s"] < b["a_load_iterate_s"]
ok_b = a["b_workers2_wait_fraction"] < 0.10
print(f"(a) load 70,000 images faster than PyTorch + NumPy: {'PASS' if ok_a else 'FAIL'}")
print(f"(b) wait < 10% of step time with 2 workers: {'PASS' if ok_b else 'FAIL'} "
      f"({100 * a['b_workers2_wait_fraction']:.1f}%; PyTorch {100 * b['b_workers2_wait_fraction']:.1f}%)")
PY
