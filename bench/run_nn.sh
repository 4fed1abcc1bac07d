#!/bin/sh
# Runs the training benchmarks, nabla (bench_nn) and PyTorch (bench_nn_torch.py), and prints both
# figures with the nabla/PyTorch ratio and PASS/FAIL against each floor (bench/report_nn.py).
# Builds nothing. A full run takes about 2-4 minutes on 2 cores.
#
# Usage: bench/run_nn.sh [BUILD_DIR] [--quick] [mlp] [cnn] [gpt] [cnn_bf16] [gpt_bf16]
#   BUILD_DIR  the build directory holding bench/bench_nn (default: build, at the repo root)
#   --quick    short loops, one round (a smoke test; the figures are not to be trusted)
#   mlp cnn gpt  only these sections (default: these three)
#   cnn_bf16 gpt_bf16  the CNN and the GPT under bf16 autocast, beside torch.autocast (run them
#                  with cnn and gpt to see bf16 beside f32 too)
#   ROUNDS=n       (environment) alternate n nabla and n PyTorch runs of each section (default 3);
#                  each figure is the median over the rounds of each run's median, so a burst of
#                  load from elsewhere does not fall on one side only
#   TORCH_THREADS=n  (environment) torch.set_num_threads(n) instead of PyTorch's default
#   NABLA_NUM_THREADS=n  (environment) nabla's thread count instead of its default (the cores)
# Each section runs in its own process on each side, so its peak RSS (VmHWM) is its own.
# Exits 0 even when a floor is missed; non-zero only when a benchmark could not run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build="$root/build"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ] && [ "$1" != mlp ] && [ "$1" != cnn ] && [ "$1" != gpt ] &&
   [ "$1" != cnn_bf16 ] && [ "$1" != gpt_bf16 ]; then
    build=$1
    shift
fi
rounds=${ROUNDS:-3}
quick=
sections=
for arg in "$@"; do
    case $arg in
    --quick) quick=--quick; rounds=1 ;;
    mlp | cnn | gpt | cnn_bf16 | gpt_bf16) sections="$sections $arg" ;;
    *) echo "usage: $0 [BUILD_DIR] [--quick] [mlp] [cnn] [gpt] [cnn_bf16] [gpt_bf16]" >&2; exit 2 ;;
    esac
done
[ -n "$sections" ] || sections="mlp cnn gpt"
python=${PYTHON:-/usr/bin/python3}
torch_threads=
[ -z "${TORCH_THREADS:-}" ] || torch_threads="--threads $TORCH_THREADS"
exe="$build/bench/bench_nn"
if [ ! -x "$exe" ]; then
    echo "run_nn.sh: $exe not found; build first: cmake -S . -B build && cmake --build build -j2" >&2
    exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

load_before=$(uptime | sed 's/.*load average: *//')
i=1
while [ "$i" -le "$rounds" ]; do
    for s in $sections; do
        echo "== round $i/$rounds, $s: nabla" >&2
        "$exe" $quick "$s" > "$tmp/nabla.$s.$i"
        echo "== round $i/$rounds, $s: PyTorch" >&2
        # shellcheck disable=SC2086
        "$python" "$here/bench_nn_torch.py" $quick $torch_threads "$s" > "$tmp/torch.$s.$i"
    done
    i=$((i + 1))
done
load_after=$(uptime | sed 's/.*load average: *//')
echo
nb_note=default
[ -z "${NABLA_NUM_THREADS:-}" ] || nb_note="NABLA_NUM_THREADS=$NABLA_NUM_THREADS"
th_note=default
[ -z "${TORCH_THREADS:-}" ] || th_note="TORCH_THREADS=$TORCH_THREADS"
note="thread settings: nabla $nb_note, PyTorch $th_note"
"$python" "$here/report_nn.py" --rounds "$rounds" --note "$note" --load "1/5/15-min load average $load_before before, $load_after after (nproc $(nproc))" \
    "$tmp"/nabla.* -- "$tmp"/torch.*
