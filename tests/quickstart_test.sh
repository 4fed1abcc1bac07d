#!/usr/bin/env bash
# Runs the README quickstart's first command as written (from the source tree), and checks that
# the main job ends with a test accuracy and leaves its files. Usage: quickstart_test.sh SOURCE_DIR
set -euo pipefail
src="$1"
cd "$src"
cmd="$(awk '/^## Quickstart/{f=1} f&&/^```sh/{c=1;next} c{print; exit}' README.md | sed 's/ *#.*//')"
[ "$cmd" = "scripts/setup.sh" ] || { echo "the quickstart's first command changed: '$cmd'"; exit 1; }
out="$($cmd 2>&1)"
echo "$out" | tail -n 6
grep -q "^test accuracy 0\.[89]" <<<"$out"
test -s runs/mlp/latest/model.safetensors && test -s runs/mlp/latest/curves.svg && test -s runs/mlp/latest/checkpoint.safetensors
