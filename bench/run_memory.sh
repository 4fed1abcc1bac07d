#!/bin/sh
# Peak memory of training: the MLP, the CNN and the char GPT trained eagerly and compiled
# (bench_memory) beside PyTorch's eager training of the same models (bench_memory_torch.py), each
# run in its own process so its VmHWM is its own. Prints the peaks (median over the rounds, the
# sides alternating) and the floor: a compiled run peaks at most where the eager one does.
# Builds nothing.
#
# Usage: bench/run_memory.sh [BUILD_DIR] [mlp] [cnn] [gpt]
#   BUILD_DIR  the build directory holding bench/bench_memory (default: build, at the repo root)
#   ROUNDS=n   (environment) runs of each side (default 3)
#   STEPS=n    (environment) training steps of every run (default: 200 for the MLP, 20 for the others)
# Exits 0 even when the floor is missed; non-zero only when a benchmark could not run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build="$root/build"
if [ $# -gt 0 ] && [ "$1" != mlp ] && [ "$1" != cnn ] && [ "$1" != gpt ]; then
    build=$1
    shift
fi
models=
for arg in "$@"; do
    case $arg in
    mlp | cnn | gpt) models="$models $arg" ;;
    *) echo "usage: $0 [BUILD_DIR] [mlp] [cnn] [gpt]" >&2; exit 2 ;;
    esac
done
[ -n "$models" ] || models="mlp cnn gpt"
rounds=${ROUNDS:-3}
steps=${STEPS:-}
python=${PYTHON:-/usr/bin/python3}
exe="$build/bench/bench_memory"
if [ ! -x "$exe" ]; then
    echo "run_memory.sh: $exe not found; build first: cmake --build $build --target bench_memory" >&2
    exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
torch=yes
"$python" -c "import torch" 2>/dev/null || { torch=; echo "run_memory.sh: no torch for $python; PyTorch's column is left out" >&2; }
i=1
while [ "$i" -le "$rounds" ]; do
    for m in $models; do
        echo "== round $i/$rounds, $m" >&2
        # shellcheck disable=SC2086
        "$exe" "$m" eager $steps > "$tmp/$m.eager.$i"
        # shellcheck disable=SC2086
        "$exe" "$m" compiled $steps > "$tmp/$m.compiled.$i"
        # shellcheck disable=SC2086
        [ -z "$torch" ] || "$python" "$here/bench_memory_torch.py" "$m" $steps > "$tmp/$m.torch.$i"
    done
    i=$((i + 1))
done
"$python" - "$tmp" "$rounds" $models <<'PY'
import glob, statistics, sys
d, rounds, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def runs(m, mode):
    out = []
    for path in sorted(glob.glob(f"{d}/{m}.{mode}.*")):
        r = {}
        for line in open(path):
            k, _, v = line.strip().partition(" ")
            r[k] = v
        out.append(r)
    return out
def med(rs, key):
    v = [float(r[key]) for r in rs if key in r and float(r[key]) >= 0]
    return statistics.median(v) if v else None
def mib(kib):
    return "%.1f" % (kib / 1024) if kib is not None else "n/a"
print(f"Peak resident memory (VmHWM, MiB), median of {rounds} run(s) per column; every run trains in its own process.")
print("whole run: the process's peak; steps 2..N: the peak after the first step (for a compiled run, the")
print("first step is the trace, which runs the step eagerly; the later ones are replays of the graph).")
print()
hdr = "%-5s %6s | %11s %11s %11s | %11s %11s %11s | %s"
print(hdr % ("model", "steps", "eager", "compiled", "PyTorch", "eager", "compiled", "PyTorch", "floor: compiled <= eager"))
print(hdr % ("", "", "whole run", "whole run", "whole run", "steps 2..N", "steps 2..N", "steps 2..N", "(whole run)"))
verdicts = []
for m in models:
    e, c, t = runs(m, "eager"), runs(m, "compiled"), runs(m, "torch")
    ew, cw, tw = med(e, "peak_rss_kib"), med(c, "peak_rss_kib"), med(t, "peak_rss_kib")
    el, cl, tl = med(e, "later_steps_peak_kib"), med(c, "later_steps_peak_kib"), med(t, "later_steps_peak_kib")
    ok = ew is not None and cw is not None and cw <= ew
    verdict = ("PASS" if ok else "FAIL") + (" (%+.1f MiB, %+.1f%%)" % ((cw - ew) / 1024, 100 * (cw - ew) / ew) if ew and cw else "")
    verdicts.append(ok)
    print(hdr % (m, e[0]["steps"] if e else "?", mib(ew), mib(cw), mib(tw), mib(el), mib(cl), mib(tl), verdict))
print()
print("%-5s | %-12s %-12s %-12s %-12s | %s" % ("model", "nabla start", "torch start", "arena", "unplanned", "compiled graph"))
for m in models:
    e, c, t = runs(m, "eager"), runs(m, "compiled"), runs(m, "torch")
    print("%-5s | %-12s %-12s %-12s %-12s | the planned buffer, and what its values would take unplanned (MiB)" % (
        m, mib(med(e, "start_rss_kib")), mib(med(t, "start_rss_kib")), mib(med(c, "arena_kib")), mib(med(c, "unplanned_kib"))))
print()
print("start: resident memory when the program starts (libraries; Python and torch for PyTorch). PyTorch is eager")
print("(Debian's torch has no torch.compile). Same models, optimizers and synthetic batches on every side.")
PY
