#!/bin/sh
# ONNX models on nabla beside ONNX Runtime: the TF-tutorial CNN exported by nabla (1x28x28) and a
# ResNet-18 written as torch.onnx.export writes one (bench/onnx_resnet18.py, 3x224x224), each
# run by bench_onnx (op by op, and through graph mode) and bench_onnx_ort.py with the same thread
# count, alternating ROUNDS times. The table gives medians: latency at batch 1, throughput at
# batch 64, load time, and the ratio to ONNX Runtime with PASS/FAIL against the floor: nabla no
# slower than 1.5x ONNX Runtime (its better mode). Builds nothing.
#
# Usage: bench/run_onnx.sh [BUILD_DIR] [--quick]
#   ROUNDS=n      (environment) rounds (default 3); --quick: 1 round of short loops
#   THREADS=n     threads of both (default: nabla's default, the cores)
#   ONNX_PYTHON   the interpreter with onnxruntime (default: scripts/onnx_env.sh's)
# Exits 0 even when a floor is missed; non-zero when a benchmark could not run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build="$root/build"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then build=$1; shift; fi
quick=
rounds=${ROUNDS:-3}
for arg in "$@"; do
    case $arg in
    --quick) quick=--quick; rounds=1 ;;
    *) echo "usage: $0 [BUILD_DIR] [--quick]" >&2; exit 2 ;;
    esac
done
exe="$build/bench/bench_onnx"
[ -x "$exe" ] || { echo "run_onnx.sh: $exe not found; build the bench_onnx target first" >&2; exit 2; }
py=${ONNX_PYTHON:-$("$root/scripts/onnx_env.sh")}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[ -z "${THREADS:-}" ] || export NABLA_NUM_THREADS="$THREADS"
threads=$("$exe" --threads)
"$exe" --export-cnn "$out/cnn.onnx"
"$py" "$here/onnx_resnet18.py" "$out/resnet18.onnx"
i=0
while [ $i -lt "$rounds" ]; do
    for m in cnn:1,28,28 resnet18:3,224,224; do
        name=${m%%:*} shape=${m#*:}
        echo "run_onnx.sh: round $((i + 1)) of $rounds: $name nabla" >&2
        "$exe" "$out/$name.onnx" "$shape" $quick > "$out/nabla.$name.$i"
        echo "run_onnx.sh: round $((i + 1)) of $rounds: $name onnxruntime" >&2
        "$py" "$here/bench_onnx_ort.py" "$out/$name.onnx" "$shape" --threads "$threads" $quick > "$out/ort.$name.$i"
    done
    i=$((i + 1))
done
"$py" - "$out" "$rounds" "$threads" <<'PY'
import statistics, sys
d, rounds, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def read(path):
    r = {}
    for line in open(path):
        k, _, v = line.strip().partition(" ")
        r[k] = float(v)
    return r
print(f"ONNX models, nabla beside ONNX Runtime, {threads} threads each, medians of {rounds} rounds")
print(f"{'model':9} {'measure':22} {'nabla eager':>12} {'nabla graph':>12} {'onnxruntime':>12} {'ratio':>7}  floor")
for name in ("cnn", "resnet18"):
    n = [read(f"{d}/nabla.{name}.{i}") for i in range(rounds)]
    o = [read(f"{d}/ort.{name}.{i}") for i in range(rounds)]
    med = lambda rows, k: statistics.median(r[k] for r in rows)
    for key, label, lower in (("b1_ms", "batch 1 latency, ms", True), ("b64_img_s", "batch 64, images/s", False),
                              ("load_s", "load, s", True)):
        e, g, t = med(n, "eager_" + key), med(n, "compiled_" + key), med(o, "ort_" + key)
        best = min(e, g) if lower else max(e, g)
        ratio = t / best if lower else best / t  # > 1: nabla faster
        floor = "" if key == "load_s" else ("PASS" if ratio >= 1 / 1.5 else "FAIL") + " (>= 0.67)"
        print(f"{name:9} {label:22} {e:12.4g} {g:12.4g} {t:12.4g} {ratio:6.2f}x  {floor}")
print("ratio: ONNX Runtime's time over nabla's (throughput: nabla's over ONNX Runtime's); above 1, nabla is faster")
PY
