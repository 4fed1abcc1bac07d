#!/usr/bin/env bash
# Makes the Python environment of the ONNX tests: onnx (checker, conformance suite) and ONNX
# Runtime, pinned in scripts/onnx_requirements.txt, from PyPI (about 60 MB), made or reused by
# scripts/venv.sh. Prints the environment's python on stdout (progress goes to stderr).
#
# Usage: scripts/onnx_env.sh [DIR]   (default: .venv-onnx at the repository root)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exec "$root/scripts/venv.sh" "$root/scripts/onnx_requirements.txt" "${1:-$root/.venv-onnx}" \
    'import sys, onnx, onnxruntime, numpy; print("onnx_env.sh: onnx", onnx.__version__, "onnxruntime", onnxruntime.__version__, file=sys.stderr)'
