#!/bin/sh
# Graph mode against PyTorch 2's torch.compile (Inductor, CPU, default mode) on the same work:
# the seed MLP's training step at batch 64, the TF-tutorial CNN's training step (batch 64), the
# char GPT's training step (batch 16 x 128) and its forward at batch 1 x 128. bench_compile (nabla,
# eager and compiled) and bench_compile_torch.py (PyTorch eager and torch.compile, one workload a
# process) alternate ROUNDS times; the table gives medians, the ratios and PASS/FAIL against the
# floors: compiled nabla at least as fast as torch.compile on each workload, and its first call
# (trace + compile + run) at least 10x faster than torch.compile's, with a cold kernel cache
# against a cold Inductor cache and a warm one against a warm one. Builds nothing.
#
# nabla's first calls: each run, in its process, with an empty kernel cache of its own (cold), then
# again with the cache that call filled (warm). torch.compile's: each in a fresh process (its
# compiler modules imported before the clock); the first round's find an empty Inductor cache
# (TORCHINDUCTOR_CACHE_DIR, one per workload: cold, a single figure), the later rounds' the one
# it filled (warm). Eager figures are information.
#
# Usage: bench/run_compile.sh [BUILD_DIR] [--quick]
#   ROUNDS=n       (environment) rounds (default 3, at least 2: the warm torch.compile figures
#                  come from the rounds after the first); --quick: 2 rounds of short loops
#   TORCH2_PYTHON  the PyTorch 2 interpreter (default .venv-torch2/bin/python, which
#                  scripts/torch2_env.sh makes)
#   TORCH_THREADS=n  PyTorch's threads (torch.set_num_threads); unset: its default
# Threads: both at their defaults (2 each on the 2-core machine; the table says). On a busy
# machine PyTorch's OpenMP threads spin while the cores are taken and its steps run many times
# slower (the table warns when other processes kept the cores busy); TORCH_THREADS=1 is its
# sturdier setting there.
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
    --quick) quick=--quick; rounds=2 ;;
    *) echo "usage: $0 [BUILD_DIR] [--quick]" >&2; exit 2 ;;
    esac
done
[ "$rounds" -ge 2 ] || { echo "run_compile.sh: ROUNDS must be at least 2" >&2; exit 2; }
exe="$build/bench/bench_compile"
[ -x "$exe" ] || { echo "run_compile.sh: $exe not found; build the bench_compile target first" >&2; exit 2; }
py=${TORCH2_PYTHON:-$root/.venv-torch2/bin/python}
if ! [ -x "$py" ] || ! "$py" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)' 2>/dev/null; then
    echo "run_compile.sh: no PyTorch 2 at $py; make its environment with scripts/torch2_env.sh" \
         "(from PyPI, about 4 GB), or point TORCH2_PYTHON at one" >&2
    exit 2
fi
threads=
[ -z "${TORCH_THREADS:-}" ] || threads="--threads $TORCH_THREADS"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
workloads="mlp cnn gpt_train gpt"
i=0
while [ $i -lt "$rounds" ]; do
    echo "run_compile.sh: round $((i + 1)) of $rounds: nabla" >&2
    "$exe" $quick > "$out/nabla.$i"
    for w in $workloads; do
        echo "run_compile.sh: round $((i + 1)) of $rounds: torch.compile $w" >&2
        TORCHINDUCTOR_CACHE_DIR="$out/inductor-$w" "$py" "$here/bench_compile_torch.py" $quick $threads --only $w \
            > "$out/torch.$w.$i" 2> "$out/torch.$w.$i.err" ||
            { cat "$out/torch.$w.$i.err" >&2; exit 1; }
    done
    i=$((i + 1))
done
"$py" - "$out" "$rounds" <<'PY'
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
ws = ("mlp", "cnn", "gpt_train", "gpt")
t = {w: [read(f"{d}/torch.{w}.{i}") for i in range(rounds)] for w in ws}
med = lambda rows, k: statistics.median(r[k] for r in rows)
names = {"mlp": "MLP 784-128-10 step, batch 64, AdamW", "cnn": "TF-tutorial CNN step, batch 64, Adam",
         "gpt_train": "char GPT step, batch 16x128, AdamW+clip", "gpt": "char GPT forward, batch 1x128, eval"}
