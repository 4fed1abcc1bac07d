#!/usr/bin/env bash
# The CUDA backend's check on a lent GPU machine (docs/cuda.md), in one call of at most 8 minutes:
# builds nabla there with nvcc (the library without optional dependencies, only the targets
# needed), runs the CUDA tests (test_cuda, and test_backend_ops, which replays every recorded op
# on the GPU against the cpu), then benchmarks nabla and PyTorch eager on the same GPU, one after
# the other (matmul 4096 f32/TF32/bf16, the seed MLP's samples/s, a GPT-2-small training step
# 8x1024 AdamW, peak device memory), and writes $OUT/gpu_check.md (the table, with the floors
# the issue sets) beside its logs. It prints the table last.
#
# The device machine reaches no network: jansson (the library's JSON parser) and cmocka (the
# tests) travel as Debian packages, cuDNN's headers as files, all in .deps/ (ignored by git).
#   1. here, once (needs apt and the network):   scripts/gpu_check.sh --fetch-deps
#   2. the device tool's call, from the repository root:
#        run(command="scripts/gpu_check.sh", carry=[".deps"], timeout_s=480)
# Without a GPU (this machine) the same command builds, the GPU tests report skipped, and the
# benchmarks are left out: `scripts/gpu_check.sh` writes to ./gpu_check_out when OUT is unset.
# --dry-run: the environment and the commands it would run, nothing built.
set -uo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
budget=465 # seconds for the whole run (the call is given 480)
start=$(date +%s)
left() { echo $((budget - ($(date +%s) - start))); }
# a stage's timeout: its own cap, or what is left of the budget less a reserve for the report
cap() { local l; l=$(($(left) - 15)); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }

if [ "${1:-}" = --fetch-deps ]; then
  set -e
  mkdir -p .deps/cudnn-include
  (cd .deps && apt-get download libjansson4 libjansson-dev libcmocka0 libcmocka-dev)
  cp /usr/local/cuda/include/cudnn*.h .deps/cudnn-include/
  grep -qx '/.deps/' .gitignore 2>/dev/null || echo "note: .deps/ must be ignored by git (it is in .gitignore on this branch)"
  find .deps -type f | sort
  exit 0
fi
dry=false
[ "${1:-}" = --dry-run ] && dry=true

out="${OUT:-$root/gpu_check_out}"
mkdir -p "$out"
report="$out/gpu_check.md"
jobs="$(nproc)"
build="$root/build-gpu"
note() { echo "$*" | tee -a "$out/env.txt"; }
: >"$out/env.txt"

# ---- the machine ----
note "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $jobs cores, $(uname -m)"
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo none)"
export PATH="$PATH:/usr/local/cuda/bin"
note "nvcc: $(nvcc --version 2>/dev/null | tail -n 2 | head -n 1 || echo none)"
note "cmake: $(cmake --version 2>/dev/null | head -n 1 || echo none); ninja: $(ninja --version 2>/dev/null || echo none)"
pyinfo=$(python3 -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null || echo none)
note "torch: $pyinfo"

