#!/usr/bin/env bash
# Makes the Python environment that bench/run_compile.sh runs PyTorch 2's torch.compile in: a
# virtual environment with the pinned packages of scripts/torch2_requirements.txt, all from PyPI
# (torch 2.15.0's Linux wheel pulls its CUDA runtime packages too, about 3-4 GB, although the
# benchmarks run on the CPU only), made or reused by scripts/venv.sh. Prints the environment's
# python on stdout (progress goes to stderr).
#
# Usage: scripts/torch2_env.sh [DIR]   (default: .venv-torch2 at the repository root)
#   PYTHON=...  (environment) the interpreter the environment is made from (default /usr/bin/python3,
#               Debian's, with python3-venv; Inductor compiles its C++ kernels with g++ and needs
#               the interpreter's headers, python3-dev)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
base=${PYTHON:-/usr/bin/python3}
[ -x "$base" ] || base=$(command -v python3)
if [ ! -f "$("$base" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ]; then
    echo "torch2_env.sh: warning: no Python.h for $base; Inductor's C++ kernels may fail to build (apt-get install python3-dev)" >&2
fi
exec "$root/scripts/venv.sh" "$root/scripts/torch2_requirements.txt" "${1:-$root/.venv-torch2}" \
    'import sys, torch, torch._inductor, numpy; print("torch2_env.sh: torch", torch.__version__, "numpy", numpy.__version__, file=sys.stderr)'
