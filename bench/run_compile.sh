#!/bin/sh
# Runs the graph-mode benchmarks: bench_compile (nabla eager against compiled: the seed MLP's
# training step at batch 64, the char GPT's forward at batch 1, and the time of each first
# call with a cold and a warm kernel cache) and PyTorch's eager MLP step (bench_nn_torch.py mlp,
# on the same 200 real Fashion-MNIST batches),
# then prints the figures, the ratios and PASS/FAIL against the issue's floors. Builds nothing.
#
# Usage: bench/run_compile.sh [BUILD_DIR] [--quick]
#   ROUNDS=n  (environment) runs of each side, alternating (default 3); figures are medians
# Exits 0 even when a floor is missed; non-zero only when a benchmark could not run.
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
exe="$build/bench/bench_compile"
[ -x "$exe" ] || { echo "run_compile.sh: $exe not found; build the bench_compile target first" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
i=0
while [ $i -lt "$rounds" ]; do
    "$exe" $quick > "$out/nabla.$i"
    NABLA_BENCH_REAL_DATA=1 ${PYTHON:-/usr/bin/python3} "$here/bench_nn_torch.py" $quick mlp > "$out/torch.$i"
    i=$((i + 1))
done
${PYTHON:-/usr/bin/python3} - "$out" "$rounds" <<'PY'
import statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def read(path):
    r = {}
    for line in open(path):
        k, _, v = line.strip().partition(" ")
        try: r[k] = float(v)
        except ValueError: r[k] = v
    return r
n = [read(f"{d}/nabla.{i}") for i in range(rounds)]
t = [read(f"{d}/torch.{i}") for i in range(rounds)]
med = lambda rows, k: statistics.median(r[k] for r in rows)
me, mc, tt = med(n, "mlp_eager_ms"), med(n, "mlp_compiled_ms"), med(t, "mlp_step_ms")
ge, gc = med(n, "gpt_eager_ms"), med(n, "gpt_compiled_ms")
print(f"threads: nabla {int(n[0]['threads'])}; PyTorch at its default; {rounds} round(s), medians")
print(f"{'benchmark':<44}{'figure':>14}{'floor':>12}  result")
def row(name, fig, floor, ok):
    print(f"{name:<44}{fig:>14}{floor:>12}  {'PASS' if ok else 'FAIL'}")
print(f"MLP step, batch 64: eager {me:.3f} ms, compiled {mc:.3f} ms, PyTorch eager {tt:.3f} ms")
row("  compiled speed-up over eager nabla", f"{me / mc:.2f}x", ">= 1.3x", me / mc >= 1.3)
print(f"  {'compiled speed-up over PyTorch eager':<42}{tt / mc:>14.2f}x")
if "mlp_flush_eager_ms" in n[0]:
    fe, fc = med(n, "mlp_flush_eager_ms"), med(n, "mlp_flush_compiled_ms")
    print(f"  with denormals flushed (nb_set_flush_denormal): eager {fe:.3f} ms, compiled {fc:.3f} ms ({fe / fc:.2f}x)")
print(f"GPT forward, batch 1: eager {ge:.3f} ms, compiled {gc:.3f} ms")
row("  compiled speed-up over eager nabla", f"{ge / gc:.2f}x", ">= 1.3x", ge / gc >= 1.3)
for m in ("mlp", "gpt"):
    cold, warm = med(n, f"{m}_first_call_cold_s"), med(n, f"{m}_first_call_warm_s")
    row(f"{m} first call, warm kernel cache", f"{warm:.3f} s", "< 1 s", warm < 1)
    row(f"{m} first call, cold kernel cache", f"{cold:.3f} s", "< 5 s", cold < 5)
    print(f"  ops traced {int(n[0][m + '_ops_traced'])} -> run {int(n[0][m + '_ops_after'])}; "
          f"{int(n[0][m + '_kernels'])} fused kernels ({int(n[0][m + '_kernels_native'])} compiled C); "
          f"arena {int(n[0][m + '_arena_bytes'])} bytes for {int(n[0][m + '_unplanned_bytes'])}")
    if m + "_note" in n[0]: print(f"  note: {n[0][m + '_note']}")
PY
