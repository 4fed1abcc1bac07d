#!/bin/sh
# Runs the distributed-training benchmark, nabla (bench_dist under mpirun) and PyTorch DDP on gloo
# (bench_dist_torch.py), and prints markdown tables with the nabla/PyTorch ratio and PASS/FAIL
# against the floors of issue 14. Builds nothing. A full run takes about 4-5 minutes on 2 cores.
#
# Usage: bench/run_dist.sh [BUILD_DIR] [--quick] [mlp] [cnn] [gpt]
#   BUILD_DIR  the build directory holding bench/bench_dist (default: build, at the repo root;
#              cmake --build BUILD_DIR --target bench_dist)
#   --quick    short loops, one round (a smoke test; the figures are not to be trusted)
#   mlp cnn    throughput of that model with 1 and 2 ranks (one thread each), and with 2 ranks the
#              share of the gradient allreduce hidden behind backward
#   gpt        peak memory per rank of the char GPT on 2 ranks under DDP, ZeRO-1 and full sharding
#              (default: all three sections)
#   ROUNDS=n   (environment) alternate n nabla and n PyTorch runs of each throughput configuration
#              (default 3); each figure is the median over the rounds of each run's median window,
#              so a burst of load from elsewhere falls on both sides
#   PYTHON=... (environment) the Python with torch (default /usr/bin/python3, Debian's torch 1.13;
#              e.g. .venv-torch2/bin/python from scripts/torch2_env.sh)
# One rank is one plain process on each side (no DDP, no MPI or process group); two ranks are
# `mpirun -n 2` (Open MPI, shared memory: OMPI_MCA_btl=self,vader, --bind-to none) for nabla and two
# processes on gloo for PyTorch. Every rank runs one thread: NABLA_NUM_THREADS=1,
# torch.set_num_threads(1), OMP_NUM_THREADS=1. Each configuration runs in its own process(es), so
# a peak RSS (VmHWM) is that configuration's own.
# Graph mode: nabla's step also runs compiled (bench_dist --compiled: nb_compile over the DDP step)
# on 1 and 2 ranks.
# Floors (issue 14), per model: nabla's 2-rank throughput >= PyTorch's 2-rank throughput, and
# >= 1.6 x nabla's 1-rank throughput (eager, and compiled against compiled); compiled DDP on 2
# ranks >= eager DDP on 2 ranks.
# Exits 0 even when a floor is missed; non-zero only when a benchmark could not run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build="$root/build"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ] && [ "$1" != mlp ] && [ "$1" != cnn ] && [ "$1" != gpt ]; then
    build=$1
    shift
fi
rounds=${ROUNDS:-3}
quick=
sections=
for arg in "$@"; do
    case $arg in
    --quick) quick=--quick; rounds=1 ;;
    mlp | cnn | gpt) sections="$sections $arg" ;;
    *) echo "usage: $0 [BUILD_DIR] [--quick] [mlp] [cnn] [gpt]" >&2; exit 2 ;;
    esac
done
[ -n "$sections" ] || sections="mlp cnn gpt"
python=${PYTHON:-/usr/bin/python3}
exe="$build/bench/bench_dist"
if [ ! -x "$exe" ]; then
    echo "run_dist.sh: $exe not found; build first: cmake -S . -B build && cmake --build build -j2 --target bench_dist" >&2
    exit 2
fi
command -v mpirun > /dev/null || { echo "run_dist.sh: mpirun not found (apt-get install openmpi-bin)" >&2; exit 2; }
"$python" -c "import torch.distributed" 2> /dev/null || { echo "run_dist.sh: $python has no torch.distributed" >&2; exit 2; }

export NABLA_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export OMPI_MCA_btl=self,vader
root_flag=
[ "$(id -u)" != 0 ] || root_flag=--allow-run-as-root
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
failed=0

