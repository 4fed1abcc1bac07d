#!/usr/bin/env bash
# The ONNX import checks that need the PyPI environment (scripts/onnx_env.sh: onnx, onnxruntime):
#   conformance: writes ONNX's node tests into the build tree once (again when the generator
#                changes), then runs them all through onnx_conformance
#   ort:         writes the onnx.helper models and ONNX Runtime's outputs (tests/onnx_import_ref.py),
#                then checks nabla's outputs within 1e-4, eagerly and compiled
#   torch:       exports torchvision's ResNet-18 and an nn.TransformerEncoder with torch.onnx.export
#                (tests/onnx_torch_export.py, on TORCH_PYTHON: Debian's torch and torchvision),
#                writes ONNX Runtime's outputs at batch 2 and 1 (tests/onnx_torch_ref.py), then
#                checks nabla's within 1e-4, eagerly and compiled
#   schema:      compares the operator table's attribute schemas with onnx's (tests/onnx_attr_schema.py)
#   doc:         checks that docs/onnx.md's import section is what the operator table generates
# Usage: tests/onnx_import_test.sh MODE SOURCE_DIR BUILD_DIR ONNX_CONFORMANCE [RUNNER ARGS...]
set -euo pipefail
mode=$1 src=$2 build=$3 runner=$4
shift 4
case "$mode" in
conformance)
    py=$("$src/scripts/onnx_env.sh")
    data="$build/onnx_node_data"
    if [ ! -f "$data/manifest.tsv" ] || [ "$src/tests/onnx_node_data.py" -nt "$data/manifest.tsv" ]; then
        "$py" "$src/tests/onnx_node_data.py" "$data" 2>/dev/null
    fi
    exec "$runner" "$data" "$@"
    ;;
ort)
    py=$("$src/scripts/onnx_env.sh")
    data="$build/onnx_import_ref"
    "$py" "$src/tests/onnx_import_ref.py" "$data"
    "$runner" "$data" --rtol 1e-4 --atol 1e-5
    "$runner" "$data" --rtol 1e-4 --atol 1e-5 --compile
    echo "onnx_import_ref: all passed"
    ;;
torch)
    py=$("$src/scripts/onnx_env.sh")
    torch_py=${TORCH_PYTHON:-/usr/bin/python3}
    if ! "$torch_py" -c 'import torch, torchvision' 2>/dev/null; then
        echo "SKIPPED: $torch_py has no torch and torchvision (scripts/deps.sh installs python3-torch and python3-torchvision)"
        exit 0
    fi
    models="$build/onnx_torch_models" data="$build/onnx_torch_ref"
    "$torch_py" "$src/tests/onnx_torch_export.py" "$models"
    "$py" "$src/tests/onnx_torch_ref.py" "$models" "$data"
    "$runner" "$data" --rtol 1e-4 --atol 1e-5
    "$runner" "$data" --rtol 1e-4 --atol 1e-5 --compile
    echo "onnx_torch_models: all passed"
    ;;
schema)
    py=$("$src/scripts/onnx_env.sh")
    tmp=$(mktemp)
    trap 'rm -f "$tmp"' EXIT
    "$runner" --attrs "$tmp"
    "$py" "$src/tests/onnx_attr_schema.py" "$tmp"
    ;;
doc)
    tmp=$(mktemp)
    trap 'rm -f "$tmp" "$tmp.cur"' EXIT
    "$runner" --doc "$tmp"
    # the section between the markers in docs/onnx.md
    sed -n '/<!-- import: generated/,/<!-- end import -->/p' "$src/docs/onnx.md" | sed '1d;$d' > "$tmp.cur"
    diff -u "$tmp.cur" "$tmp" || { echo "docs/onnx.md's import section is stale: regenerate it (see docs/onnx.md)"; exit 1; }
    echo "docs/onnx.md import section current"
    ;;
*) echo "unknown mode $mode" >&2; exit 2 ;;
esac
