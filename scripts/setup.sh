#!/usr/bin/env bash
# Quickstart, step 1: install what is missing, build nabla, and run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
echo "== main job: nabla train (the 784-128-10 MLP on Fashion-MNIST) =="
./build/nabla train --epochs 3
