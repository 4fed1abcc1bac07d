#!/usr/bin/env bash
# Makes the Python environment that bench/run_compile.sh runs PyTorch 2's torch.compile in: a
# virtual environment with the pinned packages of scripts/torch2_requirements.txt, all from PyPI
# (torch 2.15.0's Linux wheel pulls its CUDA runtime packages too, about 3-4 GB, although the
# benchmarks run on the CPU only). Idempotent: a second run finds the environment made from the
# same pins and reuses it; changed pins rebuild it. Prints the environment's python on stdout
# (progress goes to stderr).
#
# Usage: scripts/torch2_env.sh [DIR]   (default: .venv-torch2 at the repository root)
#   PYTHON=...  (environment) the interpreter the environment is made from (default /usr/bin/python3,
#               Debian's, with python3-venv; Inductor compiles its C++ kernels with g++ and needs
#               the interpreter's headers, python3-dev)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/.venv-torch2}
reqs="$root/scripts/torch2_requirements.txt"
base=${PYTHON:-/usr/bin/python3}
[ -x "$base" ] || base=$(command -v python3)
stamp="$dir/.nabla-requirements"
py="$dir/bin/python"

if [ -x "$py" ] && [ -f "$stamp" ] && cmp -s "$stamp" "$reqs" &&
   "$py" -c 'import torch, numpy' 2>/dev/null; then
    echo "torch2_env.sh: reusing $dir" >&2
    echo "$py"
    exit 0
fi

if ! "$base" -c 'import venv, ensurepip' 2>/dev/null; then
    echo "torch2_env.sh: $base cannot make a virtual environment; install python3-venv (apt-get install python3-venv)" >&2
    exit 1
fi
if [ ! -f "$("$base" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ]; then
    echo "torch2_env.sh: warning: no Python.h for $base; Inductor's C++ kernels may fail to build (apt-get install python3-dev)" >&2
fi

echo "torch2_env.sh: making $dir from $base with $(basename "$reqs")" >&2
rm -rf "$dir"
"$base" -m venv "$dir"
"$py" -m pip install --disable-pip-version-check -q --upgrade pip==26.3 >&2
# --only-binary: wheels only, nothing built here; --no-deps is not used, so a pin missing from
# the file would show as an unpinned install in `pip freeze`, not as a broken environment
"$py" -m pip install --disable-pip-version-check -q --only-binary=:all: -r "$reqs" >&2
"$py" -c 'import torch, torch._inductor, numpy; print("torch2_env.sh: torch", torch.__version__, "numpy", numpy.__version__)' >&2
cp "$reqs" "$stamp"
echo "$py"