# run OUTFILE COMMAND...: runs a benchmark with a time limit; a failure is reported and counted
run() {
    out=$1
    shift
    if ! timeout 300 "$@" > "$out" 2> "$out.err"; then
        echo "run_dist.sh: failed: $* (stderr follows)" >&2
        tail -n 20 "$out.err" >&2
        mv "$out" "$out.failed"
        failed=$((failed + 1))
    fi
}
# $quick and the optional mode are left unquoted on purpose: empty, they are no argument
# shellcheck disable=SC2086
nabla1() { run "$1" "$exe" $quick "$2" ${3:-}; }
# shellcheck disable=SC2086
nabla2() { run "$1" mpirun $root_flag --bind-to none --oversubscribe -n 2 -x NABLA_NUM_THREADS -x OMP_NUM_THREADS \
    -x OPENBLAS_NUM_THREADS "$exe" $quick "$2" ${3:-}; }
# shellcheck disable=SC2086
torchn() { run "$1" "$python" "$here/bench_dist_torch.py" $quick --nproc "$2" "$3" ${4:-}; }

load_before=$(uptime | sed 's/.*load average: *//')
t_start=$(date +%s)
i=1
while [ "$i" -le "$rounds" ]; do
    for s in $sections; do
        [ "$s" != gpt ] || continue
        echo "== round $i/$rounds, $s: nabla 1 rank, PyTorch 1 rank, nabla 2 ranks, PyTorch 2 ranks, nabla compiled 1 and 2 ranks" >&2
        nabla1 "$tmp/nabla.$s.1.$i" "$s"
        torchn "$tmp/torch.$s.1.$i" 1 "$s"
        nabla2 "$tmp/nabla.$s.2.$i" "$s"
        torchn "$tmp/torch.$s.2.$i" 2 "$s"
        nabla1 "$tmp/graph.$s.1.$i" --compiled "$s"
        nabla2 "$tmp/graph.$s.2.$i" --compiled "$s"
    done
    i=$((i + 1))
done
case " $sections " in
*" gpt "*)
    for m in ddp zero1 full; do
        echo "== gpt $m, 2 ranks: nabla, PyTorch" >&2
        nabla2 "$tmp/nabla.gpt.$m" gpt "$m"
        torchn "$tmp/torch.gpt.$m" 2 gpt "$m"
    done
    ;;
esac
load_after=$(uptime | sed 's/.*load average: *//')
t_end=$(date +%s)

cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -n 1)
if grep -qw avx512f /proc/cpuinfo; then avx512=yes; else avx512=no; fi
echo
echo "CPU: $cpu ($(getconf _NPROCESSORS_ONLN) cores online; avx512f: $avx512)"
echo "1/5/15-min load average: $load_before before, $load_after after; the run took $((t_end - t_start)) s"
"$python" - "$tmp" "$rounds" "$sections" << 'EOF'
import glob
import os
import statistics
import sys

tmp, rounds, sections = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()


def read(path):
    d = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                k, _, v = line.strip().partition(" ")
                if k:
                    d[k] = v
    return d


def runs(side, model, ranks):
    return [read(p) for p in sorted(glob.glob(f"{tmp}/{side}.{model}.{ranks}.*")) if not p.endswith((".err", ".failed"))]


def med(rs, key):
    v = [float(r[key]) for r in rs if key in r]
    return statistics.median(v) if v else None


def f(x, fmt="%.0f"):
    return "n/a" if x is None else fmt % x


def ratio(a, b):
    return "n/a" if a is None or b is None or b == 0 else "%.2f" % (a / b)


versions = {}
for side in ("nabla", "torch"):
    for p in glob.glob(f"{tmp}/{side}.*"):
        d = read(p)
        for k in ("nabla_version", "torch_version", "dist_backend"):
            if k in d and d[k] != "none":
                versions.setdefault(side, {})[k] = d[k]
nv, tv = versions.get("nabla", {}), versions.get("torch", {})
print("nabla %s on %s; PyTorch %s on %s" % (nv.get("nabla_version", "?"), nv.get("dist_backend", "?"),
                                            tv.get("torch_version", "?"), tv.get("dist_backend", "gloo")))
names = {"mlp": "MLP 784-128-10", "cnn": "CNN (bench_nn.c's)"}
floors = []


