#!/bin/sh
# Saves and loads a ~100 MB state dict with nabla (bench_io: safetensors, atomic + fsync, mmap
# load) and with PyTorch (bench_io_torch.py: torch.save/torch.load) in one run; prints both and
# the nabla/PyTorch ratio (below 1: nabla is faster). Builds nothing.
# Usage: bench/run_io.sh [BUILD_DIR] [DIR]   (defaults: build at the repo root, /tmp)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$(dirname "$here")/build}
dir=${2:-/tmp}
python=${PYTHON:-/usr/bin/python3}
exe="$build/bench/bench_io"
if [ ! -x "$exe" ]; then
    echo "run_io.sh: $exe not found; build first: cmake -S . -B build && cmake --build build -j2" >&2
    exit 2
fi
nabla=$("$exe" "$dir")
torch=$("$python" "$here/bench_io_torch.py" "$dir")
get() { echo "$1" | awk -v k="$2" '$1 == k { print $2 }'; }
echo "state dict: $(get "$nabla" state_dict_mb) MB (6 x Linear(2048, 2048), f32)"
printf '%-28s %10s %10s %8s\n' "" "nabla ms" "torch ms" "ratio"
row() { printf '%-28s %10s %10s %8s\n' "$1" "$2" "$3" "$(awk -v a="$2" -v b="$3" 'BEGIN { printf "%.2f", a / b }')"; }
row "save (torch: no fsync)" "$(get "$nabla" save_ms)" "$(get "$torch" save_ms)"
row "save (both fsync)" "$(get "$nabla" save_ms)" "$(get "$torch" save_fsync_ms)"
row "load into a built network" "$(get "$nabla" load_ms)" "$(get "$torch" load_ms)"
