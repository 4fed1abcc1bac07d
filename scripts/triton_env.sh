#!/usr/bin/env bash
# Makes the Python environment of the tritonclient test of nabla serve: tritonclient[http] and
# what it needs, pinned in scripts/triton_requirements.txt, from PyPI (about 40 MB), made or
# reused by scripts/venv.sh. Prints the environment's python on stdout (progress goes to stderr).
#
# Usage: scripts/triton_env.sh [DIR]   (default: .venv-triton at the repository root)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exec "$root/scripts/venv.sh" "$root/scripts/triton_requirements.txt" "${1:-$root/.venv-triton}" \
    'import sys, tritonclient.http, numpy; print("triton_env.sh: tritonclient", tritonclient.http.__name__, file=sys.stderr)'