def floor(model, what, a, than, b, factor):
    """Files a PASS/FAIL line: throughput a (what) >= factor x b (than)."""
    goal = than if factor == 1 else f"{factor} x {than}"
    if a is None or b is None:
        floors.append(f"FAIL {model}: {what} >= {goal}: not measured")
    else:
        floors.append(f"{'PASS' if a >= factor * b else 'FAIL'} {model}: {what} {a:.0f} >= {goal} {b:.0f}"
                      f"{'' if factor == 1 else f' = {factor * b:.0f}'} samples/s ({a / b:.2f}x)")


tp = [s for s in sections if s in names]
if tp:
    print()
    print(f"### Throughput: global samples/s, global batch 64 (64/ranks per rank), SGD momentum, one thread per rank; "
          f"median of {rounds} round(s)")
    print()
    print("| model | ranks | nabla | PyTorch | nabla/PyTorch | nabla 2r/1r | PyTorch 2r/1r | other load (cores) nabla / PyTorch |")
    print("|---|---|---|---|---|---|---|---|")
    for s in tp:
        fig = {}
        for ranks in (1, 2):
            for side in ("nabla", "torch"):
                rs = runs(side, s, ranks)
                fig[side, ranks] = med(rs, f"{s}_samples_per_s")
                fig[side, ranks, "other"] = med(rs, f"{s}_other_cpu")
        for ranks in (1, 2):
            sc_n = ratio(fig["nabla", 2], fig["nabla", 1]) if ranks == 2 else ""
            sc_t = ratio(fig["torch", 2], fig["torch", 1]) if ranks == 2 else ""
            print(f"| {names[s]} | {ranks} | {f(fig['nabla', ranks])} | {f(fig['torch', ranks])} | "
                  f"{ratio(fig['nabla', ranks], fig['torch', ranks])} | {sc_n} | {sc_t} | "
                  f"{f(fig['nabla', ranks, 'other'], '%.2f')} / {f(fig['torch', ranks, 'other'], '%.2f')} |")
        n1, n2, t2 = fig["nabla", 1], fig["nabla", 2], fig["torch", 2]
        floor(s, "nabla 2-rank", n2, "PyTorch 2-rank", t2, 1)
        floor(s, "nabla 2-rank", n2, "nabla 1-rank", n1, 1.6)

    print()
    print(f"### Graph mode: the same step under nb_compile (DDP's reduction recorded in the graph); global samples/s, "
          f"median of {rounds} round(s)")
    print()
    print("| model | ranks | nabla eager | nabla compiled | compiled/eager | compiled 2r/1r |")
    print("|---|---|---|---|---|---|")
    for s in tp:
        e1, e2 = med(runs("nabla", s, 1), f"{s}_samples_per_s"), med(runs("nabla", s, 2), f"{s}_samples_per_s")
        c1, c2 = med(runs("graph", s, 1), f"{s}_samples_per_s"), med(runs("graph", s, 2), f"{s}_samples_per_s")
        print(f"| {names[s]} | 1 | {f(e1)} | {f(c1)} | {ratio(c1, e1)} | |")
        print(f"| {names[s]} | 2 | {f(e2)} | {f(c2)} | {ratio(c2, e2)} | {ratio(c2, c1)} |")
        floor(s, "compiled DDP 2-rank", c2, "eager DDP 2-rank", e2, 1)
        floor(s, "compiled 2-rank", c2, "compiled 1-rank", c1, 1.6)

    print()
    print("### Gradient allreduce hidden behind backward, 2 ranks (median over rounds)")
    print()
    print("| model | side | buckets | gradient MB | allreduce alone ms | left after backward ms | hidden share |")
    print("|---|---|---|---|---|---|---|")
    for s in tp:
        for side, label, key in (("nabla", "nabla (DDP wait_seconds per backward)", "wait_ms"),
                                 ("torch", "PyTorch (backward DDP - no_sync)", "exposed_ms")):
            rs = runs(side, s, 2)
            gb = med(rs, f"{s}_grad_bytes")
            print(f"| {names[s]} | {label} | {f(med(rs, f'{s}_buckets'))} | {f(None if gb is None else gb / 1e6, '%.2f')} | "
                  f"{f(med(rs, f'{s}_allreduce_alone_ms'), '%.3f')} | {f(med(rs, f'{s}_{key}'), '%.3f')} | "
                  f"{f(med(rs, f'{s}_hidden_share'), '%.2f')} |")
        ew = med(runs("nabla", s, 2), f"{s}_buckets_early_per_backward")
        mx = med(runs("nabla", s, 2), f"{s}_wait_ms_max_rank")
        if ew is not None:
            print(f"|  | nabla: buckets started during backward per backward {ew:.2f}; slowest rank's wait {f(mx, '%.3f')} ms | | | | | |")