t0 = t["mlp"][0]
for w in ws:
    if t[w][0].get(f"{w}_cache") != "cold" or any(r.get(f"{w}_cache") != "warm" for r in t[w][1:]):
        sys.exit(f"run_compile.sh: torch.compile {w}: expected a cold Inductor cache in round 1 and a warm one after")
print(f"nabla {int(n[0]['threads'])} threads; PyTorch {t0['torch_version']} {int(t0['threads'])} threads; "
      f"{rounds} rounds, medians")
other_n = statistics.median(r[f"{w}_other_cpu"] for r in n for w in ws if f"{w}_other_cpu" in r)
other_t = statistics.median(r[f"{w}_other_cpu"] for w in ws for r in t[w] if f"{w}_other_cpu" in r)
print(f"cores other processes kept busy during the timed loops (median): {other_n:.2f} (nabla's), {other_t:.2f} (torch's)")
if max(other_n, other_t) > 0.3:
    print("warning: a busy machine; PyTorch's OpenMP threads lose far more to other processes than nabla's pool "
          "(README, A busy machine): take the figures on a quiet one")
print()
print(f"{'step time, ms':<42}{'nabla':>8}{'nabla':>10}{'torch':>9}{'torch':>10}{'ratio':>8}{'floor':>9}  result")
print(f"{'':<42}{'eager':>8}{'compiled':>10}{'eager':>9}{'.compile':>10}")
fails = []
for w in ws:
    ne, nc = med(n, f"{w}_eager_ms"), med(n, f"{w}_compiled_ms")
    te, tc = med(t[w], f"{w}_eager_ms"), med(t[w], f"{w}_compiled_ms")
    ok = tc / nc >= 1.0
    if not ok: fails.append(w)
    print(f"{names[w]:<42}{ne:>8.3f}{nc:>10.3f}{te:>9.3f}{tc:>10.3f}{tc / nc:>7.2f}x{'>= 1.0x':>9}  {'PASS' if ok else 'FAIL'}")
print("ratio: torch.compile's time / compiled nabla's (above 1: nabla faster)")
if "mlp_flush_eager_ms" in n[0]:
    fe, fc = med(n, "mlp_flush_eager_ms"), med(n, "mlp_flush_compiled_ms")
    print(f"MLP step with denormals flushed (nb_set_flush_denormal): nabla eager {fe:.3f} ms, compiled {fc:.3f} ms")
print()
print(f"{'first call (trace + compile + run), s':<42}{'nabla':>10}{'torch.compile':>15}{'ratio':>9}{'floor':>9}  result")
for w in ws:
    for cache in ("cold", "warm"):
        nf = med(n, f"{w}_first_call_{cache}_s")
        rows = t[w][:1] if cache == "cold" else t[w][1:]
        tf = med(rows, f"{w}_first_call_s")
        ok = tf / nf >= 10
        if not ok: fails.append(f"{w} first call ({cache})")
        label = f"{names[w].split(',')[0]}, {cache} cache"
        print(f"{label:<42}{nf:>10.4f}{tf:>15.3f}{tf / nf:>8.0f}x{'>= 10x':>9}  {'PASS' if ok else 'FAIL'}")
print("ratio: torch.compile's first call / nabla's; torch.compile's cold figure is round 1's alone")
print()
for w in ws:
    r = n[0]
    print(f"{w}: nabla traced {int(r[w + '_ops_traced'])} ops, runs {int(r[w + '_ops_after'])}; "
          f"{int(r[w + '_kernels'])} fused kernels ({int(r[w + '_kernels_native'])} compiled C); "
          f"arena {int(r[w + '_arena_bytes'])} bytes for {int(r[w + '_unplanned_bytes'])}; "
          f"torch.compile: {int(t[w][-1][w + '_graphs'])} graph(s), second call "
          f"{med(t[w], w + '_second_call_s'):.3f} s, compiler import {med(t[w], w + '_import_s'):.1f} s before the clock")
    if w + "_note" in r: print(f"  note: {r[w + '_note']}")
print("floors missed: " + (", ".join(fails) if fails else "none"))
PY
