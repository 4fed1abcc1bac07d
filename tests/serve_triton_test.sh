#!/usr/bin/env bash
# ctest serve_triton: makes (or reuses) the tritonclient environment of scripts/triton_env.sh and
# the ONNX models of tests/serve_test.py (Debian's PyTorch), then runs tests/serve_triton_test.py.
# Skipped (77) when the environment cannot be made (no PyPI) or torch is missing.
# Usage: serve_triton_test.sh SOURCE_DIR NABLA_BINARY WORKDIR
set -uo pipefail
src=$1 nabla=$2 work=$3
py=$("$src/scripts/triton_env.sh" "$src/.venv-triton") || { echo "SKIP: the tritonclient environment could not be made"; exit 77; }
/usr/bin/python3 "$src/tests/serve_test.py" --models "$work" || exit $?
exec "$py" "$src/tests/serve_triton_test.py" "$nabla" "$work"
