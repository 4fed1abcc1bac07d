#!/usr/bin/env bash
# Quickstart, step 1: install what is missing, build nabla, and run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
echo "== main job: the DESIGN.md MLP trained on Fashion-MNIST for 3 epochs =="
./build/examples/mlp 3