# ---- what the build needs: jansson, cmocka (system or .deps), cuDNN's header, the libraries dlopen finds ----
missing=()
deps_prefix=/tmp/nabla-deps
have_lib() { ldconfig -p 2>/dev/null | grep -q "$1" || [ -e "/usr/lib/x86_64-linux-gnu/$1" ]; }
# (GPU_CHECK_FORCE_DEPS=1 takes them from .deps even where they are installed: to try that path)
if [ -n "${GPU_CHECK_FORCE_DEPS:-}" ] || ! { [ -e /usr/include/jansson.h ] && have_lib libjansson.so; } ||
   ! { [ -e /usr/include/cmocka.h ] && have_lib libcmocka.so; }; then
  if ls .deps/*.deb >/dev/null 2>&1; then
    mkdir -p "$deps_prefix"
    for f in .deps/*.deb; do dpkg -x "$f" "$deps_prefix" || missing+=("unpacking $f"); done
    note "deps: jansson and cmocka unpacked from .deps into $deps_prefix"
  else
    missing+=("jansson/cmocka (not installed; carry .deps made by scripts/gpu_check.sh --fetch-deps)")
  fi
fi
# PyTorch runs with the library path it was given: a toolkit library put first could shadow its own
torch_ld_path="${LD_LIBRARY_PATH:-}"
export CMAKE_PREFIX_PATH="$deps_prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export LD_LIBRARY_PATH="$deps_prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# the pip packages of PyTorch's CUDA (nvidia-cublas, nvidia-cudnn-cu13) hold the libraries, and
# cuDNN's headers when the toolkit lacks them
pydirs=$(python3 - 2>/dev/null <<'PY'
import importlib
for name in ("nvidia.cublas", "nvidia.cudnn", "nvidia.cu13"):
    try:
        m = importlib.import_module(name)
        print(list(m.__path__)[0])
    except Exception:
        pass
PY
)
cudnn_inc=""
for d in /usr/local/cuda/include /usr/include $pydirs; do
  for inc in "$d" "$d/include"; do
    [ -z "$cudnn_inc" ] && [ -e "$inc/cudnn.h" ] && cudnn_inc="$inc"
  done
done
[ -z "$cudnn_inc" ] && [ -e .deps/cudnn-include/cudnn.h ] && cudnn_inc="$root/.deps/cudnn-include"
[ -z "$cudnn_inc" ] && missing+=("cudnn.h (carry .deps made by scripts/gpu_check.sh --fetch-deps)")
for d in $pydirs; do [ -d "$d/lib" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d/lib"; done
[ -d /usr/local/cuda/lib64 ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/usr/local/cuda/lib64"
export LD_LIBRARY_PATH
note "cudnn.h: ${cudnn_inc:-missing}"
note "LD_LIBRARY_PATH: $LD_LIBRARY_PATH"
command -v nvcc >/dev/null || missing+=("nvcc")

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
configure=(cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DNABLA_CUDA=ON
           -DCMAKE_CUDA_ARCHITECTURES=90 "-DNABLA_CUDNN_INCLUDE_DIR=$cudnn_inc" -DNABLA_WITH_BLAS=OFF
           -DNABLA_WITH_DNNL=OFF -DNABLA_WITH_ZLIB=OFF -DNABLA_WITH_PNG=OFF -DNABLA_WITH_JIT=OFF
           -DNABLA_WITH_MPI=OFF -DNABLA_WITH_ONNX=OFF)
targets=(test_cuda test_backend_ops bench_cuda)
if $dry; then
  note "dry run: ${configure[*]}"
  note "dry run: cmake --build $build -j$jobs --target ${targets[*]}"
  note "missing: ${missing[*]:-nothing}"
  exit 0
fi

# ---- build ----
status_build="not run"
if [ ${#missing[@]} -gt 0 ]; then
  status_build="not built: missing ${missing[*]}"
else
  t0=$(date +%s)
  if timeout "$(cap 60)" "${configure[@]}" >"$out/build.log" 2>&1 &&
     timeout "$(cap 220)" cmake --build "$build" -j"$jobs" --target "${targets[@]}" >>"$out/build.log" 2>&1; then
    status_build="built in $(($(date +%s) - t0)) s"
  else
    status_build="FAILED after $(($(date +%s) - t0)) s (build.log)"
  fi
fi
note "build: $status_build"

# ---- tests ----
declare -A test_status
run_test() { # name, then the command
  local name="$1" rc
  shift
  { echo "== $name: $*"; timeout "$(cap 100)" "$@"; } >>"$out/tests.log" 2>&1
  rc=$?
  case $rc in
    0) test_status[$name]="passed" ;;
    77) test_status[$name]="SKIPPED: $(grep -m1 '^SKIPPED: ' "$out/tests.log" | cut -c10-140)" ;;
    124) test_status[$name]="FAILED: timed out" ;;
    *) test_status[$name]="FAILED (exit $rc, tests.log)" ;;
  esac
}
: >"$out/tests.log"
gpu=false
if [[ "$status_build" == built* ]]; then
  run_test "test_cuda --host" "$build/tests/test_cuda" --host
  run_test "test_cuda" "$build/tests/test_cuda"
  run_test "test_backend_ops" "$build/tests/test_backend_ops"
  [ "${test_status[test_cuda]}" != "${test_status[test_cuda]#SKIPPED}" ] || gpu=true
fi

# ---- benchmarks: nabla, then PyTorch, on the same GPU ----
: >"$out/bench_nabla.jsonl"
: >"$out/bench_torch.jsonl"
: >"$out/bench.log"
if $gpu; then
  # section by section, nabla then PyTorch, so a short budget still leaves both sides of a row
  for section in matmul mlp gpt2; do
    (cd "$root" && timeout "$(cap 45)" "$build/bench_cuda" "$section") >>"$out/bench_nabla.jsonl" 2>>"$out/bench.log" ||
      echo "bench_cuda $section: exit $?" >>"$out/bench.log"
    (cd "$root" && LD_LIBRARY_PATH="$torch_ld_path" PYTHONUNBUFFERED=1 timeout "$(cap 45)" \
      python3 bench/bench_cuda_torch.py "$section") >>"$out/bench_torch.jsonl" 2>>"$out/bench.log" ||
      echo "bench_cuda_torch.py $section: exit $?" >>"$out/bench.log"
  done
else
  echo "benchmarks left out: no GPU ran the tests" >>"$out/bench.log"
fi

# ---- the report ----
{
  echo "# gpu_check: the CUDA backend on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo 'no GPU')"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), $(($(date +%s) - start)) s in all"
  echo
  echo '```'
  cat "$out/env.txt"
  echo '```'
  echo
  echo "| test | result |"
  echo "| --- | --- |"
  for k in "test_cuda --host" "test_cuda" "test_backend_ops"; do echo "| $k | ${test_status[$k]:-not run} |"; done
  echo
  python3 - "$out/bench_nabla.jsonl" "$out/bench_torch.jsonl" <<'PY'
import json, sys
def load(p):
    r = {}
    try:
        for line in open(p):
            line = line.strip()
            if line.startswith("{"):
                o = json.loads(line)
                r[o["name"]] = o
    except OSError:
        pass
    return r
nb, pt = load(sys.argv[1]), load(sys.argv[2])
# name, what, floor: (kind, factor); "ge": nabla >= factor * torch, "le": nabla <= factor * torch
rows = [("matmul_f32", "matmul 4096 f32 (GFLOP/s)", ("ge", 0.9)),
        ("matmul_tf32", "matmul 4096 TF32 (GFLOP/s)", ("ge", 0.9)),
        ("matmul_bf16", "matmul 4096 bf16 (GFLOP/s)", ("ge", 0.9)),
        ("mlp_samples_per_s", "seed MLP batch 64 (samples/s)", ("ge", 2.0)),
        ("mlp_peak_memory", "seed MLP peak device memory (MiB)", None),
        ("gpt2_step_ms", "GPT-2 small step 8x1024 AdamW (ms)", ("le", 1.0)),
        ("gpt2_tokens_per_s", "GPT-2 small (tokens/s)", None),
        ("gpt2_peak_memory", "GPT-2 small peak device memory (MiB)", None)]
def cell(o):
    if not o: return "not run"
    if "error" in o: return "error: " + o["error"][:100]
    return f"{o['value']:.4g}"
if not nb and not pt:
    print("Benchmarks: not run (no GPU ran the tests).")
else:
    if "torch" in pt: print(f"PyTorch {pt['torch']['unit']}\n")
    print("| measurement | nabla | PyTorch eager | nabla / PyTorch | floor | met |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, what, floor in rows:
        a, b = nb.get(name), pt.get(name)
        ratio, met, fl = "", "", ""
        if floor:
            fl = (f">= {floor[1]:g}x" if floor[0] == "ge" else f"<= {floor[1]:g}x")
        if a and b and "value" in a and "value" in b and b["value"]:
            r = a["value"] / b["value"]
            ratio = f"{r:.3g}"
            if floor:
                met = "yes" if (r >= floor[1] if floor[0] == "ge" else r <= floor[1]) else "NO"
        elif floor:
            met = "NO (not measured)"
        print(f"| {what} | {cell(a)} | {cell(b)} | {ratio} | {fl} | {met} |")
PY
  echo
  echo "Logs: env.txt, build.log, tests.log, bench.log, bench_nabla.jsonl, bench_torch.jsonl."
} >"$report"
cat "$report"