if "gpt" in sections:
    g = {(side, m): read(f"{tmp}/{side}.gpt.{m}") for side in ("nabla", "torch") for m in ("ddp", "zero1", "full")}
    cfg = next((d["gpt_config"] for d in g.values() if "gpt_config" in d), "?")
    params = next((d["gpt_params"] for d in g.values() if "gpt_params" in d), "?")
    print()
    print(f"### Memory per rank: char GPT ({cfg}; {params} parameters), 2 ranks, AdamW; MiB (r0 / r1)")
    print()
    print("| mode | side | peak RSS | RSS before the model | peak - before | params + grads + optimizer state held | "
          "nabla allocator in use at end | step ms |")
    print("|---|---|---|---|---|---|---|---|")
    mib = lambda kib: kib / 1024.0
    labels = {"ddp": "DDP", "zero1": "ZeRO-1", "full": "full sharding"}
    tlabel = {"ddp": "PyTorch DDP", "zero1": "PyTorch DDP + ZeroRedundancyOptimizer", "full": "PyTorch FSDP"}
    peaks = {}
    for m in ("ddp", "zero1", "full"):
        for side in ("nabla", "torch"):
            d = g[side, m]
            label = "nabla" if side == "nabla" else tlabel[m]
            if "gpt_unsupported" in d:
                print(f"| {labels[m]} | {label} | not measured: {d['gpt_unsupported'][:120]} | | | | | |")
                continue
            if "gpt_peak_rss_kib_r0" not in d:
                print(f"| {labels[m]} | {label} | n/a (the run failed) | | | | | |")
                continue
            r = [k for k in (0, 1) if f"gpt_peak_rss_kib_r{k}" in d]
            pk = [mib(int(d[f"gpt_peak_rss_kib_r{k}"])) for k in r]
            st = [mib(int(d[f"gpt_start_rss_kib_r{k}"])) for k in r]
            held = [sum(int(d[f"gpt_{x}_bytes_r{k}"]) for x in ("param", "grad", "optim")) / 2**20 for k in r]
            used = " / ".join("%.0f" % mib(int(d[f"gpt_alloc_used_kib_r{k}"])) for k in r) if "gpt_alloc_used_kib_r0" in d else "-"
            peaks[side, m] = pk[0]
            print(f"| {labels[m]} | {label} | {' / '.join('%.0f' % x for x in pk)} | {' / '.join('%.0f' % x for x in st)} | "
                  f"{' / '.join('%.0f' % (a - b) for a, b in zip(pk, st))} | {' / '.join('%.1f' % x for x in held)} | "
                  f"{used} | {d.get('gpt_step_ms', 'n/a')} |")
    print()
    for m in ("ddp", "zero1", "full"):
        if ("nabla", m) in peaks and ("torch", m) in peaks:
            print(f"{labels[m]}: nabla/PyTorch peak RSS of rank 0 {peaks['nabla', m] / peaks['torch', m]:.2f}")
    if ("nabla", "ddp") in peaks:
        for m in ("zero1", "full"):
            if ("nabla", m) in peaks:
                print(f"nabla {labels[m]}: rank 0's peak RSS {peaks['nabla', m] - peaks['nabla', 'ddp']:+.0f} MiB against DDP's")

if floors:
    print()
    print("Floors (issue 14):")
    for line in floors:
        print(line)
EOF
if [ "$failed" -gt 0 ]; then
    echo "run_dist.sh: $failed benchmark run(s) failed (see above)" >&2
    exit 1
fi
